//! Empirical distribution functions: for each series a step line of the fraction of its samples
//! at or below each x, over one linear x axis, with a legend below.

use super::legend::{ECDF_STROKE, LEGEND_ROW, LegendKey, draw_legend, ecdf_color, legend_rows};
use super::scale::{LIMIT, padded, tick_label};
use super::{
    AXIS_LABEL_SIZE, FONT, MARGIN, PlotError, Series, TICK_SIZE, TITLE_SIZE, Y_LABEL_AREA,
    render_png,
};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// The size of an ECDF plot, in pixels.
const ECDF_SIZE: (u32, u32) = (800, 500);

/// Draws the empirical distribution function of each series as a step line (at each x, the
/// fraction of its samples `<= x`), all over one linear x axis labelled `x_label`, with `title`
/// above and a legend of the series' labels below, and writes an 800 x 500 PNG to `path`, which
/// it returns.
///
/// The file is a PNG whatever the extension of `path`. The lines get distinct colours, in the
/// order of `series` (after ten they repeat). Values that are NaN or infinite are ignored, and a
/// series with none left stays in the legend, as the [module docs](super) describe; if no series
/// has a value, this fails with [`PlotError::NoData`].
pub fn ecdf_png(
    path: &Path,
    title: &str,
    x_label: &str,
    series: &[Series<'_>],
) -> Result<PathBuf, PlotError> {
    let lines: Vec<Vec<(f64, f64)>> = series.iter().map(|s| ecdf_steps(s.values)).collect();
    let Some((min, max)) = lines
        .iter()
        .filter_map(|steps| Some((steps.first()?.0, steps.last()?.0)))
        .reduce(|(lo, hi), (min, max)| (lo.min(min), hi.max(max)))
    else {
        return Err(PlotError::NoData { path: path.into() });
    };
    // From zero when nothing is negative, so that positions compare as ratios.
    let (lo, hi) = padded(min.min(0.0), max);
    let labels: Vec<String> = series
        .iter()
        .zip(&lines)
        .map(|(s, steps)| {
            if steps.is_empty() {
                format!("{} (no data)", s.label)
            } else {
                s.label.to_owned()
            }
        })
        .collect();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    let (width, height) = ECDF_SIZE;
    render_png(path, ECDF_SIZE, |root| {
        root.fill(&WHITE)?;
        let rows = legend_rows(root, &labels, width, LegendKey::Stroke)?;
        let legend_height = LEGEND_ROW * rows.len() as u32 + MARGIN;
        let (plot, legend) = root.split_vertically(height.saturating_sub(legend_height));
        // A little room above 1 and below 0, so that the lines' ends do not hide in the axis.
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, (FONT, TITLE_SIZE))
            .margin(MARGIN)
            .x_label_area_size(2 * (TICK_SIZE + AXIS_LABEL_SIZE))
            .y_label_area_size(Y_LABEL_AREA)
            .build_cartesian_2d(lo..hi, -0.02..1.02)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc("fraction of samples ≤ x")
            // Only the labelled grid lines: a finer grid in both directions hides the steps.
            .light_line_style(WHITE)
            .x_label_formatter(&|v| tick_label(*v))
            .y_label_formatter(&|v| tick_label(*v))
            .label_style((FONT, TICK_SIZE))
            .axis_desc_style((FONT, AXIS_LABEL_SIZE))
            .draw()?;
        for (i, steps) in lines.iter().enumerate().filter(|(_, s)| !s.is_empty()) {
            // Flat at 0 from the left edge, then the steps, then flat at 1 to the right edge.
            let mut points = Vec::with_capacity(steps.len() + 2);
            points.push((lo, 0.0));
            points.extend_from_slice(steps);
            points.push((hi, 1.0));
            chart.draw_series(std::iter::once(PathElement::new(
                points,
                ecdf_color(i).stroke_width(ECDF_STROKE),
            )))?;
        }
        draw_legend(&legend, &rows, LegendKey::Stroke)
    })?;
    Ok(path.into())
}

/// The corners of the step line of the ECDF of `values`, with NaN and infinities left out and
/// the rest clamped to ±1e150: for each distinct value `v` in increasing order, `(v, fraction
/// of the values < v)` then `(v, fraction <= v)`. Empty if no value is finite.
fn ecdf_steps(values: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .map(|v| v.clamp(-LIMIT, LIMIT))
        .collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let mut steps = Vec::new();
    let mut below = 0.0;
    for (i, &v) in sorted.iter().enumerate() {
        // Equal values make one step, at the last of them.
        if sorted.get(i + 1) == Some(&v) {
            continue;
        }
        let at_or_below = (i + 1) as f64 / n;
        steps.push((v, below));
        steps.push((v, at_or_below));
        below = at_or_below;
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::tests::assert_drawn_png;

    #[test]
    fn renders_ecdfs_to_a_png_and_returns_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ecdf.png");
        let fast: Vec<f64> = (1..=50).map(|i| 1.0 + f64::from(i % 7) * 0.1).collect();
        let slow: Vec<f64> = (1..=20).map(|i| 2.0 + f64::from(i) * 0.25).collect();
        let series = [
            Series {
                label: "microtask-based",
                values: &fast,
            },
            Series {
                label: "task-based",
                values: &slow,
            },
            Series {
                label: "empty",
                values: &[f64::NAN],
            },
        ];
        let written = ecdf_png(&path, "makespan", "makespan (s)", &series).unwrap();
        assert_eq!(written, path);
        assert_drawn_png(&path);
    }

    #[test]
    fn ecdf_steps_ignore_nan_and_merge_equal_values() {
        let steps = ecdf_steps(&[3.0, f64::NAN, 1.0, f64::INFINITY, 1.0, -1e200]);
        let quarter = 1.0 / 4.0;
        assert_eq!(
            steps,
            [
                (-LIMIT, 0.0),
                (-LIMIT, quarter),
                (1.0, quarter),
                (1.0, 3.0 * quarter),
                (3.0, 3.0 * quarter),
                (3.0, 1.0),
            ]
        );
        assert!(ecdf_steps(&[f64::NAN, f64::NEG_INFINITY]).is_empty());
    }

    #[test]
    fn an_ecdf_of_nothing_is_an_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nothing.png");
        let series = [
            Series {
                label: "a",
                values: &[],
            },
            Series {
                label: "b",
                values: &[f64::NAN, f64::INFINITY],
            },
        ];
        let err = ecdf_png(&path, "t", "x", &series).unwrap_err();
        assert!(matches!(err, PlotError::NoData { .. }), "{err:?}");
        assert!(err.to_string().contains("nothing.png"), "{err}");
        assert!(!path.exists());
        let err = ecdf_png(&path, "t", "x", &[]).unwrap_err();
        assert!(matches!(err, PlotError::NoData { .. }), "{err:?}");
    }
}
