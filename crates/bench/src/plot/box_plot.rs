//! Box plots: the five-number summary of each series (quartiles interpolated linearly), and a
//! box per series side by side, with x labels turned and shrunk to fit.

use super::scale::{LIMIT, decades, log_floor, padded, tick_label};
use super::{
    AXIS_LABEL_SIZE, BOX_COLOR, CAP_HALF, FONT, GAP, MARGIN, MEDIAN_COLOR, MIN_SIZE, MIN_TICK_SIZE,
    PlotError, SLOT, Series, TICK_SIZE, TITLE_SIZE, Y_LABEL_AREA, centre, render_png,
};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::error::Error;
use std::path::Path;

/// Draws one box plot per series, side by side in the given order, with `title` above and
/// `y_label` along the y axis, and writes a `width` x `height` PNG to `path`.
///
/// The file is a PNG whatever the extension of `path`. With `log_scale`, the y axis is log10
/// and spans whole decades; values `<= 0` are clamped as the [module docs](super) describe.
/// Labels too wide to sit side by side are turned vertical and, if still too long, shrunk.
pub fn box_plot_png(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[Series<'_>],
    log_scale: bool,
    (width, height): (u32, u32),
) -> Result<(), PlotError> {
    let lowest = if log_scale { log_floor(series) } else { -LIMIT };
    let boxes: Vec<_> = series
        .iter()
        .map(|s| Summary::of(s.values, lowest))
        .collect();
    let Some((min, max)) = boxes
        .iter()
        .flatten()
        .map(|b| (b.min, b.max))
        .reduce(|(lo, hi), (min, max)| (lo.min(min), hi.max(max)))
    else {
        return Err(PlotError::NoData { path: path.into() });
    };
    if width < MIN_SIZE.0 || height < MIN_SIZE.1 {
        let (w, h) = MIN_SIZE;
        let message = format!("{width}x{height} pixels is too small; use at least {w}x{h}");
        return Err(PlotError::Draw {
            path: path.into(),
            source: message.into(),
        });
    }
    let plot = Plot {
        title,
        y_label,
        labels: series.iter().map(|s| s.label).collect(),
        boxes,
    };
    render_png(path, (width, height), |root| {
        if log_scale {
            let (lo, hi) = decades(min, max);
            plot.draw(root, (lo..hi).log_scale())
        } else {
            let (lo, hi) = padded(min, max);
            plot.draw(root, lo..hi)
        }
    })
}

/// Half the width of a box, in x-axis units.
const BOX_HALF: i32 = 30;
const NO_DATA_COLOR: RGBColor = RGBColor(128, 128, 128);

/// The five numbers a box shows, after clamping.
#[derive(Debug, Clone, Copy)]
struct Summary {
    min: f64,
    q1: f64,
    median: f64,
    q3: f64,
    max: f64,
}

impl Summary {
    /// The summary of `values` clamped to `lowest..=LIMIT`; `None` if none is finite.
    fn of(values: &[f64], lowest: f64) -> Option<Self> {
        let mut sorted: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .map(|v| v.clamp(lowest, LIMIT))
            .collect();
        sorted.sort_by(f64::total_cmp);
        Some(Self {
            min: *sorted.first()?,
            q1: quantile(&sorted, 0.25),
            median: quantile(&sorted, 0.5),
            q3: quantile(&sorted, 0.75),
            max: *sorted.last()?,
        })
    }
}

/// The `q` quantile of a non-empty sorted slice, interpolating linearly between the two
/// nearest samples (numpy's default, and what plotters' own `Quartiles` does).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = q * (sorted.len() - 1) as f64;
    let below = sorted[rank.floor() as usize];
    let above = sorted[rank.ceil() as usize];
    below + (above - below) * rank.fract()
}

/// Everything [`box_plot_png`] worked out before choosing the y axis type.
struct Plot<'a> {
    title: &'a str,
    y_label: &'a str,
    labels: Vec<&'a str>,
    boxes: Vec<Option<Summary>>,
}

