//! The result files as one output of the run: each step's `result.json`
//! (and one per `[[stages]]` window) and `summary.csv` rows, the streamed
//! files (`timeseries.csv`, `intervals.hlog`, `requests.jsonl`) and
//! `report.html`.

use std::path::PathBuf;

use cicada_scenarios::Scenario;

use super::RunResult;
use super::error::WriteError;
use super::html::{self, Page};
use super::sink::{Barrier, IntervalMerged, Report, Sink, StepBegan, StepFinished};
use super::streams::{RunFiles, companion};
use super::write::write_step;

/// The run's files.
#[derive(Debug)]
pub struct Files {
    streams: RunFiles,
    html: Option<PathBuf>,
}

impl Files {
    /// Create the streamed files (replacing a previous run's) in `output.dir`.
    pub fn create(s: &Scenario) -> Result<Self, WriteError> {
        let streams = RunFiles::create(s)?;
        let html = s.output.html.then(|| {
            s.output
                .dir
                .join(companion(&s.output.result_filename, "report.html"))
        });
        Ok(Self { streams, html })
    }

    /// Rewrite the report with every result so far.
    fn write_html(
        &self,
        path: &std::path::Path,
        done: &StepFinished<'_>,
    ) -> Result<(), WriteError> {
        let steps: Vec<&RunResult> = done.earlier.iter().chain(done.results.first()).collect();
        let stages: Vec<&RunResult> = done
            .earlier_stages
            .iter()
            .chain(done.results.iter().skip(1))
            .collect();
        html::write(
            path,
            &Page {
                steps: &steps,
                stages: if done.sweep { &[] } else { &stages },
                sweep: done.sweep,
                search: done.search,
            },
        )
    }
}

impl Sink for Files {
    fn step_began(&mut self, step: &StepBegan<'_>) {
        self.streams
            .begin_step(step.result.stage, &step.result.scenario);
    }

    fn barrier(&mut self, barrier: &Barrier) {
        self.streams.barrier(barrier.started_unix);
    }

    fn report(&mut self, report: &Report<'_>) {
        if !report.details.is_empty() {
            self.streams.details(report.worker, report.details);
        }
    }

    fn interval(&mut self, i: &IntervalMerged<'_>) {
        let place = (i.row.index, i.row.start_s, i.row.length_s);
        self.streams.interval(place, i.set, i.row.in_flight);
    }

    /// Flush the streams, rewrite the report, write the step's results;
    /// names them in `written`: the results first, then the others.
    fn step_finished(
        &mut self,
        done: &StepFinished<'_>,
        written: &mut Vec<PathBuf>,
    ) -> Result<(), WriteError> {
        self.streams.end_step()?;
        let mut extra = self.streams.paths().to_vec();
        if let Some(path) = &self.html {
            self.write_html(path, done)?;
            extra.push(path.clone());
        }
        written.extend(write_step(done.results, done.sweep)?);
        written.extend(extra);
        Ok(())
    }
}
