//! What one worker receives: the resolved target, sampling, its stripe of the
//! schedule, its concurrency slots and the pool entries it needs.

use std::collections::BTreeMap;

use cicada_metrics::Slo;
use serde::{Deserialize, Serialize};

use crate::dataset::PoolEntry;
use crate::schedule::ScheduleSpec;

/// Version of the plan document; bumped on incompatible changes.
pub const PLAN_FORMAT: u32 = 2;

/// Request body and stream format spoken to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI text completions.
    Completions,
    /// OpenAI chat completions.
    Chat,
    /// HuggingFace TGI `/generate_stream` and `/generate`.
    Tgi,
    /// llama.cpp's native `/completion`.
    LlamaCpp,
    /// NVIDIA Triton's generate extension (`/v2/models/{model}/generate_stream`).
    Triton,
}

/// Server family, for the extras it accepts beyond its API and where it
/// exposes health and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavor {
    /// Plain OpenAI: no extra fields.
    Openai,
    /// vLLM: `ignore_eos`, `min_tokens`, continuous usage stats.
    Vllm,
    /// SGLang: `ignore_eos`, `min_tokens`, continuous usage stats.
    Sglang,
    /// The built-in mock (vLLM-compatible extras).
    Mock,
    /// HuggingFace text-generation-inference.
    Tgi,
    /// llama.cpp's `llama-server`: `ignore_eos`, `timings`.
    LlamaCpp,
    /// NVIDIA Triton (TensorRT-LLM or vLLM backend).
    Triton,
}

/// How each request picks one of several replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// Request `i` goes to replica `i mod n` (the same for any worker count).
    #[default]
    RoundRobin,
    /// A seeded random replica per request (the same for any worker count).
    Random,
    /// The replica with the fewest requests in flight from this worker
    /// (workers do not see each other's requests).
    LeastInFlight,
}

impl Routing {
    /// Name as written in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Routing::RoundRobin => "round_robin",
            Routing::Random => "random",
            Routing::LeastInFlight => "least_in_flight",
        }
    }
}

/// TLS settings for the target's HTTPS connections.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TlsSettings {
    /// PEM text of extra CA certificates to trust (read by the coordinator,
    /// shipped in the plan so remote workers need no file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    /// Accept any certificate (testing only).
    #[serde(default)]
    pub insecure: bool,
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
    /// How requests choose a replica.
    #[serde(default)]
    pub routing: Routing,
    /// TLS trust settings.
    #[serde(default)]
    pub tls: TlsSettings,
    /// Reuse connections (HTTP keep-alive); off opens a fresh connection per request.
    #[serde(default = "yes")]
    pub keep_alive: bool,
}

fn yes() -> bool {
    true
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

#[cfg(test)]
mod tests {
    use super::*;

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

/// Sampling with the scenario's defaults applied (`ignore_eos` is on for the
/// random dataset, as in `vllm bench serve`).
pub fn resolve_sampling(s: &crate::Scenario) -> ResolvedSampling {
    let sm = &s.sampling;
    ResolvedSampling {
        temperature: sm.temperature,
        top_p: sm.top_p,
        top_k: sm.top_k,
        ignore_eos: sm
            .ignore_eos
            .unwrap_or(s.dataset.kind == crate::scenario::DatasetKind::Random),
        min_tokens: sm.min_tokens,
        extra_body: sm.extra_body.clone(),
    }
}

/// The global schedule of a scenario's run.
pub fn schedule_of(s: &crate::Scenario, pool_size: u64) -> ScheduleSpec {
    let requests = match (s.load.num_prompts, s.load.duration) {
        (Some(n), _) => Some(n),
        (None, Some(_)) => None,
        (None, None) => Some(crate::scenario::DEFAULT_NUM_PROMPTS),
    };
    ScheduleSpec {
        seed: s.seed,
        rate: s.load.request_rate,
        burstiness: s.load.burstiness,
        requests,
        duration: s.load.duration.map(|d| d.get()),
        pool_size,
    }
}

/// One plan per worker for a stage: stripes of the one global schedule,
/// concurrency slots split as evenly as integers allow, and each worker's pool share.
pub fn plans_for(
    s: &crate::Scenario,
    target: &ResolvedTarget,
    pool: &[PoolEntry],
    tokenizer: Option<&crate::tokenizer::Tokenizer>,
    run_id: &str,
    stage: u32,
    workers: u32,
) -> Vec<Plan> {
    let workers = workers.max(1);
    let pool_size = pool.len() as u64;
    let schedule = schedule_of(s, pool_size);
    let active = active_workers(workers, s.load.max_concurrency);
    let sampling = resolve_sampling(s);
    (0..workers)
        .map(|w| {
            let stripe = (w < active).then_some(Stripe {
                index: w,
                count: active,
            });
            let slots = s.load.max_concurrency.map(|c| slots_for(c, w, active));
            let pool = match stripe {
                Some(st) => pool
                    .iter()
                    .filter(|e| stripe_uses(e.id, st.index, st.count, pool_size))
                    .cloned()
                    .collect(),
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
            routing: Routing::default(),
            tls: TlsSettings::default(),
            keep_alive: true,
        }
    }

    #[test]
    fn plans_cover_every_request_once_with_the_entries_they_need() {
        let mut s = crate::Scenario::default();
        s.load.num_prompts = Some(50);
        s.load.max_concurrency = Some(6);
        s.dataset.input_len = 8;
        let pool = build_pool(&s).unwrap().entries;
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
