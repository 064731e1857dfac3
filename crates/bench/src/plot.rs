//! Box plots of benchmark samples, written as PNG files.
//!
//! This module owns turning labelled samples into a picture: the five-number summary of each
//! series, the axis scale, the layout and the PNG file. It draws with `plotters`' bitmap backend
//! and renders text with DejaVu Sans compiled into the binary (through plotters' `ab_glyph`
//! support), so it needs no system fonts, fontconfig or freetype and draws the same everywhere.
//!
//! Each box spans the first to the third quartile with a line at the median; the whiskers reach
//! the smallest and the largest value, without outlier points, because for latencies the
//! extremes are the point. Quartiles interpolate linearly between samples.
//!
//! - Values that are NaN or infinite are ignored.
//! - A series with no (finite) values keeps its slot and label on the x axis, marked "no data",
//!   so that plots of the same benchmarks line up; if no series has a value there is nothing to
//!   plot and [`box_plot_png`] fails with [`PlotError::NoData`].
//! - On a log scale, values `<= 0` cannot be placed, so they are clamped to a floor one decade
//!   below the smallest positive value (rounded down to a power of ten): they sit at the bottom
//!   of the axis, visibly apart from the real data. If no value is positive the floor is 1.
//! - Values beyond ±1e150 (and, on a log scale, below 1e-150) are clamped to those bounds:
//!   plotters' axis arithmetic overflows, or loops for ever, on spans near f64's limits.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One box of a box plot: a label and the values it summarises.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// The name under the box on the x axis.
    pub label: &'a str,
    /// The samples, in any order.
    pub values: &'a [f64],
}

/// Why a plot was not written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The PNG could not be encoded or written.
    #[error("cannot write plot {path}: {source}")]
    Write {
        /// The plot's path.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// Every series is empty (or holds only NaN and infinities).
    #[error("nothing to plot in {path}: every series is empty")]
    NoData {
        /// The plot's path.
        path: PathBuf,
    },
    /// Drawing failed, for example because the image is too small for the axes and labels.
    #[error("cannot draw plot {path}: {source}")]
    Draw {
        /// The plot's path.
        path: PathBuf,
        /// What plotters reported.
        source: Box<dyn Error + Send + Sync>,
    },
}

/// Draws one box plot per series, side by side in the given order, with `title` above and
/// `y_label` along the y axis, and writes a `width` x `height` PNG to `path`.
///
/// The file is a PNG whatever the extension of `path`. With `log_scale`, the y axis is log10
/// and spans whole decades; values `<= 0` are clamped as the [module docs](self) describe.
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
    let draw_error = |source| PlotError::Draw {
        path: path.into(),
        source,
    };
    let write_error = |source| PlotError::Write {
        path: path.into(),
        source,
    };
    if !font_registered() {
        return Err(draw_error(
            "the embedded DejaVu Sans font did not load".into(),
        ));
    }
    if width < MIN_SIZE.0 || height < MIN_SIZE.1 {
        let (w, h) = MIN_SIZE;
        let message = format!("{width}x{height} pixels is too small; use at least {w}x{h}");
        return Err(draw_error(message.into()));
    }

    // plotters saves through `image`, which picks the format from the file name, so the image
    // is rendered to a temporary `.png` whatever `path` is called. This also means a drawing
    // that fails halfway never leaves a partial picture at `path`.
    let tmp = tempfile::Builder::new()
        .prefix("mote-plot-")
        .suffix(".png")
        .tempfile()
        .map_err(write_error)?;
    let plot = Plot {
        title,
        y_label,
        labels: series.iter().map(|s| s.label).collect(),
        boxes,
    };
    let root = BitMapBackend::new(tmp.path(), (width, height)).into_drawing_area();
    let drawn = if log_scale {
        let (lo, hi) = decades(min, max);
        plot.draw(&root, (lo..hi).log_scale())
    } else {
        let (lo, hi) = padded(min, max);
        plot.draw(&root, lo..hi)
    };
    drawn.map_err(draw_error)?;
    // Dropping the backend would also save the image, but would swallow the error.
    root.present()
        .map_err(|e| write_error(std::io::Error::other(e)))?;
    drop(root);
    // Copied rather than renamed: a temporary file is private to its owner, a plot is not.
    let png = std::fs::read(tmp.path()).map_err(write_error)?;
    std::fs::write(path, png).map_err(write_error)?;
    Ok(())
}

/// Below this, the title, axis labels and tick labels leave no room for the boxes.
const MIN_SIZE: (u32, u32) = (320, 240);

/// Every piece of text, so that the font registered by [`font_registered`] is the one used.
const FONT: FontFamily<'static> = FontFamily::SansSerif;

// Text sizes, in pixels.
const TITLE_SIZE: u32 = 22;
const AXIS_LABEL_SIZE: u32 = 16;
const TICK_SIZE: u32 = 14;
/// Vertical x-axis labels are shrunk down to this size before they are allowed to be cut off.
const MIN_TICK_SIZE: u32 = 9;

// Space around the chart, and between an axis and its labels, in pixels.
const MARGIN: u32 = 16;
const GAP: i32 = 6;
/// Room for the y tick labels and the y-axis label; the tick labels are at most ~7 characters.
const Y_LABEL_AREA: u32 = 90;

/// Width of one series' slot in x-axis units. The x axis is integer so that plotters can
/// format it; boxes need fractions of a slot, hence a slot of many units.
const SLOT: i32 = 100;
// Half the width of a box, and of its whisker caps, in x-axis units.
const BOX_HALF: i32 = 30;
const CAP_HALF: i32 = 15;

const BOX_COLOR: RGBColor = RGBColor(31, 119, 180);
const MEDIAN_COLOR: RGBColor = RGBColor(214, 39, 40);
const NO_DATA_COLOR: RGBColor = RGBColor(128, 128, 128);

/// Registers DejaVu Sans with plotters under the family every text style here uses. plotters'
/// `ab_glyph` support has no built-in fonts: text drawn before this fails. Registration runs
/// once per process, whichever thread gets here first; the others wait for it.
fn font_registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        register_font(FONT.as_str(), FontStyle::Normal, dejavu::sans::regular()).is_ok()
    })
}

/// The largest magnitude drawn, see the module docs.
const LIMIT: f64 = 1e150;

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

/// The value that values `<= 0` are clamped to on a log scale: see the module docs.
fn log_floor(series: &[Series<'_>]) -> f64 {
    let smallest = series
        .iter()
        .flat_map(|s| s.values)
        .copied()
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
fn decades(min: f64, max: f64) -> (f64, f64) {
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
fn padded(min: f64, max: f64) -> (f64, f64) {
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
fn tick_label(value: f64) -> String {
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

/// Where the box of the `slot`th series goes on the x axis.
fn centre(slot: i32) -> i32 {
    slot * SLOT + SLOT / 2
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

    const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

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
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(PNG_SIGNATURE));
        assert!(bytes.len() > 5_000, "only {} bytes", bytes.len());
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
