//! `cicada report --html`: the curves people draw from comparison tables,
//! drawn. Result files (runs, sweep stages, `[[stages]]` windows) become
//! points, labelled by configuration; each configuration is one line of
//! output throughput, TTFT, TPOT (and TTFA where requests reasoned) against
//! concurrency or request rate, and of latency against throughput.

pub mod inputs;
pub mod page;
pub mod points;

use std::path::{Path, PathBuf};

use crate::read::{FileError, ResultFile};
use inputs::{InputError, LabelRule};
use points::{Axis, Point};

/// Why the comparison page could not be made: an argument names no result
/// file, a file cannot be used, or the page cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum CurvesError {
    /// An argument names no result file, or a `--label` is malformed.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A result file cannot be used.
    #[error(transparent)]
    File(#[from] FileError),
    /// The page could not be written.
    #[error("writing {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// What a comparison page was made of.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The page.
    pub html: String,
    /// Its points, in the order read.
    pub points: Vec<Point>,
    /// The x axis of the curves against the load.
    pub axis: Axis,
}

/// Read `args` (files, directories, globs), expanding a `[[stages]]` run's
/// `result.json` to its windows' files.
fn read_all(args: &[PathBuf]) -> Result<Vec<ResultFile>, CurvesError> {
    let mut files: Vec<ResultFile> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for path in inputs::expand(args)? {
        let file = ResultFile::read(&path)?;
        let windows = inputs::windows_of(&file);
        let parts = if windows.is_empty() {
            vec![file]
        } else {
            windows
                .iter()
                .map(|w| ResultFile::read(w))
                .collect::<Result<Vec<_>, _>>()?
        };
        for f in parts {
            if !seen.contains(&f.path) {
                seen.push(f.path.clone());
                files.push(f);
            }
        }
    }
    Ok(files)
}

/// The comparison of the result files `args` name: labelled by `labels`
/// (`NAME=GLOB`) or their scenarios' names, drawn against `axis` (or the
/// axis the runs varied).
pub fn build(
    args: &[PathBuf],
    labels: &[String],
    axis: Option<Axis>,
) -> Result<Comparison, CurvesError> {
    let rules = labels
        .iter()
        .map(|l| l.parse::<LabelRule>())
        .collect::<Result<Vec<_>, _>>()?;
    let files = read_all(args)?;
    let names = inputs::label_all(&files, &rules);
    let points: Vec<Point> = files
        .iter()
        .zip(&names)
        .map(|(f, label)| Point::of(f, label))
        .collect();
    let chosen = axis.unwrap_or_else(|| points::choose_axis(&points));
    let html = page::render(&page::Page {
        points: &points,
        axis: chosen,
        asked: axis.is_some(),
    });
    Ok(Comparison {
        html,
        points,
        axis: chosen,
    })
}

/// Write the comparison of `args` to `out`.
pub fn write(
    out: &Path,
    args: &[PathBuf],
    labels: &[String],
    axis: Option<Axis>,
) -> Result<Comparison, CurvesError> {
    let c = build(args, labels, axis)?;
    std::fs::write(out, &c.html).map_err(|error| CurvesError::Write {
        path: out.to_path_buf(),
        error,
    })?;
    Ok(c)
}
