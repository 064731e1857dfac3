//! How the lines of a plot are told apart, and the legend that names them: the colour and
//! marker of an error-bar chart's `i`th line, the colour of an ECDF's `i`th line, and rows of
//! legend entries that fit the image's width.

use super::{AXIS_LABEL_SIZE, BOX_COLOR, FONT, GAP, MARGIN, MEDIAN_COLOR};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::error::Error;

/// Height of one row of the legend, in pixels.
pub(super) const LEGEND_ROW: u32 = 26;
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
pub(super) fn line_style(i: usize) -> (RGBColor, bool) {
    (
        LINE_COLORS[i % LINE_COLORS.len()],
        (i / LINE_COLORS.len()) % 2 == 1,
    )
}

/// A marker centred at `at` (in the coordinates of whatever it is drawn on).
pub(super) fn marker<C: Clone + 'static, DB: DrawingBackend>(
    at: C,
    i: usize,
) -> DynElement<'static, DB, C> {
    let (color, triangle) = line_style(i);
    if triangle {
        TriangleMarker::new(at, MARKER_SIZE + 1, color.filled()).into_dyn()
    } else {
        Circle::new(at, MARKER_SIZE, color.filled()).into_dyn()
    }
}

/// One entry of the legend: the line's index, its label and the pixel its entry starts at.
type LegendEntry<'a> = (usize, &'a str, i32);

/// What a legend entry shows before its label.
#[derive(Debug, Clone, Copy)]
pub(super) enum LegendKey {
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
pub(super) fn legend_rows<'a>(
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

/// Draws the legend's `rows` on `area`: each entry's key, then its label.
pub(super) fn draw_legend(
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

/// Width of an ECDF's line, in pixels.
pub(super) const ECDF_STROKE: u32 = 2;
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
pub(super) fn ecdf_color(i: usize) -> RGBColor {
    ECDF_COLORS[i % ECDF_COLORS.len()]
}
