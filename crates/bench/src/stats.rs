//! Summaries of measured values that more than one benchmark reports.

/// The median of the finite `values` (the mean of the middle two for an even count), or `None`
/// if there is none: NaN and infinities are failed or missing measurements, not data.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    finite.sort_by(f64::total_cmp);
    let n = finite.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(finite[n / 2]),
        _ => Some((finite[n / 2 - 1] + finite[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_finite_values_and_none_without_any() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median(&[5.0, f64::NAN, 1.0, f64::INFINITY, 3.0]), Some(3.0));
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[]), None);
    }
}
