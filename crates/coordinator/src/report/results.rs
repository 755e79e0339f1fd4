//! Turning a finished step's aggregate into results, and writing them.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use cicada_metrics::Scope;
use cicada_scenarios::dataset::DatasetReport;
use cicada_scenarios::plan::{ResolvedTarget, StageWindow};
use cicada_scenarios::scenario::DatasetKind;
use cicada_scenarios::{Scenario, sharding};
use sha2::{Digest, Sha256};

use super::{RunResult, client_health, console, csv, json};
use crate::merge::Aggregate;
use crate::server_metrics::{ServerView, StepServerViews};
use crate::step::StepEnd;

/// What every result of a run shares.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub scenario_origin: String,
    pub target: ResolvedTarget,
    pub workers: u32,
    pub dataset: DatasetReport,
}

/// A short stable hash of the resolved scenario.
pub fn scenario_hash(s: &Scenario) -> String {
    let json = serde_json::to_vec(s).unwrap_or_default();
    Sha256::digest(&json)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A finished step, as the run loop knows it.
#[derive(Debug)]
pub struct FinishedStep<'a> {
    /// The step's number (0 without a sweep).
    pub number: u32,
    /// Its name in results ("" without a sweep).
    pub name: String,
    /// The scenario with the step's load applied.
    pub scenario: &'a Scenario,
    /// Its `[[stages]]` windows (empty without stages).
    pub windows: &'a [StageWindow],
    /// How it ended.
    pub end: StepEnd,
    /// Where measuring started, µs after the barrier (the warm-up's end).
    pub warmup_end_us: u64,
    /// The servers' own view, scraped around the step and at each window's
    /// boundaries; it goes with the whole step and each window.
    pub server: StepServerViews,
}

/// Results of one step: the whole step first, then one per `[[stages]]` window.
pub fn step_results(
    ctx: &RunContext,
    step: FinishedStep<'_>,
    agg: &mut Aggregate,
) -> Vec<RunResult> {
    let FinishedStep {
        number,
        name,
        scenario,
        windows,
        end,
        warmup_end_us,
        server,
    } = step;
    let rows = std::mem::take(&mut agg.rows);
    let targets = ctx.target.urls.len().max(1) as u32;
    let make =
        |number: u32, name: String, keep: &dyn Fn(&Scope) -> bool, window: u64, rows: Vec<_>| {
            RunResult {
                scenario: scenario.clone(),
                scenario_origin: ctx.scenario_origin.clone(),
                scenario_hash: scenario_hash(scenario),
                stage: number,
                stage_name: name,
                target: ctx.target.clone(),
                workers: ctx.workers,
                total: agg.merged(|s| !s.warmup && keep(s)),
                per_target: (0..targets)
                    .map(|t| agg.merged(|s| !s.warmup && s.target == t && keep(s)))
                    .collect(),
                warmup: agg.warmup(),
                window_start_us: window,
                rows,
                lost: end.lost.clone(),
                worker_shares: end.workers.clone(),
                interrupted: end.interrupted,
                planned: end.planned,
                started_unix: end.started_unix,
                dataset: ctx.dataset.clone(),
                server: ServerView::default(),
                client: None,
            }
        };
    let mut whole = make(number, name, &|_| true, warmup_end_us, rows);
    whole.server = server.whole.clone();
    let uncapped_open_loop = !sharding::is_closed_loop(scenario)
        && scenario.load.max_concurrency.is_none()
        && scenario.dataset.kind() != DatasetKind::Conversations;
    whole.client = Some(client_health::assess(
        &agg.health,
        &agg.usage,
        &end.workers,
        &whole.total,
        end.elapsed_s,
        uncapped_open_loop,
    ));
    // after the client's verdict, which judges an uncapped burst's dispatch
    whole.hide_meaningless();
    let mut out = vec![whole];
    for (p, w) in windows.iter().enumerate() {
        let start = (w.start.as_micros() as u64).max(warmup_end_us);
        let stage = p as u32;
        let mut r = make(
            p as u32 + 1,
            w.name.clone(),
            &|s: &Scope| s.stage == stage,
            start,
            Vec::new(),
        );
        // a window's result describes the window's own load
        if let Some(spec) = scenario.stages.get(p) {
            if let Some(rate) = spec.request_rate {
                r.scenario.load.request_rate = rate;
            }
            r.scenario.load.users = spec.users.or(r.scenario.load.users);
            r.scenario.load.duration = Some(spec.duration);
            r.scenario_hash = scenario_hash(&r.scenario);
        }
        if let Some(view) = server.windows.get(p) {
            r.server = view.clone();
        }
        r.hide_meaningless();
        out.push(r);
    }
    out
}

/// Write a step's files, name them on stderr, then print its console block;
/// returns the files written. The block comes last so that a log that merges
/// both streams (`kubectl logs`, a Slurm output file) ends with the result.
///
/// A run without sweep writes `result.json` (`output.result_filename`), plus
/// `result-stage<n>.json` per `[[stages]]` window; a sweep writes
/// `result-stage<n>.json` per step. Each result adds one CSV row per target
/// when there are several. `extra` files (written elsewhere) are named too.
pub fn write_step(
    results: &[RunResult],
    sweep: bool,
    extra: &[PathBuf],
) -> anyhow::Result<Vec<PathBuf>> {
    let Some(whole) = results.first() else {
        return Ok(Vec::new());
    };
    let dir = &whole.scenario.output.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = Vec::new();
    let base = &whole.scenario.output.result_filename;
    let main_name = if sweep {
        stage_file(base, whole.stage)
    } else {
        base.clone()
    };
    files.push(write_json(&dir.join(main_name), whole)?);
    for window in &results[1..] {
        files.push(write_json(
            &dir.join(stage_file(base, window.stage)),
            window,
        )?);
    }
    let mut rows: Vec<Vec<String>> = results[1..].iter().flat_map(csv::rows).collect();
    let mut whole_rows = csv::rows(whole);
    if results.len() > 1 {
        // the whole run beside its steps
        let h = csv::header();
        if let (Some(si), Some(ni)) = (
            h.iter().position(|c| c == "stage"),
            h.iter().position(|c| c == "stage_name"),
        ) {
            for row in &mut whole_rows {
                row[si] = "all".into();
                row[ni] = "all".into();
            }
        }
    }
    rows.extend(whole_rows);
    let csv_path = dir.join("summary.csv");
    csv::append(&csv_path, &rows)?;
    files.push(csv_path);
    files.extend(extra.iter().cloned());
    eprintln!(
        "results: {}",
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if sweep {
        println!("\nStage {}: {}", whole.stage, whole.stage_name);
    }
    print!("{}", console::render(whole));
    Ok(files)
}

/// The JSON file of stage `n`: `result.json` -> `result-stage<n>.json`.
fn stage_file(result_filename: &str, n: u32) -> String {
    match result_filename.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}-stage{n}.{ext}"),
        _ => format!("{result_filename}-stage{n}"),
    }
}

fn write_json(path: &Path, r: &RunResult) -> anyhow::Result<PathBuf> {
    let doc = serde_json::to_vec_pretty(&json::document(r)).context("encoding result JSON")?;
    std::fs::write(path, doc).with_context(|| format!("writing {}", path.display()))?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_files_follow_the_result_filename() {
        assert_eq!(stage_file("result.json", 2), "result-stage2.json");
        assert_eq!(stage_file("r.v1.json", 1), "r.v1-stage1.json");
        assert_eq!(stage_file("out", 3), "out-stage3");
    }
}
