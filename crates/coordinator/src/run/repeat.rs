//! `--num-runs N` / `[run] repeats = N`: the whole scenario run N times,
//! each an independent run (its own fleet, pool, target and, unless
//! `vary_seed = false`, its own seeds) written under `run-<i>/` of the
//! output directory. The summary across the runs is `cicada-report`'s: the
//! binary hands it the directories this returns.

use std::path::PathBuf;

use cicada_scenarios::scenario::RunSpec;

use crate::cli::RunArgs;
use crate::error::{RunEnd, RunError};

/// One finished run of a repeated scenario.
#[derive(Debug, Clone)]
pub struct RunDone {
    /// Its number, from 1.
    pub index: u32,
    /// Where it wrote its results (`<output dir>/run-<index>`).
    pub dir: PathBuf,
    /// Its `seed` and `mock.seed`.
    pub seeds: (u64, u64),
    /// How it ended.
    pub end: RunEnd,
}

/// The runs of a repeated scenario, as far as they went.
#[derive(Debug)]
pub struct Repeated {
    /// The output directory that holds `run-<i>/`.
    pub dir: PathBuf,
    /// `[run]` as the scenario and flags set it.
    pub spec: RunSpec,
    /// The runs that ended, in order (a run stopped by a signal is the last).
    pub runs: Vec<RunDone>,
    /// Why the runs stopped before the last, when a run failed outright.
    pub error: Option<RunError>,
}

impl Repeated {
    /// The runs that went to their end (not stopped by a signal): what the
    /// summary is over.
    pub fn complete(&self) -> impl Iterator<Item = &RunDone> {
        self.runs
            .iter()
            .filter(|r| !matches!(r.end, RunEnd::Stopped(_)))
    }

    /// How the whole series ended, worst first: a signal, then an abort
    /// threshold, then lost workers, then a failed gate.
    pub fn end(&self) -> RunEnd {
        let rank = |e: &RunEnd| match e {
            RunEnd::Stopped(_) => 0,
            RunEnd::Aborted => 1,
            RunEnd::Degraded => 2,
            RunEnd::GateFailed(_) => 3,
            RunEnd::Passed => 4,
        };
        self.runs
            .iter()
            .map(|r| r.end)
            .min_by_key(rank)
            .unwrap_or(RunEnd::Passed)
    }
}

/// How `cicada run` went: once, or repeated.
#[derive(Debug)]
pub enum Runs {
    /// `repeats = 1`: the plain run, its results where they always go.
    Once(RunEnd),
    /// `repeats > 1`: each run under `run-<i>/`.
    Repeated(Repeated),
}

/// `cicada run`, repeated as `[run] repeats` (or `--num-runs`) asks.
pub async fn run(args: RunArgs) -> Result<Runs, RunError> {
    let loaded = crate::cli::scenario::of_run(&args)?;
    let spec = loaded.scenario.run.clone();
    if spec.repeats <= 1 {
        return Ok(Runs::Once(super::run(args).await?));
    }
    if args.web.is_some() || args.web_wait {
        return Err(RunError::BadInput(
            "run.repeats (--num-runs) with the web UI: the page drives one run at a time; drop --web or the repeats".into(),
        ));
    }
    if args.expect_workers.is_some() {
        return Err(RunError::BadInput(
            "run.repeats (--num-runs) with --expect-workers: remote workers leave when a run ends; repeat with local --workers, or start the workers again for each run".into(),
        ));
    }
    let dir = args
        .output_dir
        .clone()
        .unwrap_or_else(|| loaded.scenario.output.dir.clone());
    let (seed, mock_seed) = (loaded.scenario.seed, loaded.scenario.mock.seed);
    let mut out = Repeated {
        dir: dir.clone(),
        spec: spec.clone(),
        runs: Vec::new(),
        error: None,
    };
    for index in 1..=spec.repeats {
        let seeds = spec.seeds(index, seed, mock_seed);
        let run_dir = dir.join(format!("run-{index}"));
        eprintln!(
            "cicada: run {index} of {} (seed {}, mock.seed {}) -> {}",
            spec.repeats,
            seeds.0,
            seeds.1,
            run_dir.display()
        );
        let mut one = args.clone();
        one.output_dir = Some(run_dir.clone());
        one.sets.extend([
            format!("seed={}", seeds.0),
            format!("mock.seed={}", seeds.1),
        ]);
        match super::run(one).await {
            Ok(end) => {
                out.runs.push(RunDone {
                    index,
                    dir: run_dir,
                    seeds,
                    end,
                });
                if matches!(end, RunEnd::Stopped(_)) {
                    break;
                }
            }
            // a bad scenario fails the first run the same way: nothing ran
            Err(e) if out.runs.is_empty() => return Err(e),
            Err(e) => {
                out.error = Some(e);
                break;
            }
        }
    }
    Ok(Runs::Repeated(out))
}
