//! The axes' scales: how far a linear or log axis reaches, where values it cannot place are
//! clamped, and how its ticks are labelled.

use super::Series;

/// The largest magnitude drawn, see the module docs.
pub(super) const LIMIT: f64 = 1e150;

/// The value that values `<= 0` are clamped to on a log scale: see the module docs.
pub(super) fn log_floor(series: &[Series<'_>]) -> f64 {
    floor_below(series.iter().flat_map(|s| s.values).copied())
}

/// One decade below the smallest positive finite value (rounded down to a power of ten), or 1
/// if none is positive.
pub(super) fn floor_below(values: impl Iterator<Item = f64>) -> f64 {
    let smallest = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    if smallest.is_finite() {
        10f64.powf(smallest.log10().floor() - 1.0).max(1.0 / LIMIT)
    } else {
        1.0
    }
}

/// A log axis from `min` to `max` (both positive), widened to whole decades: plotters labels
/// only the powers of ten, so a narrower axis could end up with no labels at all.
pub(super) fn decades(min: f64, max: f64) -> (f64, f64) {
    let lo = 10f64.powf(min.log10().floor());
    let hi = 10f64.powf(max.log10().ceil());
    let hi = if hi > lo { hi } else { lo * 10.0 };
    // plotters finds the powers of ten by repeated multiplication in floating point, which can
    // land a hair outside an axis ending exactly on one and drop its label; a millionth of
    // slack keeps both ends labelled.
    (lo * (1.0 - 1e-6), hi * (1.0 + 1e-6))
}

/// A linear axis from `min` to `max` with a little room at both ends, so that the extreme
/// whisker caps do not sit on the frame; it does not dip below zero for non-negative data.
pub(super) fn padded(min: f64, max: f64) -> (f64, f64) {
    let pad = if max > min {
        (max - min) * 0.05
    } else {
        (max.abs() * 0.1).max(1.0)
    };
    let lo = if min >= 0.0 {
        (min - pad).max(0.0)
    } else {
        min - pad
    };
    (lo, max + pad)
}

/// Formats a y tick value compactly: plain decimals in a readable range, otherwise
/// scientific, and without the float noise (`0.30000000000000004`) plotters' values carry.
pub(super) fn tick_label(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-3..1e6).contains(&magnitude) {
        let text = format!("{value:.3e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        format!("{}e{exponent}", trim_zeros(mantissa))
    } else {
        trim_zeros(&format!("{value:.6}")).to_owned()
    }
}

fn trim_zeros(decimal: &str) -> &str {
    if decimal.contains('.') {
        decimal.trim_end_matches('0').trim_end_matches('.')
    } else {
        decimal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_labelled_without_float_noise() {
        assert_eq!(tick_label(0.30000000000000004), "0.3");
        assert_eq!(tick_label(1500.0), "1500");
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(2.5e7), "2.5e7");
        assert_eq!(tick_label(1e-4), "1e-4");
    }

    #[test]
    fn a_linear_axis_is_padded_and_stays_above_zero_for_positive_data() {
        assert_eq!(padded(0.0, 100.0), (0.0, 105.0));
        assert_eq!(padded(-10.0, 10.0), (-11.0, 11.0));
        assert_eq!(padded(5.0, 5.0), (4.0, 6.0));
    }
}
