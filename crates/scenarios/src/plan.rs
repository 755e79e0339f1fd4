//! What one worker receives: the resolved target, sampling, its stripe of the
//! schedule, its concurrency slots and the pool entries it needs.

use std::collections::BTreeMap;

use cicada_metrics::Slo;
use serde::{Deserialize, Serialize};

use std::collections::BTreeSet;

use crate::dataset::{Pool, PoolEntry};
use crate::schedule::ScheduleSpec;

/// Version of the plan document; bumped on incompatible changes.
pub const PLAN_FORMAT: u32 = 1;

/// Request body and stream format spoken to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI text completions.
    Completions,
    /// OpenAI chat completions.
    Chat,
}

/// Server family, for the extras it accepts beyond the OpenAI API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavor {
    /// Plain OpenAI: no extra fields.
    Openai,
    /// vLLM: `ignore_eos`, `min_tokens`, continuous usage stats.
    Vllm,
    /// SGLang: `ignore_eos`, `min_tokens`.
    Sglang,
    /// The built-in mock (vLLM-compatible extras).
    Mock,
}

/// The target with everything decided: URLs, model, API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedTarget {
    pub api: Api,
    pub flavor: Flavor,
    /// Full request URLs, one per replica.
    pub urls: Vec<String>,
    pub model: String,
    pub headers: BTreeMap<String, String>,
    /// Environment variable each worker reads the API key from.
    pub api_key_env: Option<String>,
    pub timeout_ms: u64,
    pub stream: bool,
}

/// Sampling parameters with defaults applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedSampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub ignore_eos: bool,
    pub min_tokens: Option<u32>,
    pub extra_body: BTreeMap<String, serde_json::Value>,
}

/// Which requests of the global schedule a worker sends: `index mod count == index_in`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stripe {
    pub index: u32,
    pub count: u32,
}

/// Everything one worker needs for one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub format: u32,
    pub run_id: String,
    pub stage: u32,
    pub worker_index: u32,
    pub worker_count: u32,
    /// `None` when this worker has nothing to send (more workers than concurrency).
    pub stripe: Option<Stripe>,
    pub target: ResolvedTarget,
    pub sampling: ResolvedSampling,
    pub slo: Slo,
    pub schedule: ScheduleSpec,
    /// Requests this worker may have in flight (its share of `max_concurrency`).
    pub slots: Option<u32>,
    /// Pool entries this worker's stripe uses.
    pub pool: Vec<PoolEntry>,
    pub report_interval_ms: u64,
    /// `tokenizer.json` text, when workers count or verify output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Verify usage against the tokenizer on every n-th request (0 = never).
    #[serde(default)]
    pub verify_every: u32,
    /// Set when every scheduled request starts a multi-turn conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<ConversationSettings>,
}

/// How a worker runs the `conversations` workload: each scheduled request
/// starts the conversation of its pool entry, whose turns then follow one
/// another on this worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationSettings {
    /// Pause between an answer and the next turn, ms.
    pub think_time_ms: u64,
}

impl Plan {
    /// Requests this worker will send if nothing fails (0 when open-ended):
    /// its stripe's requests, or its conversations' turns.
    pub fn planned_requests(&self) -> u64 {
        let Some(st) = self.stripe else { return 0 };
        let Some(n) = self.schedule.requests else {
            return 0;
        };
        if self.conversations.is_none() || self.schedule.duration.is_some() {
            let (count, index) = (u64::from(st.count.max(1)), u64::from(st.index));
            return n / count + u64::from(n % count > index);
        }
        // the pool share keeps the pool's id order
        self.schedule
            .stripe(st.index, st.count)
            .map(|slot| {
                self.pool
                    .binary_search_by_key(&slot.pool_id, |e| e.id)
                    .ok()
                    .and_then(|i| self.pool[i].conversation.as_ref())
                    .map_or(1, |c| c.turns.len() as u64)
            })
            .sum()
    }
}

/// Workers that receive requests: all of them, or `max_concurrency` if that is fewer
/// (a worker with no concurrency slot could never send its stripe).
pub fn active_workers(workers: u32, max_concurrency: Option<u32>) -> u32 {
    match max_concurrency {
        Some(c) => workers.min(c).max(1),
        None => workers.max(1),
    }
}

