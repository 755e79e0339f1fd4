//! `cicada run --dry-run`: the scenario resolved and its dataset built
//! exactly as a run builds them (the same seed, the same plans for the same
//! workers), then described: requests, length spreads, token totals, each
//! worker's share and a sample prompt or two. Nothing is sent, and neither
//! the server nor the embedded mock is reached.

use std::fmt::Write as _;

use cicada_plan::pool::PoolEntry;
use cicada_plan::{Drive, Plan};
use cicada_scenarios::dataset::{DatasetReport, Pool};
use cicada_scenarios::tokenizer::Tokenizer;
use serde::Serialize;

use crate::cli::RunArgs;
use crate::error::RunError;

/// Characters of a sample prompt shown before it is clipped.
const SAMPLE_CHARS: usize = 160;
/// Sample prompts shown.
const SAMPLES: usize = 2;

/// A length's spread (nearest-rank percentiles).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub total: u64,
}

impl Spread {
    fn of(mut v: Vec<u64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let total: u64 = v.iter().sum();
        let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Spread {
            min: v[0],
            mean: total as f64 / v.len() as f64,
            p50: rank(0.5),
            p99: rank(0.99),
            max: v[v.len() - 1],
            total,
        })
    }
}

/// One worker's share of the run, as its plan holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerShare {
    pub worker: u32,
    /// Requests it sends, when the run's count is known ahead.
    pub requests: Option<u64>,
    /// Closed-loop users it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<u64>,
    /// Prompt tokens of its requests, when its requests are known ahead.
    pub input_tokens: Option<u64>,
    /// Pool entries its plan carries.
    pub pool_entries: u64,
    /// Bytes of prompt its plan carries (token ids count 7 each, as JSON).
    pub prompt_bytes: u64,
}

/// A pool entry shown as it is sent, clipped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    pub id: u64,
    pub input_tokens: u32,
    pub output_tokens: Option<u32>,
    /// The prompt's text (token ids one a word), clipped to 160 characters.
    pub prompt: String,
}

/// What `--dry-run` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DryRun {
    /// The scenario's name.
    pub name: String,
    /// Where the scenario came from.
    pub origin: String,
    pub dataset: DatasetReport,
    /// Entries in the pool (request `i` sends entry `i mod pool_size`).
    pub pool_size: u64,
    /// Prompts go as token ids (`dataset.prompt_token_ids`).
    pub token_ids: bool,
    /// Requests the run sends, when known ahead (a count-bound open loop);
    /// otherwise the spreads are over the pool's entries.
    pub requests: Option<u64>,
    /// What the spreads are over: `requests` or `pool entries`.
    pub over: String,
    /// Prompt tokens (as recorded: vLLM's `prompt_len`).
    pub input_tokens: Spread,
    /// Output tokens asked for, when every entry fixes them.
    pub output_tokens: Option<Spread>,
    pub workers: Vec<WorkerShare>,
    pub samples: Vec<Sample>,
}

/// Build the run's pool and plans as `cicada run` would, and describe them.
pub async fn dry_run(args: &RunArgs) -> Result<DryRun, RunError> {
    let loaded = crate::cli::scenario::of_run(args)?;
    let s = loaded.scenario;
    let local = args
        .workers
        .unwrap_or(if args.expect_workers.is_some() { 0 } else { 1 });
    let workers = args.expect_workers.unwrap_or(local).max(1);
    let tokenizer = match &s.tokenizer {
        Some(spec) => {
            Some(Tokenizer::load(&spec.source).map_err(|e| RunError::BadInput(e.to_string()))?)
        }
        None => None,
    };
    let pool = crate::pool::build(&s, tokenizer.as_ref(), args.quiet).await?;
    let target = cicada_probe::offline(&s);
    let plans = cicada_scenarios::sharding::plans_for(
        &s,
        &target,
        &pool,
        tokenizer.as_ref(),
        "dry-run",
        0,
        workers,
    );
    Ok(describe(&s, loaded.origin, &pool, &plans))
}

