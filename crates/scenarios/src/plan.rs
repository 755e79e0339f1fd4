//! What one worker receives: the resolved target and sampling, what drives its
//! load (its stripe of the schedule, or its users), `[[stages]]` windows, and the pool
//! entries it needs. Sent as versioned, compressed JSON.

use std::collections::BTreeMap;

use cicada_metrics::Slo;
use serde::{Deserialize, Serialize};

use std::time::Duration;

use crate::dataset::PoolEntry;
use crate::schedule::ScheduleSpec;
use crate::shape::{Cooldown, Warmup};

pub use crate::closed_loop::{ClosedLoop, UserStage};
pub use crate::sharding::{
    active_workers, plans_for, resolve_sampling, schedule_of, slots_for, stripe_entries,
    stripe_uses,
};

/// Longest schedule counted to plan a time-bound run.
const COUNT_LIMIT: usize = 5_000_000;

/// Version of the plan document; bumped on incompatible changes.
pub const PLAN_FORMAT: u32 = 2;

/// Which API goes on the wire: the request body and stream format spoken to
/// the target (what `target.backend` resolves to, with the server family).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireApi {
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
pub enum ServerFamily {
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

/// Which HTTP version requests go out in (`target.http`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// HTTP/2 where an https server offers it (ALPN), else HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/2 only: over TLS by ALPN, over plain TCP with prior knowledge (h2c).
    Http2,
}

impl HttpVersion {
    /// The name written in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            HttpVersion::Auto => "auto",
            HttpVersion::Http1 => "1.1",
            HttpVersion::Http2 => "2",
        }
    }
}

impl Serialize for HttpVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for HttpVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = HttpVersion;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"auto\", \"1.1\" or \"2\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<HttpVersion, E> {
                match v {
                    "auto" => Ok(HttpVersion::Auto),
                    "1.1" | "1" | "http/1.1" => Ok(HttpVersion::Http1),
                    "2" | "h2" | "http/2" => Ok(HttpVersion::Http2),
                    other => Err(E::custom(format!(
                        "unknown HTTP version \"{other}\": use \"auto\", \"1.1\" or \"2\""
                    ))),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<HttpVersion, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<HttpVersion, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<HttpVersion, E> {
                if (v - 1.1).abs() < 1e-9 {
                    Ok(HttpVersion::Http1)
                } else {
                    self.visit_str(&v.to_string())
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// How new connections choose among the addresses a target's name resolves
/// to (`target.addresses`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressChoice {
    /// The first live address in RFC 8305 order (as curl and aiohttp do).
    #[default]
    First,
    /// The live addresses in turn (e.g. a headless Kubernetes Service's pods).
    Spread,
}

/// Which proxy requests go through (`target.proxy`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProxySetting {
    /// The sending process's environment (`HTTP_PROXY`, `HTTPS_PROXY`,
    /// `ALL_PROXY`, `NO_PROXY`, as curl and aiohttp read them).
    #[default]
    Env,
    /// No proxy, whatever the environment says.
    None,
    /// This proxy (`http://[user:pass@]host[:port]`) for every target.
    Url(String),
}

impl ProxySetting {
    /// The setting as shown in results: a proxy URL's credentials masked.
    pub fn redacted(&self) -> Self {
        match self {
            ProxySetting::Url(u) => ProxySetting::Url(redact_userinfo(u)),
            other => other.clone(),
        }
    }
}

impl Serialize for ProxySetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ProxySetting::Env => s.serialize_str("env"),
            ProxySetting::None => s.serialize_str("none"),
            ProxySetting::Url(u) => s.serialize_str(u),
        }
    }
}

impl<'de> Deserialize<'de> for ProxySetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "env" => ProxySetting::Env,
            "none" => ProxySetting::None,
            _ if s.starts_with("http://") || s.starts_with("https://") || s.contains("://") => {
                ProxySetting::Url(s)
            }
            other => {
                return Err(serde::de::Error::custom(format!(
                    "\"{other}\" is not a proxy: use \"env\", \"none\" or http://host:port"
                )));
            }
        })
    }
}

/// `scheme://user:pass@host` as `scheme://***@host`.
fn redact_userinfo(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
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
    pub api: WireApi,
    /// `flavor` on the wire.
    #[serde(rename = "flavor")]
    pub family: ServerFamily,
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
    /// The HTTP version requests go out in.
    #[serde(default)]
    pub http: HttpVersion,
    /// How new connections choose among the name's addresses.
    #[serde(default)]
    pub addresses: AddressChoice,
    /// Which proxy requests go through.
    #[serde(default)]
    pub proxy: ProxySetting,
    /// Hosts reached directly whatever the proxy (`NO_PROXY`'s grammar).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_proxy: Vec<String>,
    /// `target.max_event_size` in bytes: the most held of one response at once.
    #[serde(default = "default_max_event_bytes")]
    pub max_event_bytes: u64,
}

fn yes() -> bool {
    true
}

