//! Box plots of benchmark samples, empirical distribution functions (ECDFs) of them, and
//! error-bar charts of summarised ones, written as PNG files.
//!
//! This module owns turning labelled samples into a picture: the five-number summary of each
//! series (for [`box_plot_png`]), the step line of each series' ECDF (for [`ecdf_png`]), or a
//! value and the ends of its whisker per category (for [`error_bar_png`], as in a paper's
//! "median, error bars at p10 and p90" figure), the axis scale, the layout and the PNG file. It
//! draws with `plotters`' bitmap backend
//! and renders text with DejaVu Sans compiled into the binary (through plotters' `ab_glyph`
//! support), so it needs no system fonts, fontconfig or freetype and draws the same everywhere.
//!
//! Each box spans the first to the third quartile with a line at the median; the whiskers reach
//! the smallest and the largest value, without outlier points, because for latencies the
//! extremes are the point. Quartiles interpolate linearly between samples.
//!
//! An ECDF is a step line per series: at each x, the fraction of the series' samples that are
//! `<= x`, from 0 left of the smallest to 1 at the largest. Series of different sizes compare
//! directly, and every percentile can be read off the y axis (the median where a line crosses
//! 0.5). Its x axis is linear, from zero (or a little below the smallest value, if one is
//! negative) to a little beyond the largest.
//!
//! - Values that are NaN or infinite are ignored.
//! - A series with no (finite) values keeps its slot and label on the x axis, marked "no data",
//!   so that plots of the same benchmarks line up; if no series has a value there is nothing to
//!   plot and [`box_plot_png`] fails with [`PlotError::NoData`]. Likewise in an ECDF plot such a
//!   series keeps its colour and its legend entry, marked "(no data)", and [`ecdf_png`] fails
//!   only if no series has a value.
//! - On a log scale, values `<= 0` cannot be placed, so they are clamped to a floor one decade
//!   below the smallest positive value (rounded down to a power of ten): they sit at the bottom
//!   of the axis, visibly apart from the real data. If no value is positive the floor is 1.
//! - In an error-bar chart, a point whose value is NaN or infinite is left out (its line
//!   skips it), and a whisker end that is NaN or infinite is drawn at the value.
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

/// One series of samples, with its label: a box of a box plot, or a line of an ECDF plot.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// Its name: under its box on the x axis of a box plot, in the legend of an ECDF plot.
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

/// Draws a `width` x `height` image with `draw` and writes it to `path` as a PNG.
///
/// plotters saves through `image`, which picks the format from the file name, so the image is
/// rendered to a temporary `.png` whatever `path` is called and then copied. This also means a
/// drawing that fails halfway never leaves a partial picture at `path`.
fn render_png(
    path: &Path,
    (width, height): (u32, u32),
    draw: impl FnOnce(
        &DrawingArea<BitMapBackend<'_>, Shift>,
    ) -> Result<(), Box<dyn Error + Send + Sync>>,
) -> Result<(), PlotError> {
    let write_error = |source| PlotError::Write {
        path: path.into(),
        source,
    };
    if !font_registered() {
        return Err(PlotError::Draw {
            path: path.into(),
            source: "the embedded DejaVu Sans font did not load".into(),
        });
    }
    let tmp = tempfile::Builder::new()
        .prefix("mote-plot-")
        .suffix(".png")
        .tempfile()
        .map_err(write_error)?;
    let root = BitMapBackend::new(tmp.path(), (width, height)).into_drawing_area();
    draw(&root).map_err(|source| PlotError::Draw {
        path: path.into(),
        source,
    })?;
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
    floor_below(series.iter().flat_map(|s| s.values).copied())
}

