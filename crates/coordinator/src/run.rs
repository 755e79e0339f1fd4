//! `coord run`: scenario -> fleet -> stage -> results.

use std::path::{Path, PathBuf};

use anyhow::Context;
use cicada_scenarios::tokenizer::Tokenizer;
use cicada_scenarios::{LoadedScenario, Override, ScenarioError, load_file, plan};
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::cli::RunArgs;
use crate::fleet::{Fleet, FleetOptions};
use crate::merge::Aggregate;
use crate::progress::Progress;
use crate::report::{RunResult, console, csv, json};
use crate::signals::Signals;
use crate::stage::run_stage;
use crate::target;

/// Exit code: the scenario or its inputs are invalid.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code: workers were lost; the result is degraded.
pub const EXIT_DEGRADED: i32 = 3;
/// Exit code: interrupted by a signal; partial results were written.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Errors with their exit codes.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad scenario or inputs: the message says what and where.
    #[error("{0}")]
    BadInput(String),
    /// Anything else.
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

impl From<ScenarioError> for RunError {
    fn from(e: ScenarioError) -> Self {
        RunError::BadInput(e.to_string())
    }
}

/// Turn vLLM-style `--goodput ttft:500 tpot:50` into `slo.*_ms` overrides.
pub fn goodput_overrides(specs: &[String]) -> Result<Vec<String>, RunError> {
    specs
        .iter()
        .map(|spec| {
            let (key, value) = spec.split_once(':').ok_or_else(|| {
                RunError::BadInput(format!(
                    "--goodput {spec}: expected METRIC:MILLISECONDS, e.g. ttft:500"
                ))
            })?;
            let key = key.trim().to_ascii_lowercase();
            if !["ttft", "tpot", "e2el", "itl"].contains(&key.as_str()) {
                return Err(RunError::BadInput(format!(
                    "--goodput {spec}: unknown metric \"{key}\"; expected ttft, tpot, e2el or itl"
                )));
            }
            let ms: f64 = value.trim().parse().map_err(|_| {
                RunError::BadInput(format!(
                    "--goodput {spec}: \"{value}\" is not a number of milliseconds"
                ))
            })?;
            Ok(format!("slo.{key}_ms={ms}"))
        })
        .collect()
}

/// Read a scenario with `--set` overrides.
pub fn load(path: &Path, sets: &[String]) -> Result<LoadedScenario, RunError> {
    let overrides = sets
        .iter()
        .map(|s| s.parse::<Override>())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(load_file(path, &overrides)?)
}

fn random_hex(bytes: usize) -> String {
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

fn scenario_hash(s: &cicada_scenarios::Scenario) -> String {
    let json = serde_json::to_vec(s).unwrap_or_default();
    let digest = Sha256::digest(&json);
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

fn worker_bin(args: &RunArgs) -> anyhow::Result<PathBuf> {
    if let Some(p) = &args.worker_bin {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("locating the coord executable")?;
    let dir = exe.parent().context("coord has no parent directory")?;
    Ok(dir.join(format!("worker{}", std::env::consts::EXE_SUFFIX)))
}

/// Run a scenario; returns the process exit code.
pub async fn run(args: RunArgs) -> Result<i32, RunError> {
    let mut sets = args.sets.clone();
    sets.extend(goodput_overrides(&args.goodput)?);
    let loaded = load(&args.scenario, &sets)?;
    let mut scenario = loaded.scenario;
    if let Some(dir) = &args.output_dir {
        scenario.output.dir = dir.clone();
    }
    if args.workers == 0 {
        return Err(RunError::BadInput("--workers must be at least 1".into()));
    }
    let tokenizer = match &scenario.tokenizer {
        Some(spec) => {
            Some(Tokenizer::load(&spec.source).map_err(|e| RunError::BadInput(e.to_string()))?)
        }
        None => None,
    };
    let pool = crate::pool::build(&scenario, tokenizer.as_ref(), args.quiet).await?;
    let target = target::resolve(&scenario).await?;
    let options = FleetOptions {
        local_workers: args.workers,
        expect_workers: args.workers,
        listen: args.listen,
        wait_workers: args.wait_workers,
        worker_bin: worker_bin(&args)?,
        token: random_hex(16),
        heartbeat_timeout: args.heartbeat_timeout,
    };
    let workers = options.expect_workers;
    let mut signals = Signals::install();
    let mut fleet = Fleet::start(options).await?;
    tracing::info!(addr = %fleet.addr, workers, "waiting for workers");
    fleet.join().await?;
    let run_id = random_hex(8);
    let plans = plan::plans_for(
        &scenario,
        &target.resolved,
        &pool,
        tokenizer.as_ref(),
        &run_id,
        0,
        workers,
    );
    let interval_s = scenario.load.report_interval.get().as_secs_f64();
    let mut agg = Aggregate::new(target.resolved.urls.len(), interval_s, 0..workers);
    let mut progress = Progress::new(!args.quiet);
    let end = run_stage(&mut fleet, 0, &plans, &mut agg, &mut signals, &mut progress).await;
    fleet.shutdown().await;
    drop(target.mock);
    let end = end?;
    let result = RunResult {
        scenario_hash: scenario_hash(&scenario),
        scenario_origin: loaded.origin,
        stage: 0,
        stage_name: String::new(),
        target: target.resolved,
        workers,
        total: agg.total(),
        per_target: agg.targets.clone(),
        rows: std::mem::take(&mut agg.rows),
        lost: end.lost,
        interrupted: end.interrupted,
        planned: end.planned,
        started_unix: end.started_unix,
        dataset: pool.report,
        scenario,
    };
    write_results(&result)?;
    Ok(if result.partial() {
        EXIT_INTERRUPTED
    } else if result.degraded() {
        EXIT_DEGRADED
    } else {
        0
    })
}

/// Print the console summary and write result.json and summary.csv.
fn write_results(r: &RunResult) -> anyhow::Result<()> {
    print!("{}", console::render(r));
    let dir = &r.scenario.output.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json_path = dir.join("result.json");
    let doc = serde_json::to_vec_pretty(&json::document(r)).context("encoding result.json")?;
    std::fs::write(&json_path, doc).with_context(|| format!("writing {}", json_path.display()))?;
    let csv_path = dir.join("summary.csv");
    csv::append(&csv_path, &[csv::row(r)])?;
    eprintln!(
        "results: {} and {}",
        json_path.display(),
        csv_path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_flags_become_slo_overrides() {
        let o = goodput_overrides(&["ttft:500".into(), "TPOT:50".into()]).unwrap();
        assert_eq!(o, vec!["slo.ttft_ms=500", "slo.tpot_ms=50"]);
        assert!(goodput_overrides(&["ttft=5".into()]).is_err());
        assert!(goodput_overrides(&["foo:5".into()]).is_err());
        assert!(goodput_overrides(&["ttft:fast".into()]).is_err());
    }
}
