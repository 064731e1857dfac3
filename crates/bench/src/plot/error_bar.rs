//! Error-bar charts: per category a value and the ends of its whisker (a median with its p10
//! and p90, say), one line per series, in panels side by side over the same categories.

use super::legend::{LEGEND_ROW, LegendKey, draw_legend, legend_rows, line_style, marker};
use super::scale::{LIMIT, decades, floor_below, padded, tick_label};
use super::{
    AXIS_LABEL_SIZE, CAP_HALF, FONT, MARGIN, MIN_SIZE, PlotError, SLOT, TICK_SIZE, TITLE_SIZE,
    Y_LABEL_AREA, centre, render_png,
};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::error::Error;
use std::path::Path;

/// One point of an error-bar chart: a central value (a median, say) and the ends of its whisker
/// (the 10th and 90th percentiles, say).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorBar {
    /// Where the marker sits.
    pub value: f64,
    /// The lower end of the whisker.
    pub low: f64,
    /// The upper end of the whisker.
    pub high: f64,
}

/// One line of an error-bar chart: its name in the legend and a point per x category, in the
/// order of the categories (`None` where it has no data).
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    /// The name in the legend.
    pub label: &'a str,
    /// One entry per category.
    pub points: &'a [Option<ErrorBar>],
}

/// One panel of an error-bar figure: its own title, y axis and lines over the shared categories.
#[derive(Debug, Clone, Copy)]
pub struct Panel<'a> {
    /// Above the panel.
    pub title: &'a str,
    /// Along the y axis.
    pub y_label: &'a str,
    /// The lines, drawn in this order; the i-th line of every panel gets the same colour and
    /// marker, so one legend (that of the first panel's lines) serves them all.
    pub lines: &'a [Line<'a>],
    /// A log10 y axis spanning whole decades; values `<= 0` are clamped as the
    /// [module docs](super) describe.
    pub log_scale: bool,
}

/// Draws `panels` side by side over the same x `categories` (each line a marker per category
/// with a whisker from `low` to `high`, joined to its neighbours), with one legend below them
/// all, and writes a `width` x `height` PNG to `path`.
///
/// The lines of a category are spread a little apart so that their whiskers do not hide each
/// other. A linear y axis starts at zero unless some value is negative. A line with a
/// different number of points than there are categories is an error
/// ([`PlotError::Draw`]); a panel with no finite point at all is [`PlotError::NoData`].
pub fn error_bar_png(
    path: &Path,
    x_label: &str,
    categories: &[&str],
    panels: &[Panel<'_>],
    (width, height): (u32, u32),
) -> Result<(), PlotError> {
    let draw_error = |source| PlotError::Draw {
        path: path.into(),
        source,
    };
    if let Some((panel, line)) = panels.iter().find_map(|p| {
        p.lines
            .iter()
            .find(|l| l.points.len() != categories.len())
            .map(|l| (p, l))
    }) {
        let message = format!(
            "line `{}` of panel `{}` has {} points for {} categories",
            line.label,
            panel.title,
            line.points.len(),
            categories.len()
        );
        return Err(draw_error(message.into()));
    }
    let charts: Vec<BarChart<'_>> = panels
        .iter()
        .map(BarChart::of)
        .collect::<Option<_>>()
        .ok_or_else(|| PlotError::NoData { path: path.into() })?;
    if categories.is_empty() {
        return Err(PlotError::NoData { path: path.into() });
    }
    let min_width = MIN_SIZE.0 * panels.len().max(1) as u32;
    if width < min_width || height < MIN_SIZE.1 {
        let message = format!(
            "{width}x{height} pixels is too small for {} panels; use at least {min_width}x{}",
            panels.len(),
            MIN_SIZE.1
        );
        return Err(draw_error(message.into()));
    }

    let labels: Vec<&str> = panels
        .first()
        .map(|p| p.lines.iter().map(|l| l.label).collect())
        .unwrap_or_default();
    render_png(path, (width, height), |root| {
        root.fill(&WHITE)?;
        let legend_rows = legend_rows(root, &labels, width, LegendKey::Marker)?;
        let legend_height = LEGEND_ROW * legend_rows.len() as u32 + MARGIN;
        let (plots, legend) = root.split_vertically(height.saturating_sub(legend_height));
        for (area, chart) in plots.split_evenly((1, charts.len())).iter().zip(&charts) {
            chart.draw(area, x_label, categories)?;
        }
        draw_legend(&legend, &legend_rows, LegendKey::Marker)
    })
}

/// One panel of [`error_bar_png`] after clamping, ready to draw.
struct BarChart<'a> {
    title: &'a str,
    y_label: &'a str,
    log_scale: bool,
    /// Per line, per category: value, low, high.
    lines: Vec<Vec<Option<ErrorBar>>>,
    min: f64,
    max: f64,
}