fn default_max_event_bytes() -> u64 {
    crate::scenario::DEFAULT_MAX_EVENT_SIZE.get()
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

/// Everything one worker needs for one step of the run (the run itself,
/// or one value of a `[sweep]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub format: u32,
    pub run_id: String,
    /// The step (0 without a sweep, else from 1); `stage` on the wire.
    #[serde(rename = "stage")]
    pub step: u32,
    pub worker_index: u32,
    pub worker_count: u32,
    pub target: ResolvedTarget,
    pub sampling: ResolvedSampling,
    pub slo: Slo,
    /// What drives the load: a schedule (open loop) or users (closed loop).
    pub drive: Drive,
    /// Windows of `[[stages]]`, for per-stage results (empty: one implicit
    /// stage); `stages` on the wire.
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "phases")]
    pub stages: Vec<StageWindow>,
    /// Requests before measuring starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Warmup>,
    /// In-flight requests at the end of a duration-bound run: finish or cancel.
    #[serde(default)]
    pub cooldown: Cooldown,
    /// Pool entries this worker uses.
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
    /// Send every request's record with the reports (`output.save_detailed`).
    #[serde(default)]
    pub details: bool,
}

/// How a worker runs the `conversations` workload: each scheduled request
/// starts the conversation of its pool entry, whose turns then follow one
/// another on this worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationSettings {
    /// Pause between an answer and the next turn, ms.
    pub think_time_ms: u64,
}

/// One window of `[[stages]]` in time after the barrier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageWindow {
    pub name: String,
    pub start: Duration,
    pub end: Duration,
}

/// What drives a worker's load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Drive {
    /// Open loop: the worker's stripe of the global schedule.
    Open {
        /// `None` when this worker has nothing to send (more workers than concurrency).
        stripe: Option<Stripe>,
        schedule: ScheduleSpec,
        /// Requests this worker may have in flight (its share of
        /// `max_concurrency`): what conversations use, whose turns have no
        /// global order.
        slots: Option<u32>,
        /// `max_concurrency` over the whole fleet: single requests are
        /// admitted in the order of their global index against it, as with
        /// one semaphore (the worker's gate, the coordinator's cap).
        #[serde(default)]
        fleet_slots: Option<u32>,
    },
    /// Closed loop: this worker's users.
    Closed(ClosedLoop),
}

impl Plan {
    /// Stage of `[[stages]]` whose window holds `offset` (0 without stages).
    pub fn stage_of(&self, offset: Duration) -> u32 {
        self.stages
            .iter()
            .position(|p| offset < p.end)
            .unwrap_or(self.stages.len().saturating_sub(1)) as u32
    }

    /// The scenario's seed, for per-request choices (such as a random replica)
    /// that must not depend on the worker count.
    pub fn seed(&self) -> u64 {
        match &self.drive {
            Drive::Open { schedule, .. } => schedule.seed,
            Drive::Closed(c) => c.seed,
        }
    }

    /// How long the run lasts, when it is time-bound.
    pub fn duration(&self) -> Option<Duration> {
        match &self.drive {
            Drive::Open { schedule, .. } => schedule.duration,
            Drive::Closed(c) => c.duration,
        }
    }

    /// The fleet-wide cap this worker's single requests are admitted against,
    /// and whether other workers share it (`None`: no cap, or conversations,
    /// which split the cap per worker).
    pub fn fleet_cap(&self) -> Option<(u32, bool)> {
        match &self.drive {
            Drive::Open {
                stripe: Some(st),
                fleet_slots: Some(c),
                ..
            } if self.conversations.is_none() => Some((*c, st.count > 1)),
            _ => None,
        }
    }

    /// Whether request `index`, due at `offset`, is a warm-up request.
    pub fn is_warmup(&self, index: u64, offset: Duration) -> bool {
        self.warmup.is_some_and(|w| w.covers(index, offset))
    }

    /// Requests this worker will send, when the run is count-bound (0 when open-ended).
    pub fn planned_requests(&self) -> u64 {
        match &self.drive {
            Drive::Open { stripe: None, .. } => 0,
            Drive::Open {
                stripe: Some(st),
                schedule,
                ..
            } if self.conversations.is_some() => {
                if schedule.requests.is_none() || schedule.duration.is_some() {
                    return 0;
                }
                // every conversation's turns (the pool share keeps the pool's id order)
                schedule
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
            Drive::Open {
                stripe: Some(s),
                schedule,
                ..
            } => match (schedule.requests, schedule.duration) {
                (Some(n), _) => {
                    let (count, index) = (u64::from(s.count), u64::from(s.index));
                    n / count + u64::from(n % count > index)
                }
                // time-bound: the schedule is deterministic, so count it
                // (unless it is unbounded or too long to be worth counting)
                (None, Some(_))
                    if schedule.rate.per_second().is_some() || schedule.arrivals_us.is_some() =>
                {
                    let counted = schedule.global().take(COUNT_LIMIT).count();
                    if counted == COUNT_LIMIT {
                        0
                    } else {
                        schedule.stripe(s.index, s.count).count() as u64
                    }
                }
                _ => 0,
            },
            Drive::Closed(c) => c.planned_requests(),
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
