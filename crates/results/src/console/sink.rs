//! The console as one output of the run: a sweep's step headers, the gates'
//! verdicts, the files written, each step's result block, and at the end
//! the sweep's or the stages' table and whether the run mostly failed.

use std::path::PathBuf;

use crate::error::WriteError;
use crate::sink::{RunFinished, Sink, StepBegan, StepFinished};
use crate::{gates, stages, verdict};

/// The run's console output (stdout for results, stderr for the rest).
#[derive(Debug, Default)]
pub struct Console;

impl Sink for Console {
    fn step_began(&mut self, step: &StepBegan<'_>) {
        if step.sweep {
            eprintln!("stage {}: {}", step.result.stage, step.result.stage_name);
        }
    }

    /// The gates, then the files, then the block: the block comes last so
    /// that a log merging both streams (`kubectl logs`, a Slurm output
    /// file) ends with the result.
    fn step_finished(
        &mut self,
        done: &StepFinished<'_>,
        written: &mut Vec<PathBuf>,
    ) -> Result<(), WriteError> {
        let Some(whole) = done.results.first() else {
            return Ok(());
        };
        for g in gates::evaluate(whole) {
            let verdict = if g.passed { "passed" } else { "FAILED" };
            if done.sweep {
                eprintln!("gate {verdict} (stage {}): {g}", whole.stage);
            } else {
                eprintln!("gate {verdict}: {g}");
            }
        }
        eprintln!(
            "results: {}",
            written
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if done.sweep {
            println!("\nStage {}: {}", whole.stage, whole.stage_name);
        }
        print!("{}", super::render(whole));
        Ok(())
    }

    /// The sweep's or the stages' table, then, last, whether the run mostly failed.
    fn run_finished(&mut self, run: &RunFinished<'_>) {
        if run.sweep {
            print!("{}", stages::render("Sweep", run.steps, run.search));
        } else if !run.stages.is_empty() {
            print!("{}", stages::render("Stages", run.stages, None));
        }
        if let Some(v) = verdict::mostly_failed(run.steps) {
            println!("{v}");
        }
    }
}
