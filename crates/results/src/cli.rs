//! `cicada report`: result files side by side, or merged into one row.

use std::path::PathBuf;

use clap::Args;

use crate::exit::EXIT_BAD_INPUT;

/// `cicada report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files written by `cicada run` (result.json, result-stage<n>.json, ...).
    #[arg(required = true, value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: crate::table::Format,
    /// Merge the runs into one row: histograms re-merged exactly, counts added,
    /// throughputs over the wall-clock span the runs cover together.
    #[arg(long)]
    pub merge: bool,
}

/// Run `cicada report`: print the table; the exit code (2 for unusable files).
pub fn report(args: &ReportArgs) -> i32 {
    match crate::table::build(&args.files, args.format, args.merge) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            EXIT_BAD_INPUT
        }
    }
}