/// One decade below the smallest positive finite value (rounded down to a power of ten), or 1
/// if none is positive.
fn floor_below(values: impl Iterator<Item = f64>) -> f64 {
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
    /// [module docs](self) describe.
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

/// Height of one row of the legend, in pixels.
const LEGEND_ROW: u32 = 26;
/// Room between a legend entry's marker and its label, and between entries, in pixels.
const LEGEND_GAP: i32 = 24;
/// Radius (or half size) of a marker, in pixels.
const MARKER_SIZE: i32 = 5;

/// The colours of the lines of an error-bar chart, in order (matplotlib's first four, which the
/// box plots' blue and red belong to), then again.
const LINE_COLORS: [RGBColor; 4] = [
    BOX_COLOR,
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    MEDIAN_COLOR,
];

/// The colour and marker of the `i`th line: colours cycle first, then markers (circles, then
/// triangles), so that eight lines all look different.
fn line_style(i: usize) -> (RGBColor, bool) {
    (
        LINE_COLORS[i % LINE_COLORS.len()],
        (i / LINE_COLORS.len()) % 2 == 1,
    )
}

/// A marker centred at `at` (in the coordinates of whatever it is drawn on).
fn marker<C: Clone + 'static, DB: DrawingBackend>(at: C, i: usize) -> DynElement<'static, DB, C> {
    let (color, triangle) = line_style(i);
    if triangle {
        TriangleMarker::new(at, MARKER_SIZE + 1, color.filled()).into_dyn()
    } else {
        Circle::new(at, MARKER_SIZE, color.filled()).into_dyn()
    }
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

/// One entry of the legend: the line's index, its label and the pixel its entry starts at.
type LegendEntry<'a> = (usize, &'a str, i32);

/// What a legend entry shows before its label.
#[derive(Debug, Clone, Copy)]
enum LegendKey {
    /// The marker of the error-bar chart's line.
    Marker,
    /// A short stroke in the colour of the ECDF's line.
    Stroke,
}

impl LegendKey {
    /// Its width, in pixels.
    fn width(self) -> i32 {
        match self {
            Self::Marker => 2 * MARKER_SIZE,
            Self::Stroke => STROKE_KEY,
        }
    }
}

/// The legend's entries, as rows that each fit the image's width: the label and where its
/// entry starts, in pixels from the left.
fn legend_rows<'a>(
    root: &DrawingArea<BitMapBackend<'_>, Shift>,
    labels: &[&'a str],
    width: u32,
    key: LegendKey,
) -> Result<Vec<Vec<LegendEntry<'a>>>, Box<dyn Error + Send + Sync>> {
    let style = TextStyle::from((FONT, AXIS_LABEL_SIZE));
    let mut rows: Vec<Vec<LegendEntry<'a>>> = Vec::new();
    let mut widths: Vec<i32> = Vec::new();
    let room = width as i32 - 2 * MARGIN as i32;
    for (i, label) in labels.iter().enumerate() {
        let (w, _) = root.estimate_text_size(label, &style)?;
        let entry = key.width() + GAP + w as i32;
        match (rows.last_mut(), widths.last_mut()) {
            (Some(row), Some(used)) if *used + LEGEND_GAP + entry <= room => {
                row.push((i, label, *used + LEGEND_GAP));
                *used += LEGEND_GAP + entry;
            }
            _ => {
                rows.push(vec![(i, label, 0)]);
                widths.push(entry);
            }
        }
    }
    // Centre each row.
    for (row, used) in rows.iter_mut().zip(widths) {
        let left = MARGIN as i32 + (room - used).max(0) / 2;
        for entry in row.iter_mut() {
            entry.2 += left;
        }
    }
    Ok(rows)
}

fn draw_legend(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    rows: &[Vec<LegendEntry<'_>>],
    key: LegendKey,
) -> Result<(), Box<dyn Error + Send + Sync>> {
    let style = TextStyle::from((FONT, AXIS_LABEL_SIZE)).pos(Pos::new(HPos::Left, VPos::Center));
    for (row, entries) in (0..).zip(rows) {
        let y = LEGEND_ROW as i32 * row + LEGEND_ROW as i32 / 2;
        for &(i, label, x) in entries {
            match key {
                LegendKey::Marker => {
                    area.draw(&marker::<_, BitMapBackend<'_>>((x + MARKER_SIZE, y), i))?;
                }
                LegendKey::Stroke => area.draw(&PathElement::new(
                    vec![(x, y), (x + STROKE_KEY, y)],
                    ecdf_color(i).stroke_width(ECDF_STROKE + 1),
                ))?,
            }
            area.draw_text(label, &style, (x + key.width() + GAP, y))?;
        }
    }
    Ok(())
}

/// The size of an ECDF plot, in pixels.
const ECDF_SIZE: (u32, u32) = (800, 500);
/// Width of an ECDF's line, in pixels.
const ECDF_STROKE: u32 = 2;
/// Length of the stroke before a label in an ECDF plot's legend, in pixels.
const STROKE_KEY: i32 = 24;

/// The colours of an ECDF plot's lines, in order: matplotlib's ten, of which the first four are
/// the error-bar charts' [`LINE_COLORS`].
const ECDF_COLORS: [RGBColor; 10] = [
    LINE_COLORS[0],
    LINE_COLORS[1],
    LINE_COLORS[2],
    LINE_COLORS[3],
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of the `i`th line of an ECDF plot; past ten lines the colours repeat.
fn ecdf_color(i: usize) -> RGBColor {
    ECDF_COLORS[i % ECDF_COLORS.len()]
}

/// Draws the empirical distribution function of each series as a step line (at each x, the
/// fraction of its samples `<= x`), all over one linear x axis labelled `x_label`, with `title`
/// above and a legend of the series' labels below, and writes an 800 x 500 PNG to `path`, which
/// it returns.
///
/// The file is a PNG whatever the extension of `path`. The lines get distinct colours, in the
/// order of `series` (after ten they repeat). Values that are NaN or infinite are ignored, and a
/// series with none left stays in the legend, as the [module docs](self) describe; if no series
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

    const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

    /// `path` holds a PNG with something drawn in it (an empty canvas compresses far smaller).
    fn assert_drawn_png(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        assert!(bytes.starts_with(PNG_SIGNATURE));
        assert!(bytes.len() > 5_000, "only {} bytes", bytes.len());
    }

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
