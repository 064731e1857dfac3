//! Box plots of benchmark samples, empirical distribution functions (ECDFs) of them, and
//! error-bar charts of summarised ones, written as PNG files.
//!
//! This module owns turning labelled samples into a picture: the five-number summary of each
//! series (for [`box_plot_png`]), the step line of each series' ECDF (for [`ecdf_png`]), or a
//! value and the ends of its whisker per category (for [`error_bar_png`], as in a paper's
//! "median, error bars at p10 and p90" figure), the axis scale, the layout and the PNG file. It
//! draws with `plotters`' bitmap backend and renders text with DejaVu Sans compiled into the binary (through plotters' `ab_glyph`
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
//!
//! This file owns what every kind of plot shares: [`Series`], [`PlotError`], the font, the
//! sizes of text and margins, and writing the finished image (`render_png`). Each kind of plot
//! has its own module ([`box_plot_png`], [`error_bar_png`], [`ecdf_png`]), drawn over the axis
//! scales of `scale` and the line keys and legends of `legend`.

mod box_plot;
mod ecdf;
mod error_bar;
mod legend;
mod scale;

pub use box_plot::box_plot_png;
pub use ecdf::ecdf_png;
pub use error_bar::{ErrorBar, Line, Panel, error_bar_png};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::register_font;
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
/// Half the width of a whisker's caps, in x-axis units.
const CAP_HALF: i32 = 15;

/// The box plots' blue and red, which are also the first and last colours of an error-bar
/// chart's lines.
const BOX_COLOR: RGBColor = RGBColor(31, 119, 180);
const MEDIAN_COLOR: RGBColor = RGBColor(214, 39, 40);

/// Registers DejaVu Sans with plotters under the family every text style here uses. plotters'
/// `ab_glyph` support has no built-in fonts: text drawn before this fails. Registration runs
/// once per process, whichever thread gets here first; the others wait for it.
fn font_registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        register_font(FONT.as_str(), FontStyle::Normal, dejavu::sans::regular()).is_ok()
    })
}

/// Where the middle of the `slot`th slot (a box, or a category) is on the x axis.
fn centre(slot: i32) -> i32 {
    slot * SLOT + SLOT / 2
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    pub(super) const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

    /// `path` holds a PNG with something drawn in it (an empty canvas compresses far smaller).
    pub(super) fn assert_drawn_png(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        assert!(bytes.starts_with(PNG_SIGNATURE));
        assert!(bytes.len() > 5_000, "only {} bytes", bytes.len());
    }
}
