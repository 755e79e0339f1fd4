//! What a run writes beyond each stage's `result.json` and `summary.csv`
//! rows: the streamed files (`timeseries.csv`, `intervals.hlog`,
//! `requests.jsonl`), the gate verdicts, and `report.html`.

use std::path::PathBuf;

use cicada_scenarios::Scenario;

use super::RunResult;
use super::html::{self, Page};
use super::streams::{RunFiles, companion};
use crate::merge::IntervalSink;
use crate::sweep::Search;

/// The run's extra outputs.
#[derive(Debug)]
pub struct Outputs {
    files: RunFiles,
    html: Option<PathBuf>,
}

/// Where a finished stage stands in its run.
#[derive(Debug, Clone, Copy)]
pub struct StageDone<'a> {
    /// The stage's results: the whole stage first, then its `[[stages]]` windows.
    pub current: &'a [RunResult],
    /// Earlier stages' whole results.
    pub earlier: &'a [RunResult],
    /// Earlier `[[stages]]` windows (a run without sweep has only its own).
    pub earlier_phases: &'a [RunResult],
    pub sweep: bool,
    pub search: Option<Search>,
}

impl Outputs {
    /// Create the streamed files (replacing a previous run's) in `output.dir`.
    pub fn create(s: &Scenario) -> anyhow::Result<Self> {
        let files = RunFiles::create(s)?;
        let html = s.output.html.then(|| {
            s.output
                .dir
                .join(companion(&s.output.result_filename, "report.html"))
        });
        Ok(Self { files, html })
    }

    /// The sink a stage's aggregate streams into.
    pub fn stage_sink(&self, stage: u32) -> Box<dyn IntervalSink> {
        self.files.stage_sink(stage)
    }

    /// After a stage: flush the streams, print the gates' verdicts, rewrite
    /// the report. Returns every file these outputs have written so far.
    pub fn stage_done(&self, done: StageDone<'_>) -> anyhow::Result<Vec<PathBuf>> {
        self.files.end_stage()?;
        let mut paths = self.files.paths().to_vec();
        if let Some(whole) = done.current.first() {
            for g in super::gates::evaluate(whole) {
                let verdict = if g.passed { "passed" } else { "FAILED" };
                if done.sweep {
                    eprintln!("gate {verdict} (stage {}): {g}", whole.stage);
                } else {
                    eprintln!("gate {verdict}: {g}");
                }
            }
        }
        if let Some(path) = &self.html {
            let stages: Vec<&RunResult> = done.earlier.iter().chain(done.current.first()).collect();
            let phases: Vec<&RunResult> = done
                .earlier_phases
                .iter()
                .chain(done.current.iter().skip(1))
                .collect();
            html::write(
                path,
                &Page {
                    stages: &stages,
                    phases: if done.sweep { &[] } else { &phases },
                    sweep: done.sweep,
                    search: done.search,
                },
            )?;
            paths.push(path.clone());
        }
        Ok(paths)
    }
}
