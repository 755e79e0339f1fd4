//! The summary of repeated runs (`cicada run --num-runs N`): for each
//! result file the runs share (`result.json`, a sweep's or stages'
//! `result-stage<n>.json`) and each headline figure (the figures
//! `cicada compare` weighs), the runs' mean, standard deviation,
//! coefficient of variation and Student's t interval for the mean, beside
//! the pooled figure: the runs' histograms re-merged exactly, so a pooled
//! percentile is the percentile of every request of every run, never a mean
//! of percentiles.

mod render;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::compare::figures::{FIGURES, Figure};
use crate::read::{FileError, ItlDefinition, ResultFile};
use crate::stats::{mean_half_width, mean_sd};

/// Why the runs could not be summarised.
#[derive(Debug, thiserror::Error)]
pub enum RepeatsError {
    #[error(transparent)]
    Input(#[from] crate::curves::inputs::InputError),
    #[error(transparent)]
    Read(#[from] FileError),
    #[error("no complete run to summarise")]
    NoRuns,
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One figure across the runs.
#[derive(Debug, Clone)]
pub struct FigureSummary {
    pub figure: &'static Figure,
    /// Each run's value, in run order (`None`: the run's file lacks it).
    pub values: Vec<Option<f64>>,
    /// Mean of the runs' values (every run has one), else `None`.
    pub mean: Option<f64>,
    /// Sample standard deviation (n − 1).
    pub sd: Option<f64>,
    /// sd / |mean|; `None` for a mean of 0.
    pub cv: Option<f64>,
    /// Student's t interval for the mean at the summary's level (two runs or more).
    pub ci: Option<(f64, f64)>,
    /// The figure of every run's requests together: histograms re-merged,
    /// counts added, throughputs over the runs' summed measured windows.
    /// `None` for files without histograms (vLLM's).
    pub pooled: Option<f64>,
}

/// The runs' figures for one result file name.
#[derive(Debug, Clone)]
pub struct PointSummary {
    /// The file name every run wrote (`result.json`, `result-stage2.json`).
    pub file: String,
    /// The runs' files, in run order.
    pub paths: Vec<PathBuf>,
    pub figures: Vec<FigureSummary>,
}

/// The summary of a series of runs.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The confidence level of the intervals.
    pub level: f64,
    /// The runs summarised, in order.
    pub runs: Vec<PathBuf>,
    pub points: Vec<PointSummary>,
}

impl Summary {
    /// A warning for each figure whose coefficient of variation exceeds
    /// `cv_warn` (0.1 = 10 %).
    pub fn warnings(&self, cv_warn: f64) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.points {
            for f in &p.figures {
                if let Some(cv) = f.cv.filter(|cv| *cv > cv_warn) {
                    out.push(format!(
                        "{}: {} varies {:.1} % across {} runs (coefficient of variation above {:.0} %): run more or longer before trusting a difference",
                        p.file,
                        f.figure.name,
                        cv * 100.0,
                        f.values.len(),
                        cv_warn * 100.0
                    ));
                }
            }
        }
        out
    }
}

/// Order of result files: `result.json` (the whole run) first, then stages
/// by number, then anything else by name.
fn file_order(name: &str) -> (u8, u32, String) {
    let stage = name
        .rsplit_once("-stage")
        .and_then(|(_, rest)| rest.split('.').next())
        .and_then(|n| n.parse::<u32>().ok());
    match stage {
        None if name == "result.json" => (0, 0, String::new()),
        Some(n) => (1, n, name.to_string()),
        None => (2, 0, name.to_string()),
    }
}

/// Summarise the runs in `run_dirs` (each a directory one run wrote) at
/// confidence `level`.
pub fn summarize(run_dirs: &[PathBuf], level: f64) -> Result<Summary, RepeatsError> {
    if run_dirs.is_empty() {
        return Err(RepeatsError::NoRuns);
    }
    // file name -> that file of each run that wrote it
    let mut by_name: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for dir in run_dirs {
        for path in crate::curves::inputs::expand(std::slice::from_ref(dir))? {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                by_name.entry(name.to_string()).or_default().push(path);
            }
        }
    }
    let mut names: Vec<String> = by_name.keys().cloned().collect();
    names.sort_by_key(|n| file_order(n));
    let mut points = Vec::new();
    for name in names {
        let paths = by_name.remove(&name).unwrap_or_default();
        points.push(point(name, paths, level)?);
    }
    Ok(Summary {
        level,
        runs: run_dirs.to_vec(),
        points,
    })
}

/// One file name's figures across the runs.
fn point(file: String, paths: Vec<PathBuf>, level: f64) -> Result<PointSummary, RepeatsError> {
    let files: Vec<ResultFile> = paths
        .iter()
        .map(|p| ResultFile::read(p))
        .collect::<Result<_, _>>()?;
    let itl = ItlDefinition::for_files(&files);
    let rows = files
        .iter()
        .map(|f| f.row(itl))
        .collect::<Result<Vec<_>, _>>()?;
    // vLLM's files carry no histograms: no pooled figures, still the spread
    let pooled = crate::merge::merge(&files).ok();
    let figures = FIGURES
        .iter()
        .map(|figure| {
            let values: Vec<Option<f64>> = rows.iter().map(|r| (figure.read)(r)).collect();
            let all: Option<Vec<f64>> = values.iter().copied().collect();
            let (mean, sd, ci) = match all.as_deref() {
                Some(xs) if !xs.is_empty() => {
                    let (m, s) = mean_sd(xs);
                    let ci = mean_half_width(xs, level).map(|h| (m - h, m + h));
                    (Some(m), Some(s), ci)
                }
                _ => (None, None, None),
            };
            let cv = match (mean, sd) {
                (Some(m), Some(s)) if m != 0.0 => Some(s / m.abs()),
                _ => None,
            };
            FigureSummary {
                figure,
                values,
                mean,
                sd,
                cv,
                ci,
                pooled: pooled.as_ref().and_then(|r| (figure.read)(r)),
            }
        })
        .collect();
    Ok(PointSummary {
        file,
        paths,
        figures,
    })
}

/// Summarise the runs, print the table and any warnings, and write
/// `repeats.json` and `repeats.csv` into `dir`; the files written.
pub fn report(
    dir: &Path,
    run_dirs: &[PathBuf],
    level: f64,
    cv_warn: f64,
) -> Result<Vec<PathBuf>, RepeatsError> {
    let s = summarize(run_dirs, level)?;
    print!("{}", render::table(&s));
    for w in s.warnings(cv_warn) {
        eprintln!("warning: {w}");
    }
    let mut written = Vec::new();
    for (name, text) in [
        ("repeats.json", format!("{}\n", render::json(&s))),
        ("repeats.csv", render::csv(&s)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| RepeatsError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    eprintln!(
        "repeats: {} runs summarised in {}",
        s.runs.len(),
        written
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_run_comes_first_then_stages_by_number() {
        let mut names = vec![
            "result-stage10.json",
            "result-stage2.json",
            "result.json",
            "other.json",
        ];
        names.sort_by_key(|n| file_order(n));
        assert_eq!(
            names,
            [
                "result.json",
                "result-stage2.json",
                "result-stage10.json",
                "other.json"
            ]
        );
    }
}
