//! What the picture-making examples share: a labelled line with its points, the legend box,
//! and writing (or checking) the committed SVG.

use std::error::Error;

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// The colours of the simulations' curves, in the order their series are drawn: the baseline
/// (grey) first, then red, blue, green, orange, purple.
#[allow(dead_code)] // plots.rs draws strategies with its own colours.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(127, 127, 127),
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
];

/// A chart of f64 x values on an SVG backend.
pub type Chart<'a, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>;

/// Draws a line through `points` and registers `name` for the legend.
pub fn curve<'a, Y>(
    chart: &mut Chart<'a, Y>,
    name: &str,
    color: RGBColor,
    points: &[(f64, f64)],
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .draw_series(LineSeries::new(points.to_vec(), color.stroke_width(2)))
        .map_err(|e| e.to_string())?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    Ok(())
}

/// Draws a line through `points`, a dot on each, and registers `name` for the legend.
pub fn line<'a, Y>(
    chart: &mut Chart<'a, Y>,
    name: &str,
    color: RGBColor,
    points: &[(f64, f64)],
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    curve(chart, name, color, points)?;
    chart
        .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Draws the legend box at `position`.
pub fn legend<'a, Y>(chart: &mut Chart<'a, Y>, position: SeriesLabelPosition) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// Writes `content` to `path`, or with `check` verifies that the committed file is the same.
pub fn write_or_check(
    path: &str,
    content: &str,
    check: bool,
    example: &str,
) -> Result<(), Box<dyn Error>> {
    if check {
        let committed = std::fs::read_to_string(path)?;
        if committed != content {
            return Err(
                format!("{path} is not what `cargo run --example {example}` writes").into(),
            );
        }
        println!("{path}: up to date");
    } else {
        std::fs::write(path, content)?;
        println!("wrote {path}");
    }
    Ok(())
}