/// The description of `pool` sent by `plans`.
fn describe(s: &cicada_scenarios::Scenario, origin: String, pool: &Pool, plans: &[Plan]) -> DryRun {
    let entry = |id: u64| -> Option<&PoolEntry> {
        pool.entries
            .get(id as usize)
            .filter(|e| e.id == id)
            .or_else(|| pool.entries.iter().find(|e| e.id == id))
    };
    let known = !s.runs_sessions() && plans.iter().all(counted);
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    let mut workers = Vec::new();
    for p in plans {
        let mut share = WorkerShare {
            worker: p.worker_index,
            requests: None,
            users: None,
            input_tokens: None,
            pool_entries: p.pool.len() as u64,
            prompt_bytes: p.pool.iter().map(|e| e.prompt.text_bytes() as u64).sum(),
        };
        match &p.drive {
            Drive::Open {
                stripe: Some(st),
                schedule,
                ..
            } if known => {
                let mut n = 0;
                let mut tokens = 0;
                for slot in schedule.stripe(st.index, st.count) {
                    let Some(e) = entry(slot.pool_id) else {
                        continue;
                    };
                    n += 1;
                    tokens += u64::from(e.input_tokens);
                    inputs.push(u64::from(e.input_tokens));
                    outputs.push(e.output_tokens.map(u64::from));
                }
                share.requests = Some(n);
                share.input_tokens = Some(tokens);
            }
            Drive::Open { stripe: None, .. } if known => {
                share.requests = Some(0);
                share.input_tokens = Some(0);
            }
            Drive::Closed(c) => share.users = Some(c.users.len() as u64),
            Drive::Open { .. } => {}
        }
        workers.push(share);
    }
    let requests = known.then_some(inputs.len() as u64);
    if !known {
        inputs = pool
            .entries
            .iter()
            .map(|e| u64::from(e.input_tokens))
            .collect();
        outputs = pool
            .entries
            .iter()
            .map(|e| e.output_tokens.map(u64::from))
            .collect();
    }
    let outputs: Option<Vec<u64>> = outputs.into_iter().collect();
    DryRun {
        name: s.name.clone(),
        origin,
        dataset: pool.report.clone(),
        pool_size: pool.entries.len() as u64,
        token_ids: matches!(&s.dataset, cicada_scenarios::scenario::Dataset::Random(d) if d.prompt_token_ids),
        requests,
        over: if known { "requests" } else { "pool entries" }.to_string(),
        input_tokens: Spread::of(inputs).unwrap_or(Spread {
            min: 0,
            mean: 0.0,
            p50: 0,
            p99: 0,
            max: 0,
            total: 0,
        }),
        output_tokens: outputs.and_then(Spread::of),
        workers,
        samples: pool.entries.iter().take(SAMPLES).map(sample).collect(),
    }
}

/// A plan whose requests are known ahead: a count-bound open loop.
fn counted(p: &Plan) -> bool {
    match &p.drive {
        Drive::Open { schedule, .. } => schedule.requests.is_some() && schedule.duration.is_none(),
        Drive::Closed(_) => false,
    }
}

fn sample(e: &PoolEntry) -> Sample {
    let text = e.prompt.text();
    let mut prompt: String = text.chars().take(SAMPLE_CHARS).collect();
    if prompt.len() < text.len() {
        prompt.push('…');
    }
    Sample {
        id: e.id,
        input_tokens: e.input_tokens,
        output_tokens: e.output_tokens,
        prompt,
    }
}

impl DryRun {
    /// The description as JSON (`--dry-run --json`).
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The description as the console prints it.
    pub fn text(&self) -> String {
        let mut out = String::new();
        // writing into a String cannot fail
        let _ = self.write_text(&mut out);
        out
    }

    fn write_text(&self, out: &mut String) -> std::fmt::Result {
        writeln!(
            out,
            "dry run of {} ({}): nothing sent",
            self.name, self.origin
        )?;
        writeln!(
            out,
            "dataset: {}, {} prompts{}",
            self.dataset.kind,
            self.pool_size,
            if self.token_ids {
                ", sent as token ids"
            } else {
                ""
            }
        )?;
        match self.requests {
            Some(n) => writeln!(
                out,
                "requests: {n} (request i sends prompt i mod {})",
                self.pool_size
            )?,
            None => writeln!(
                out,
                "requests: not known ahead (time-bound, closed-loop or sessions); figures over the pool's prompts"
            )?,
        }
        writeln!(
            out,
            "{:<22} {:>8} {:>10} {:>8} {:>8} {:>8} {:>12}",
            "tokens", "min", "mean", "p50", "p99", "max", "total"
        )?;
        let row = |out: &mut String, what: &str, s: &Spread| {
            writeln!(
                out,
                "{:<22} {:>8} {:>10.1} {:>8} {:>8} {:>8} {:>12}",
                what, s.min, s.mean, s.p50, s.p99, s.max, s.total
            )
        };
        row(out, "input", &self.input_tokens)?;
        if let Some(o) = &self.output_tokens {
            row(out, "output (asked)", o)?;
        }
        writeln!(out, "workers: {}", self.workers.len())?;
        for w in &self.workers {
            let mut line = format!("  worker {}:", w.worker);
            if let Some(n) = w.requests {
                let _ = write!(line, " {n} requests,");
            }
            if let Some(t) = w.input_tokens {
                let _ = write!(line, " {t} input tokens,");
            }
            if let Some(u) = w.users {
                let _ = write!(line, " {u} users,");
            }
            writeln!(
                out,
                "{line} {} prompts in its plan ({:.1} MiB)",
                w.pool_entries,
                w.prompt_bytes as f64 / (1024.0 * 1024.0)
            )?;
        }
        for e in &self.samples {
            let asked = e
                .output_tokens
                .map_or(String::new(), |n| format!(", {n} out"));
            writeln!(
                out,
                "prompt {} ({} tokens{asked}): {}",
                e.id, e.input_tokens, e.prompt
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearest rank: p50 of 1..=10 is 5, p99 is 10; the total is exact.
    #[test]
    fn spreads_use_nearest_rank() {
        let s = Spread::of((1..=10).rev().collect()).unwrap();
        assert_eq!((s.min, s.p50, s.p99, s.max, s.total), (1, 5, 10, 10, 55));
        assert!((s.mean - 5.5).abs() < 1e-9);
        assert!(Spread::of(Vec::new()).is_none());
    }
}
