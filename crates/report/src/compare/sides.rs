//! What each side of `cicada compare` holds: its runs' result files (a
//! file, a directory of repeated runs `run-<n>/`, a directory of one run,
//! or a glob) and, where a run saved them (`--save-detailed`), its
//! per-request samples from `requests.jsonl`.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use super::figures::SampleField;
use crate::read::ResultFile;

/// A side that cannot be read, and why.
#[derive(Debug, thiserror::Error)]
pub enum SideError {
    #[error(transparent)]
    Input(#[from] crate::curves::inputs::InputError),
    #[error(transparent)]
    Read(#[from] crate::read::FileError),
    #[error(
        "{0}: holds a sweep's stages; compare one stage's files, e.g. '{0}/result-stage1.json' (or '{0}/run-*/result-stage1.json' for repeated runs)"
    )]
    Sweep(PathBuf),
    #[error("{path}:{line}: not a requests.jsonl line: {reason}")]
    Samples {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// One run's per-request samples (ms), measured requests only.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    pub ttft: Vec<f64>,
    pub tpot: Vec<f64>,
    pub e2el: Vec<f64>,
}

impl Samples {
    /// The samples of `field`.
    pub fn of(&self, field: SampleField) -> &[f64] {
        match field {
            SampleField::Ttft => &self.ttft,
            SampleField::Tpot => &self.tpot,
            SampleField::E2el => &self.e2el,
        }
    }

    /// Read the measured (not warm-up) requests' latencies of one file.
    fn read(path: &Path) -> Result<Self, SideError> {
        let bad = |line: usize, reason: String| SideError::Samples {
            path: path.to_path_buf(),
            line,
            reason,
        };
        let file = std::fs::File::open(path).map_err(|e| bad(0, e.to_string()))?;
        let mut out = Samples::default();
        for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| bad(i + 1, e.to_string()))?;
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_str(&line).map_err(|e| bad(i + 1, e.to_string()))?;
            if v["warmup"].as_bool() == Some(true) {
                continue;
            }
            for field in SampleField::ALL {
                if let Some(x) = v[field.key()].as_f64() {
                    match field {
                        SampleField::Ttft => out.ttft.push(x),
                        SampleField::Tpot => out.tpot.push(x),
                        SampleField::E2el => out.e2el.push(x),
                    }
                }
            }
        }
        Ok(out)
    }

    /// Several runs' samples as one.
    pub fn pooled<'a>(all: impl Iterator<Item = &'a Samples>) -> Samples {
        let mut out = Samples::default();
        for s in all {
            out.ttft.extend(&s.ttft);
            out.tpot.extend(&s.tpot);
            out.e2el.extend(&s.e2el);
        }
        out
    }
}

/// One run of a side.
#[derive(Debug, Clone)]
pub struct Run {
    pub file: ResultFile,
    /// Its `requests.jsonl`, when the run wrote one beside a `result.json`.
    pub samples: Option<Samples>,
}

/// One side of the comparison.
#[derive(Debug, Clone)]
pub struct Side {
    /// The argument as given.
    pub label: String,
    pub runs: Vec<Run>,
}

/// The `run-<n>` number of a directory.
fn run_number(p: &Path) -> Option<u32> {
    p.file_name()?.to_str()?.strip_prefix("run-")?.parse().ok()
}

/// A directory's `run-<n>/` subdirectories, in run order.
fn run_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir() && run_number(p).is_some())
                .collect()
        })
        .unwrap_or_default();
    out.sort_by_key(|p| run_number(p));
    out
}

/// A directory's one result file, refusing a sweep's stages.
fn one_result(dir: &Path) -> Result<PathBuf, SideError> {
    let mut found = crate::curves::inputs::expand(&[dir.to_path_buf()])?;
    if found.len() == 1 {
        Ok(found.remove(0))
    } else {
        Err(SideError::Sweep(dir.to_path_buf()))
    }
}

/// The result files `arg` stands for.
fn files_of(arg: &Path) -> Result<Vec<PathBuf>, SideError> {
    if arg.is_dir() {
        let runs = run_dirs(arg);
        if runs.is_empty() {
            return Ok(vec![one_result(arg)?]);
        }
        return runs.iter().map(|d| one_result(d)).collect();
    }
    Ok(crate::curves::inputs::expand(&[arg.to_path_buf()])?)
}

impl Side {
    /// Read the side `arg` names.
    pub fn read(arg: &Path) -> Result<Self, SideError> {
        let mut runs = Vec::new();
        for path in files_of(arg)? {
            let file = ResultFile::read(&path)?;
            // requests.jsonl holds every stage's requests: it stands for a
            // whole run's result.json only
            let jsonl = path.with_file_name("requests.jsonl");
            let samples = if path.file_name().is_some_and(|n| n == "result.json") && jsonl.is_file()
            {
                Some(Samples::read(&jsonl)?)
            } else {
                None
            };
            runs.push(Run { file, samples });
        }
        Ok(Side {
            label: arg.display().to_string(),
            runs,
        })
    }

    /// Every run's samples pooled, when every run has them.
    pub fn samples(&self) -> Option<Samples> {
        if self.runs.iter().all(|r| r.samples.is_some()) {
            Some(Samples::pooled(
                self.runs.iter().filter_map(|r| r.samples.as_ref()),
            ))
        } else {
            None
        }
    }
}
