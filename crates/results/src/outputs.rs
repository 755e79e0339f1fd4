//! What a run writes beyond each step's `result.json` and `summary.csv`
//! rows: the streamed files (`timeseries.csv`, `intervals.hlog`,
//! `requests.jsonl`), the gate verdicts, and `report.html`.

use std::path::PathBuf;

use cicada_scenarios::Scenario;

use super::RunResult;
use super::html::{self, Page};
use super::streams::{RunFiles, companion};
use crate::interval::IntervalSink;
use crate::stages::Search;

/// The run's extra outputs.
#[derive(Debug)]
pub struct Outputs {
    files: RunFiles,
    html: Option<PathBuf>,
}

/// Where a finished step stands in its run.
#[derive(Debug, Clone, Copy)]
pub struct StepDone<'a> {
    /// The stage's results: the whole stage first, then its `[[stages]]` windows.
    pub current: &'a [RunResult],
    /// Earlier steps' whole results.
    pub earlier: &'a [RunResult],
    /// Earlier `[[stages]]` windows (a run without sweep has only its own).
    pub earlier_stages: &'a [RunResult],
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

    /// The sink a step's aggregate streams into; `scenario` is the step's.
    pub fn step_sink(&self, stage: u32, scenario: &Scenario) -> Box<dyn IntervalSink> {
        self.files.step_sink(stage, scenario)
    }

    /// After a step: flush the streams, print the gates' verdicts, rewrite
    /// the report. Returns every file these outputs have written so far.
    pub fn step_done(&self, done: StepDone<'_>) -> anyhow::Result<Vec<PathBuf>> {
        self.files.end_step()?;
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
            let steps: Vec<&RunResult> = done.earlier.iter().chain(done.current.first()).collect();
            let stages: Vec<&RunResult> = done
                .earlier_stages
                .iter()
                .chain(done.current.iter().skip(1))
                .collect();
            html::write(
                path,
                &Page {
                    steps: &steps,
                    stages: if done.sweep { &[] } else { &stages },
                    sweep: done.sweep,
                    search: done.search,
                },
            )?;
            paths.push(path.clone());
        }
        Ok(paths)
    }
}