impl<'a> BarChart<'a> {
    /// The panel with every number clamped as the module docs say; `None` if it has no point.
    fn of(panel: &Panel<'a>) -> Option<Self> {
        let finite = || {
            panel
                .lines
                .iter()
                .flat_map(|l| l.points.iter().flatten())
                .filter(|p| p.value.is_finite())
        };
        let lowest = if panel.log_scale {
            floor_below(finite().flat_map(|p| [p.value, p.low, p.high]))
        } else {
            -LIMIT
        };
        let clamp = |v: f64| v.clamp(lowest, LIMIT);
        let lines: Vec<Vec<Option<ErrorBar>>> = panel
            .lines
            .iter()
            .map(|l| {
                l.points
                    .iter()
                    .map(|p| {
                        let p = p.filter(|p| p.value.is_finite())?;
                        let end = |v: f64| clamp(if v.is_finite() { v } else { p.value });
                        let (value, low, high) = (clamp(p.value), end(p.low), end(p.high));
                        Some(ErrorBar {
                            value,
                            low: low.min(value),
                            high: high.max(value),
                        })
                    })
                    .collect()
            })
            .collect();
        let (min, max) = lines
            .iter()
            .flatten()
            .flatten()
            .map(|p| (p.low, p.high))
            .reduce(|(lo, hi), (low, high)| (lo.min(low), hi.max(high)))?;
        Some(Self {
            title: panel.title,
            y_label: panel.y_label,
            log_scale: panel.log_scale,
            lines,
            min,
            max,
        })
    }

    fn draw(
        &self,
        area: &DrawingArea<BitMapBackend<'_>, Shift>,
        x_label: &str,
        categories: &[&str],
    ) -> Result<(), Box<dyn Error + Send + Sync>> {
        if self.log_scale {
            let (lo, hi) = decades(self.min, self.max);
            self.draw_on(area, x_label, categories, (lo..hi).log_scale())
        } else {
            // From zero when nothing is negative, so that heights compare as ratios.
            let (lo, hi) = padded(self.min.min(0.0), self.max);
            self.draw_on(area, x_label, categories, lo..hi)
        }
    }