/// Concurrency slots of stripe `index` of `count`: `⌊C/count⌋ + (index < C mod count)`.
pub fn slots_for(max_concurrency: u32, index: u32, count: u32) -> u32 {
    let count = count.max(1);
    max_concurrency / count + u32::from(index < max_concurrency % count)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Whether stripe `index` of `count` ever uses pool entry `id` of a pool of `pool_size`.
///
/// Request `i` uses entry `i mod P`, and the stripe holds `i ≡ index (mod count)`,
/// so it reaches exactly the entries congruent to `index` modulo `gcd(count, P)`.
pub fn stripe_uses(id: u64, index: u32, count: u32, pool_size: u64) -> bool {
    let g = gcd(u64::from(count.max(1)), pool_size.max(1));
    id % g == u64::from(index) % g
}

/// Pool entries stripe `index` of `count` uses when the run has `requests`
/// requests (`None`: cycling without end, as a duration-bound run may).
pub fn stripe_entries(
    index: u32,
    count: u32,
    requests: Option<u64>,
    pool_size: u64,
) -> BTreeSet<u64> {
    let (count, index, p) = (u64::from(count.max(1)), u64::from(index), pool_size.max(1));
    let g = gcd(count, p);
    let reachable = p / g;
    match requests {
        None => (0..p).filter(|id| id % g == index % g).collect(),
        Some(r) => {
            let mut out = BTreeSet::new();
            let mut i = index;
            while i < r && (out.len() as u64) < reachable {
                out.insert(i % p);
                i += count;
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripe_entries_are_exactly_the_ones_used() {
        for (count, p, r) in [
            (4u32, 10u64, Some(7u64)),
            (3, 9, Some(100)),
            (8, 1000, Some(1000)),
            (5, 7, None),
            (4, 23, Some(23)),
        ] {
            for index in 0..count {
                let limit = r.unwrap_or(u64::from(count) * p * 2);
                let brute: BTreeSet<u64> = (0..limit)
                    .filter(|i| i % u64::from(count) == u64::from(index))
                    .map(|i| i % p)
                    .collect();
                assert_eq!(
                    stripe_entries(index, count, r, p),
                    brute,
                    "count={count} p={p} r={r:?} index={index}"
                );
            }
        }
    }

    #[test]
    fn slots_split_as_evenly_as_integers_allow() {
        for (c, n) in [(64u32, 8u32), (10, 3), (7, 7), (5, 2)] {
            let slots: Vec<u32> = (0..n).map(|w| slots_for(c, w, n)).collect();
            assert_eq!(slots.iter().sum::<u32>(), c);
            let (lo, hi) = (slots.iter().min().unwrap(), slots.iter().max().unwrap());
            assert!(hi - lo <= 1, "{slots:?}");
        }
        assert_eq!(active_workers(8, Some(3)), 3);
        assert_eq!(active_workers(8, None), 8);
        assert_eq!(active_workers(2, Some(64)), 2);
    }

    #[test]
    fn stripe_pool_needs_match_brute_force() {
        for (count, p) in [(4u32, 10u64), (3, 9), (8, 1000), (5, 7)] {
            for index in 0..count {
                let brute: std::collections::BTreeSet<u64> = (0..count as u64 * p * 2)
                    .filter(|i| i % count as u64 == index as u64)
                    .map(|i| i % p)
                    .collect();
                let ours: std::collections::BTreeSet<u64> = (0..p)
                    .filter(|id| stripe_uses(*id, index, count, p))
                    .collect();
                assert_eq!(brute, ours, "count={count} p={p} index={index}");
            }
        }
    }
}

/// Why a plan document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("plan format {found} is not supported by this worker (it reads format {PLAN_FORMAT})")]
    Format { found: u32 },
    #[error("the plan document is corrupt: {0}")]
    Corrupt(String),
}

impl Plan {
    /// Encode as deflate-compressed JSON (the `Assign.plan` bytes).
    pub fn encode(&self) -> Vec<u8> {
        use std::io::Write as _;
        let json = serde_json::to_vec(self).unwrap_or_default();
        let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        // writing into a Vec cannot fail
        let _ = enc.write_all(&json);
        enc.finish().unwrap_or_default()
    }

    /// Decode `Assign.plan` bytes, checking the format version.
    pub fn decode(bytes: &[u8], format: u32) -> Result<Self, PlanError> {
        use std::io::Read as _;
        if format != PLAN_FORMAT {
            return Err(PlanError::Format { found: format });
        }
        let mut json = Vec::new();
        flate2::read::DeflateDecoder::new(bytes)
            .read_to_end(&mut json)
            .map_err(|e| PlanError::Corrupt(e.to_string()))?;
        serde_json::from_slice(&json).map_err(|e| PlanError::Corrupt(e.to_string()))
    }
}

/// Sampling with the scenario's defaults applied: `ignore_eos` is on for the
/// synthetic workloads (random, as in `vllm bench serve`; prefix; trace), whose
/// output lengths are a specification rather than a natural answer.
pub fn resolve_sampling(s: &crate::Scenario) -> ResolvedSampling {
    let sm = &s.sampling;
    ResolvedSampling {
        temperature: sm.temperature,
        top_p: sm.top_p,
        top_k: sm.top_k,
        ignore_eos: sm.ignore_eos.unwrap_or(s.dataset.kind.synthetic()),
        min_tokens: sm.min_tokens,
        extra_body: sm.extra_body.clone(),
    }
}

/// The global schedule of a scenario's run over `pool`: the seeded arrival
/// process, or the pool's own send times when it is a replayed trace.
pub fn schedule_of(s: &crate::Scenario, pool: &Pool) -> ScheduleSpec {
    let pool_size = pool.entries.len() as u64;
    let requests = match (&pool.arrivals_us, s.load.num_prompts, s.load.duration) {
        (Some(a), _, _) => Some(a.len() as u64),
        (None, Some(n), _) => Some(n),
        (None, None, Some(_)) => None,
        (None, None, None) => Some(crate::scenario::DEFAULT_NUM_PROMPTS),
    };
    ScheduleSpec {
        seed: s.seed,
        rate: s.load.request_rate,
        burstiness: s.load.burstiness,
        requests,
        duration: s.load.duration.map(|d| d.get()),
        pool_size,
        arrivals_us: pool.arrivals_us.clone(),
    }
}

/// One plan per worker for a stage: stripes of the one global schedule,
/// concurrency slots split as evenly as integers allow, and each worker's pool share.
pub fn plans_for(
    s: &crate::Scenario,
    target: &ResolvedTarget,
    pool: &Pool,
    tokenizer: Option<&crate::tokenizer::Tokenizer>,
    run_id: &str,
    stage: u32,
    workers: u32,
) -> Vec<Plan> {
    let workers = workers.max(1);
    let pool_size = pool.entries.len() as u64;
    let schedule = schedule_of(s, pool);
    let conversations =
        (s.dataset.kind == crate::scenario::DatasetKind::Conversations).then(|| {
            ConversationSettings {
                think_time_ms: s.dataset.think_time().get().as_millis() as u64,
            }
        });
    let active = active_workers(workers, s.load.max_concurrency);
    let sampling = resolve_sampling(s);
    (0..workers)
        .map(|w| {
            let stripe = (w < active).then_some(Stripe {
                index: w,
                count: active,
            });
            let slots = s.load.max_concurrency.map(|c| slots_for(c, w, active));
            let pool: Vec<PoolEntry> = match stripe {
                Some(st) => {
                    let ids = stripe_entries(st.index, st.count, schedule.requests, pool_size);
                    pool.entries
                        .iter()
                        .filter(|e| ids.contains(&e.id))
                        .cloned()
                        .collect()
                }
                None => Vec::new(),
            };
            Plan {
                format: PLAN_FORMAT,
                run_id: run_id.to_string(),
                stage,
                worker_index: w,
                worker_count: workers,
                stripe,
                target: target.clone(),
                sampling: sampling.clone(),
                slo: s.slo,
                schedule: schedule.clone(),
                slots: if stripe.is_some() { slots } else { Some(0) },
                pool,
                report_interval_ms: s.load.report_interval.get().as_millis() as u64,
                tokenizer: tokenizer.map(|t| t.json().to_string()),
                verify_every: s.tokenizer.as_ref().map_or(0, |t| t.verify_every),
                conversations,
            }
        })
        .collect()
}

#[cfg(test)]
mod fleet_tests {
    use super::*;
    use crate::dataset::build_pool;

    fn target() -> ResolvedTarget {
        ResolvedTarget {
            api: Api::Chat,
            flavor: Flavor::Mock,
            urls: vec!["http://x/v1/chat/completions".into()],
            model: "m".into(),
            headers: BTreeMap::new(),
            api_key_env: None,
            timeout_ms: 1000,
            stream: true,
        }
    }

    #[test]
    fn plans_cover_every_request_once_with_the_entries_they_need() {
        let mut s = crate::Scenario::default();
        s.load.num_prompts = Some(50);
        s.load.max_concurrency = Some(6);
        s.dataset.input_len = Some(8);
        let pool = build_pool(&s, None).unwrap();
        for workers in [1u32, 4, 8] {
            let plans = plans_for(&s, &target(), &pool, None, "r", 0, workers);
            assert_eq!(plans.len(), workers as usize);
            let mut seen = Vec::new();
            let mut slots = 0;
            for p in &plans {
                let back = Plan::decode(&p.encode(), PLAN_FORMAT).unwrap();
                assert_eq!(&back, p);
                slots += p.slots.unwrap();
                if let Some(st) = p.stripe {
                    for slot in p.schedule.stripe(st.index, st.count) {
                        assert!(p.pool.iter().any(|e| e.id == slot.pool_id));
                        seen.push(slot.index);
                    }
                    if let Some(st) = p.stripe {
                        assert_eq!(
                            p.planned_requests(),
                            p.schedule.stripe(st.index, st.count).count() as u64
                        );
                    }
                }
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..50).collect::<Vec<u64>>(), "workers={workers}");
            assert_eq!(slots, 6);
        }
        assert!(Plan::decode(b"junk", PLAN_FORMAT).is_err());
        assert!(Plan::decode(&[], PLAN_FORMAT + 1).is_err());
    }
}
