//! `cicada report`'s flags, turned into the report's plain settings.

use std::path::PathBuf;

/// `cicada report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Result files written by `cicada run` (result.json, result-stage<n>.json,
    /// ...), directories holding them, or globs.
    #[arg(required = true, value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: Format,
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

impl From<ReportArgs> for cicada_report::cli::ReportArgs {
    fn from(a: ReportArgs) -> Self {
        let ReportArgs {
            files,
            format,
            merge,
            html,
            label,
            x_axis,
        } = a;
        Self {
            files,
            format: format.into(),
            merge,
            html,
            label,
            x_axis: x_axis.map(Into::into),
        }
    }
}

/// How `cicada report` prints its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A Markdown table (GitHub-flavoured).
    Markdown,
    /// CSV with a header row.
    Csv,
    /// A JSON array of row objects, numbers unrounded.
    Json,
}

impl From<Format> for cicada_report::table::Format {
    fn from(a: Format) -> Self {
        match a {
            Format::Markdown => Self::Markdown,
            Format::Csv => Self::Csv,
            Format::Json => Self::Json,
        }
    }
}

/// The x axis of the curves drawn against the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Axis {
    /// Users (closed loop) or `max_concurrency`, as configured.
    Concurrency,
    /// Requests per second: the configured rate, or the achieved one.
    Rate,
}

impl From<Axis> for cicada_report::curves::points::Axis {
    fn from(a: Axis) -> Self {
        match a {
            Axis::Concurrency => Self::Concurrency,
            Axis::Rate => Self::Rate,
        }
    }
}