    fn draw_on<Y>(
        &self,
        area: &DrawingArea<BitMapBackend<'_>, Shift>,
        x_label: &str,
        categories: &[&str],
        y: Y,
    ) -> Result<(), Box<dyn Error + Send + Sync>>
    where
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let slots = categories.len() as i32;
        let mut chart = ChartBuilder::on(area)
            .caption(self.title, (FONT, TITLE_SIZE))
            .margin(MARGIN)
            .x_label_area_size(2 * (TICK_SIZE + AXIS_LABEL_SIZE))
            .y_label_area_size(Y_LABEL_AREA)
            .build_cartesian_2d(
                (0..slots * SLOT).with_key_points((0..slots).map(centre).collect()),
                y,
            )?;
        let category = |x: &i32| {
            let slot = x.div_euclid(SLOT) as usize;
            categories.get(slot).copied().unwrap_or_default().to_owned()
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&category)
            .x_desc(x_label)
            .y_desc(self.y_label)
            .y_label_formatter(&|v| tick_label(*v))
            .label_style((FONT, TICK_SIZE))
            .axis_desc_style((FONT, AXIS_LABEL_SIZE))
            .draw()?;
        // Lines side by side within a slot, a tenth of a slot apart at most.
        let count = self.lines.len() as i32;
        let step = (SLOT / 2 / count.max(1)).min(SLOT / 10);
        for (i, line) in self.lines.iter().enumerate() {
            let (color, _) = line_style(i);
            let offset = step * (2 * i as i32 - (count - 1)) / 2;
            let at = |slot: usize| centre(slot as i32) + offset;
            let present: Vec<(usize, ErrorBar)> = line
                .iter()
                .enumerate()
                .filter_map(|(slot, p)| p.map(|p| (slot, p)))
                .collect();
            for pair in present.windows(2) {
                let [(a, pa), (b, pb)] = pair else { continue };
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(at(*a), pa.value), (at(*b), pb.value)],
                    color.mix(0.6).stroke_width(2),
                )))?;
            }
            for (slot, p) in &present {
                let x = at(*slot);
                let cap = |y| {
                    PathElement::new(
                        vec![(x - CAP_HALF / 3, y), (x + CAP_HALF / 3, y)],
                        color.stroke_width(2),
                    )
                };
                chart.draw_series([
                    PathElement::new(vec![(x, p.low), (x, p.high)], color.stroke_width(2)),
                    cap(p.low),
                    cap(p.high),
                ])?;
                chart.draw_series(std::iter::once(marker((x, p.value), i)))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::tests::assert_drawn_png;

    fn bar(value: f64, low: f64, high: f64) -> Option<ErrorBar> {
        Some(ErrorBar { value, low, high })
    }

    #[test]
    fn renders_two_error_bar_panels_to_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("figure.png");
        let fast = [bar(1.0, 0.5, 2.0), None, bar(1.2, 0.6, 2.5)];
        let slow = [
            bar(20.0, 10.0, 40.0),
            bar(30.0, 15.0, 60.0),
            bar(45.0, 20.0, 90.0),
        ];
        let rate = [
            bar(9_000.0, 8_500.0, 9_500.0),
            bar(9_200.0, 9_000.0, 9_900.0),
            bar(f64::NAN, 1.0, 2.0),
        ];
        let latency = [
            Line {
                label: "mote put",
                points: &fast,
            },
            Line {
                label: "etcd put",
                points: &slow,
            },
        ];
        let throughput = [
            Line {
                label: "mote put",
                points: &rate,
            },
            Line {
                label: "etcd put",
                points: &slow,
            },
        ];
        let panels = [
            Panel {
                title: "(a) median latency",
                y_label: "ms",
                lines: &latency,
                log_scale: true,
            },
            Panel {
                title: "(b) throughput",
                y_label: "requests/s",
                lines: &throughput,
                log_scale: false,
            },
        ];
        error_bar_png(
            &path,
            "cluster size",
            &["1", "3", "5"],
            &panels,
            (1200, 500),
        )
        .unwrap();
        assert_drawn_png(&path);
    }

    #[test]
    fn error_bar_panels_need_data_and_one_point_per_category() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.png");
        let nothing = [None, bar(f64::INFINITY, 1.0, 2.0)];
        let lines = [Line {
            label: "a",
            points: &nothing,
        }];
        let panel = Panel {
            title: "t",
            y_label: "y",
            lines: &lines,
            log_scale: true,
        };
        let err = error_bar_png(&path, "x", &["1", "3"], &[panel], (800, 500)).unwrap_err();
        assert!(matches!(err, PlotError::NoData { .. }), "{err:?}");

        let short = [bar(1.0, 1.0, 1.0)];
        let lines = [Line {
            label: "short",
            points: &short,
        }];
        let panel = Panel {
            lines: &lines,
            ..panel
        };
        let err = error_bar_png(&path, "x", &["1", "3"], &[panel], (800, 500)).unwrap_err();
        assert!(matches!(err, PlotError::Draw { .. }), "{err:?}");
        assert!(err.to_string().contains("`short`"), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn error_bars_are_clamped_and_ordered() {
        let points = [
            bar(100.0, 0.0, f64::NAN),
            bar(5.0, 7.0, 2.0),
            bar(f64::NAN, 1.0, 2.0),
        ];
        let lines = [Line {
            label: "a",
            points: &points,
        }];
        let panel = Panel {
            title: "t",
            y_label: "y",
            lines: &lines,
            log_scale: true,
        };
        let chart = BarChart::of(&panel).unwrap();
        // The floor is a decade below the smallest positive value (2), so 0.1; a NaN end is
        // drawn at the value; a whisker end on the wrong side of the value is moved to it.
        assert_eq!(chart.lines[0][0], bar(100.0, 0.1, 100.0));
        assert_eq!(chart.lines[0][1], bar(5.0, 5.0, 5.0));
        assert_eq!(chart.lines[0][2], None);
        assert_eq!((chart.min, chart.max), (0.1, 100.0));
    }
}
