//! `cicada report`: result files side by side, merged into one row, or
//! drawn as comparison curves (`--html`).

use std::path::PathBuf;

use crate::curves::points::Axis;

/// `cicada report`.
#[derive(Debug)]
pub struct ReportArgs {
    /// Result files written by `cicada run` (result.json, result-stage<n>.json,
    /// ...), directories holding them, or globs.
    pub files: Vec<PathBuf>,
    /// Output format.
    pub format: crate::table::Format,
    /// Merge the runs into one row: histograms re-merged exactly, counts added,
    /// throughputs over the wall-clock span the runs cover together.
    pub merge: bool,
    /// Write a self-contained page of comparison curves here instead of a
    /// table: one line per configuration, one point per run or stage.
    pub html: Option<PathBuf>,
    /// Name the runs whose path (or a directory of it) matches GLOB as one
    /// configuration (repeatable; the first match wins; default: the
    /// scenario's name).
    pub label: Vec<String>,
    /// The x axis of the curves against the load (default: what the runs varied).
    pub x_axis: Option<Axis>,
}

pub use crate::error::ReportError;

/// Run `cicada report`: print the table or write the page.
pub fn report(args: &ReportArgs) -> Result<(), ReportError> {
    match &args.html {
        Some(out) => html(args, out),
        None => {
            let files = crate::curves::inputs::expand(&args.files)?;
            let text = crate::table::build(&files, args.format, args.merge)?;
            print!("{text}");
            Ok(())
        }
    }
}

/// `--html`: write the comparison and say what it holds on stderr.
fn html(args: &ReportArgs, out: &std::path::Path) -> Result<(), ReportError> {
    let c = crate::curves::write(out, &args.files, &args.label, args.x_axis)?;
    let labels = crate::curves::points::labels(&c.points);
    eprintln!(
        "comparison: {} ({} points, {} configuration(s): {}; x axis: {})",
        out.display(),
        c.points.len(),
        labels.len(),
        labels.join(", "),
        c.axis.column()
    );
    Ok(())
}