impl Plot<'_> {
    /// Draws the chart on `root` with `y` as the y axis, linear or log.
    fn draw<Y>(
        &self,
        root: &DrawingArea<BitMapBackend<'_>, Shift>,
        y: Y,
    ) -> Result<(), Box<dyn Error + Send + Sync>>
    where
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        root.fill(&WHITE)?;
        let slots = self.labels.len() as i32;
        let (width, height) = root.dim_in_pixel();
        let slot_pixels = (width.saturating_sub(2 * MARGIN + Y_LABEL_AREA) as i32 / slots).max(1);
        let x_labels = self.x_label_style(root, slot_pixels, height)?;

        let mut chart = ChartBuilder::on(root)
            .caption(self.title, (FONT, TITLE_SIZE))
            .margin(MARGIN)
            .x_label_area_size(x_labels.area)
            .y_label_area_size(Y_LABEL_AREA)
            .build_cartesian_2d(
                (0..slots * SLOT).with_key_points((0..slots).map(centre).collect()),
                y,
            )?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            // Only tick marks: the x labels are drawn below, placed to suit their rotation.
            .x_label_formatter(&|_| String::new())
            .y_desc(self.y_label)
            .y_label_formatter(&|v| tick_label(*v))
            .label_style((FONT, TICK_SIZE))
            .axis_desc_style((FONT, AXIS_LABEL_SIZE))
            .draw()?;

        let (_, y_pixels) = chart.plotting_area().get_pixel_range();
        for (slot, (label, summary)) in (0..).zip(self.labels.iter().zip(&self.boxes)) {
            let centre = centre(slot);
            let (x, _) = chart.backend_coord(&(centre, 0.0));
            root.draw_text(label, &x_labels.style, (x, y_pixels.end + GAP))?;
            if let Some(s) = summary {
                chart.draw_series(box_elements(centre, s))?;
            } else {
                let style = TextStyle::from((FONT, TICK_SIZE))
                    .color(&NO_DATA_COLOR)
                    .pos(Pos::new(HPos::Center, VPos::Center));
                let middle = (y_pixels.start + y_pixels.end) / 2;
                root.draw_text("no data", &style, (x, middle))?;
            }
        }
        Ok(())
    }

    /// Horizontal labels if the widest fits its slot; otherwise vertical ones, reading upwards
    /// and ending at the axis, shrunk if needed to fit in a third of the image's height.
    fn x_label_style(
        &self,
        root: &DrawingArea<BitMapBackend<'_>, Shift>,
        slot_pixels: i32,
        height: u32,
    ) -> Result<XLabels<'static>, Box<dyn Error + Send + Sync>> {
        let style = TextStyle::from((FONT, TICK_SIZE));
        let mut widest = 0;
        let mut tallest = 0;
        for label in &self.labels {
            let (w, h) = root.estimate_text_size(label, &style)?;
            widest = widest.max(w);
            tallest = tallest.max(h);
        }
        let gap = GAP as u32;
        if (widest + 2 * gap) as i32 <= slot_pixels {
            return Ok(XLabels {
                style: style.pos(Pos::new(HPos::Center, VPos::Top)),
                area: tallest + 3 * gap,
            });
        }
        let room = height / 3;
        let size = (TICK_SIZE * room / widest.max(1)).clamp(MIN_TICK_SIZE, TICK_SIZE);
        let width_at_size = widest * size / TICK_SIZE;
        Ok(XLabels {
            // Anchored at the right end of the unrotated text, which the rotation puts at the
            // top: the label hangs down from the axis, centred on its box.
            style: TextStyle::from((FONT, size))
                .transform(FontTransform::Rotate270)
                .pos(Pos::new(HPos::Right, VPos::Center)),
            area: (width_at_size + 3 * gap).min(room),
        })
    }
}

/// How the x-axis labels are drawn, and how much height under the axis they need.
struct XLabels<'a> {
    style: TextStyle<'a>,
    area: u32,
}

/// The box, median line, whiskers and whisker caps of one series centred at `x`.
fn box_elements<DB: DrawingBackend>(
    x: i32,
    s: &Summary,
) -> Vec<DynElement<'static, DB, (i32, f64)>> {
    let line = |points: Vec<(i32, f64)>, color: RGBColor, width| {
        PathElement::new(points, color.stroke_width(width)).into_dyn()
    };
    vec![
        Rectangle::new(
            [(x - BOX_HALF, s.q1), (x + BOX_HALF, s.q3)],
            BOX_COLOR.mix(0.25).filled(),
        )
        .into_dyn(),
        Rectangle::new(
            [(x - BOX_HALF, s.q1), (x + BOX_HALF, s.q3)],
            BOX_COLOR.stroke_width(2),
        )
        .into_dyn(),
        line(vec![(x, s.q3), (x, s.max)], BOX_COLOR, 2),
        line(vec![(x, s.q1), (x, s.min)], BOX_COLOR, 2),
        line(
            vec![(x - CAP_HALF, s.max), (x + CAP_HALF, s.max)],
            BOX_COLOR,
            2,
        ),
        line(
            vec![(x - CAP_HALF, s.min), (x + CAP_HALF, s.min)],
            BOX_COLOR,
            2,
        ),
        line(
            vec![(x - BOX_HALF, s.median), (x + BOX_HALF, s.median)],
            MEDIAN_COLOR,
            3,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::tests::{PNG_SIGNATURE, assert_drawn_png};

    #[test]
    fn renders_three_series_to_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("three.png");
        let fast: Vec<f64> = (1..=200).map(|i| 10.0 + f64::from(i % 17)).collect();
        let slow: Vec<f64> = (1..=200).map(|i| 40.0 + f64::from(i % 31) * 2.0).collect();
        let series = [
            Series {
                label: "echo",
                values: &fast,
            },
            Series {
                label: "dna-visualisation",
                values: &slow,
            },
            Series {
                label: "empty",
                values: &[],
            },
        ];
        box_plot_png(
            &path,
            "call latency",
            "latency (µs)",
            &series,
            false,
            (800, 500),
        )
        .unwrap();
        assert_drawn_png(&path);
    }

    #[test]
    fn no_data_is_an_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.png");
        let series = [
            Series {
                label: "a",
                values: &[],
            },
            Series {
                label: "b",
                values: &[f64::NAN],
            },
        ];
        let err = box_plot_png(&path, "t", "y", &series, true, (800, 500)).unwrap_err();
        assert!(matches!(err, PlotError::NoData { .. }), "{err:?}");
        assert!(err.to_string().contains("empty.png"), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn log_scale_clamps_non_positive_values_to_a_decade_below_the_data() {
        let values = [0.0, -5.0, 250.0, 3_000.0];
        let series = [Series {
            label: "a",
            values: &values,
        }];
        let floor = log_floor(&series);
        assert_eq!(floor, 10.0);
        let s = Summary::of(&values, floor).unwrap();
        assert_eq!((s.min, s.max), (10.0, 3_000.0));
        assert_eq!(
            log_floor(&[Series {
                label: "a",
                values: &[0.0, -1.0]
            }]),
            1.0
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.png");
        box_plot_png(&path, "t", "y", &series, true, (800, 500)).unwrap();
        assert!(std::fs::read(&path).unwrap().starts_with(PNG_SIGNATURE));
    }
}
