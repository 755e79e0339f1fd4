//! `cicada report`: result files side by side, merged into one row, or
//! drawn as comparison curves (`--html`).

use std::path::PathBuf;

use clap::Args;

use crate::curves::points::Axis;
use cicada_results::exit::EXIT_BAD_INPUT;

/// `cicada report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files written by `cicada run` (result.json, result-stage<n>.json,
    /// ...), directories holding them, or globs.
    #[arg(required = true, value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: crate::table::Format,
    /// Merge the runs into one row: histograms re-merged exactly, counts added,
    /// throughputs over the wall-clock span the runs cover together.
    #[arg(long, conflicts_with = "html")]
    pub merge: bool,
    /// Write a self-contained page of comparison curves here instead of a
    /// table: one line per configuration, one point per run or stage.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Name the runs whose path (or a directory of it) matches GLOB as one
    /// configuration (repeatable; the first match wins; default: the
    /// scenario's name).
    #[arg(long, value_name = "NAME=GLOB", requires = "html")]
    pub label: Vec<String>,
    /// The x axis of the curves against the load (default: what the runs varied).
    #[arg(long, value_enum, requires = "html")]
    pub x_axis: Option<Axis>,
}

/// Run `cicada report`: print the table or write the page; the exit code
/// (2 for unusable files or arguments).
pub fn report(args: &ReportArgs) -> i32 {
    let done = match &args.html {
        Some(out) => html(args, out),
        None => crate::curves::inputs::expand(&args.files)
            .map_err(anyhow::Error::from)
            .and_then(|files| crate::table::build(&files, args.format, args.merge))
            .map(|text| print!("{text}")),
    };
    match done {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            EXIT_BAD_INPUT
        }
    }
}

/// `--html`: write the comparison and say what it holds on stderr.
fn html(args: &ReportArgs, out: &std::path::Path) -> anyhow::Result<()> {
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
