//! The scenario file's model: every section and key, with defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;

use cicada_metrics::Slo;
use serde::{Deserialize, Serialize};

pub use crate::abort::AbortSpec;
pub use crate::backend::Backend;
pub use crate::dataset_spec::{
    AgentTraceFormat, AgentTraceSpec, AgenticSpec, AudioSpec, ConversationsSpec, Dataset,
    DatasetKind, ImageBucket, JsonlSpec, Length, LengthDist, LengthShape, MmLimits, MultiTurnSpec,
    PrefixSpec, RandomMmSpec, RandomSpec, Sampler, SharegptSpec, SonnetSpec, TraceSpec, Weighted,
};
pub use crate::hooks::{
    CacheReset, HooksSpec, NoEngine, SGLANG_FLUSH_ROUTE, START_PROFILE_ROUTE, STOP_PROFILE_ROUTE,
    VLLM_RESET_ROUTE,
};
pub use crate::repeats::RunSpec;
pub use crate::saturation::SaturationSpec;
use crate::shape::{StageSpec, Sweep};
pub use crate::steady::SteadySpec;
pub use crate::structured::StructuredSpec;
use cicada_mock::MockConfig;
use cicada_plan::Routing;
use cicada_plan::shape::{Cooldown, Ramp, ThinkTime, Warmup};
use cicada_plan::units::{ByteSize, Rate, Span};
use cicada_plan::{ModelAssignment, WeightedModel};

/// A whole load test: what to send, where, how fast, and what to report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name used in results and file names.
    #[serde(default = "default_name")]
    pub name: String,
    /// Seed for every random choice (dataset sampling, arrivals); same seed, same run.
    #[serde(default)]
    pub seed: u64,
    /// The server under test.
    #[serde(default)]
    pub target: Target,
    /// Tokenizer for exact prompt lengths and output counting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<TokenizerSpec>,
    /// What prompts to send.
    #[serde(default)]
    pub dataset: Dataset,
    /// How fast to send them.
    #[serde(default)]
    pub load: Load,
    /// Generation parameters sent with every request.
    #[serde(default)]
    pub sampling: Sampling,
    /// Tools, tool choice and response format sent with every request, and
    /// the check of each output against them.
    #[serde(default, skip_serializing_if = "StructuredSpec::is_unset")]
    pub structured: StructuredSpec,
    /// Service-level objectives for goodput.
    #[serde(default, skip_serializing_if = "slo_unset")]
    pub slo: Slo,
    /// How pooling backends (embeddings) batch their inputs.
    #[serde(default, skip_serializing_if = "Pooling::is_unset")]
    pub pooling: Pooling,
    /// The built-in mock's behaviour when `target.backend = "mock"`.
    #[serde(default)]
    pub mock: MockConfig,
    /// Where and what to write.
    #[serde(default)]
    pub output: Output,
    /// A load shape of consecutive stages, each reported on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageSpec>,
    /// Run the scenario several times, varying one load key.
    #[serde(
        default,
        deserialize_with = "crate::shape::deserialize_sweep",
        skip_serializing_if = "Option::is_none"
    )]
    pub sweep: Option<Sweep>,
    /// Repeat the whole scenario (`--num-runs`) and summarise the runs.
    #[serde(default, skip_serializing_if = "RunSpec::is_unset")]
    pub run: RunSpec,
    /// Calls to the server(s) around each step: reset the prefix cache,
    /// start and stop the profiler.
    #[serde(default, skip_serializing_if = "HooksSpec::is_unset")]
    pub hooks: HooksSpec,
    /// When an interval counts as the load's plateau (the steady-state window).
    #[serde(default, skip_serializing_if = "SteadySpec::is_unset")]
    pub steady_state: SteadySpec,
    /// When an open loop's server counts as saturated, and whether the step then stops.
    #[serde(default, skip_serializing_if = "SaturationSpec::is_unset")]
    pub saturation: SaturationSpec,
    /// Thresholds that stop a step mid-run (k6's `abortOnFail`).
    #[serde(default, skip_serializing_if = "AbortSpec::is_unset")]
    pub abort: AbortSpec,
    /// Mixed traffic: several weighted workloads in one run, each laying its
    /// own dataset, target model/backend/endpoint, sampling and SLO over
    /// the scenario's (empty: one workload, the scenario itself).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadSpec>,
}

fn slo_unset(slo: &Slo) -> bool {
    !slo.is_set()
}

fn default_name() -> String {
    "cicada".to_string()
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            name: default_name(),
            seed: 0,
            target: Target::default(),
            tokenizer: None,
            dataset: Dataset::default(),
            load: Load::default(),
            sampling: Sampling::default(),
            structured: StructuredSpec::default(),
            pooling: Pooling::default(),
            slo: Slo::default(),
            mock: MockConfig::default(),
            output: Output::default(),
            stages: Vec::new(),
            sweep: None,
            run: RunSpec::default(),
            hooks: HooksSpec::default(),
            steady_state: SteadySpec::default(),
            saturation: SaturationSpec::default(),
            abort: AbortSpec::default(),
            workloads: Vec::new(),
        }
    }
}

/// The server under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Target {
    /// Serving API.
    pub backend: Backend,
    /// Base URL, with any path prefix (`http://host:8000/my-model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Several replicas' base URLs instead of `base_url`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
    /// Path appended to the base URL; defaults to the backend's usual route.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Model id; defaults to the first id the server lists at `/v1/models`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Several models (or LoRA adapters) behind the endpoint, each request
    /// naming one of them; instead of `model`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<WeightedModel>,
    /// How each request picks one of `models`: "random" (by weight) or "round_robin".
    #[serde(skip_serializing_if = "ModelAssignment::is_random")]
    pub model_assignment: ModelAssignment,
    /// Name of the environment variable holding the API key (the key itself never goes in a file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// A header naming the session, sent with every turn of a multi-turn
    /// workload (`conversations`, `multi_turn`), so a prefix-aware router
    /// can keep a session on one replica: `X-Session-ID` (vllm-bench),
    /// `x-dynamo-session-id` (Dynamo), `x-smg-routing-key` (SGLang's gateway).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_header: Option<String>,
    /// With several `urls`, a session's turns all go to the replica its
    /// first turn went to; false routes each turn as a request of its own.
    #[serde(skip_serializing_if = "is_true")]
    pub sticky_sessions: bool,
    /// Per-request timeout; a request still running then ends as `timeout`.
    pub timeout: Span,
    /// Stream responses (SSE). Without streaming only E2EL and tokens are measured.
    pub stream: bool,
    /// How long to wait for the server to become ready (health, then one test
    /// request) before the run; "0s" skips the check.
    pub ready_timeout: Span,
    /// How requests pick one of several `urls`.
    pub routing: Routing,
    /// PEM file of extra CA certificates to trust for https:// targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// Accept any TLS certificate (self-signed test servers only).
    pub tls_insecure: bool,
    /// Reuse connections (HTTP keep-alive); false opens a fresh connection per request.
    pub keep_alive: bool,
    /// HTTP version: "auto" (HTTP/2 where an https server offers it by
    /// ALPN, else HTTP/1.1), "1.1", or "2" (h2c with prior knowledge on http).
    pub http: cicada_request::HttpVersion,
    /// Several addresses behind the name: "first" (the first that answers,
    /// RFC 8305 order) or "spread" (new connections take them in turn).
    pub addresses: cicada_request::AddressChoice,
    /// Proxy: "env" (the worker's HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and
    /// NO_PROXY, as curl and aiohttp read them), "none", or
    /// "http://[user:pass@]host[:port]".
    pub proxy: cicada_request::ProxySetting,
    /// Hosts reached directly whatever `proxy` says (NO_PROXY's grammar).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub no_proxy: Vec<String>,
    /// Scrape each replica's Prometheus `/metrics` before, during and after the run.
    pub server_metrics: bool,
    /// The most cicada holds of one response at once: an SSE line or event,
    /// a non-streamed body, the generated text it keeps. More ends the
    /// request as `response_too_large`, so a server cannot exhaust memory.
    pub max_event_size: ByteSize,
}

/// Default of `target.max_event_size` (one definition, the client's too).
pub use cicada_request::DEFAULT_MAX_EVENT_SIZE;
/// Smallest `target.max_event_size` accepted: a real event must fit.
pub const MIN_MAX_EVENT_SIZE: ByteSize = ByteSize(1 << 10);
/// Largest `target.max_event_size` accepted.
pub const MAX_MAX_EVENT_SIZE: ByteSize = ByteSize(4 << 30);

impl Default for Target {
    fn default() -> Self {
        Self {
            backend: Backend::default(),
            base_url: None,
            urls: Vec::new(),
            endpoint: None,
            model: None,
            models: Vec::new(),
            model_assignment: ModelAssignment::Random,
            api_key_env: None,
            headers: BTreeMap::new(),
            session_header: None,
            sticky_sessions: true,
            timeout: Span::secs(600),
            stream: true,
            ready_timeout: Span::secs(600),
            routing: Routing::RoundRobin,
            tls_ca: None,
            tls_insecure: false,
            keep_alive: true,
            http: cicada_request::HttpVersion::Auto,
            addresses: cicada_request::AddressChoice::First,
            proxy: cicada_request::ProxySetting::Env,
            no_proxy: Vec::new(),
            server_metrics: true,
            max_event_size: DEFAULT_MAX_EVENT_SIZE,
        }
    }
}

/// Where the tokenizer comes from and how workers use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizerSpec {
    /// A `tokenizer.json` path, a model directory, or a hub id found in the local HF cache.
    pub source: String,
    /// Check the server's usage count against the tokenizer on every n-th
    /// successful request (0 = never); disagreements over 2 % are reported.
    #[serde(default = "default_verify_every")]
    pub verify_every: u32,
}

fn default_verify_every() -> u32 {
    16
}

/// How fast to send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Load {
    /// Requests in the run (default 1000 unless `duration` is given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_prompts: Option<u64>,
    /// Run length instead of a request count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<Span>,
    /// Mean arrival rate, requests/s, or "inf" to send everything at the start.
    pub request_rate: Rate,
    /// Gamma shape of arrival gaps: 1 = Poisson, < 1 burstier, > 1 more regular.
    #[serde(with = "cicada_plan::units::f64_or_inf")]
    pub burstiness: f64,
    /// Most requests in flight at once across the fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Distinct prompts in the pool, cycled through by the run: 1000 by default
    /// for duration-bound runs; when given, it also caps a count-bound run's
    /// pool (a million-request run need not build a million prompts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_size: Option<u64>,
    /// How often workers report.
    pub report_interval: Span,
    /// Closed loop: simulated users, each sending its next request when the last ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<u32>,
    /// Closed loop: users started per second (default: all at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_rate: Option<f64>,
    /// Closed loop: wait between a response and the user's next request.
    pub think_time: ThinkTime,
    /// Requests sent before measuring starts, reported apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Warmup>,
    /// What happens to requests in flight when a duration-bound run ends.
    pub cooldown: Cooldown,
    /// Open loop: ramp the rate from `start_rps` to `end_rps` over the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp: Option<Ramp>,
}

impl Default for Load {
    fn default() -> Self {
        Self {
            num_prompts: None,
            duration: None,
            request_rate: Rate::Infinite,
            burstiness: 1.0,
            max_concurrency: None,
            pool_size: None,
            report_interval: Span::secs(1),
            users: None,
            spawn_rate: None,
            think_time: ThinkTime::None,
            warmup: None,
            cooldown: Cooldown::Finish,
            ramp: None,
        }
    }
}

/// Requests in a run when neither `num_prompts` nor `duration` is given (vLLM's default).
pub const DEFAULT_NUM_PROMPTS: u64 = 1000;

/// `[pooling]`: what each request of a pooling backend carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Pooling {
    /// Inputs per request (the least, when `batch_size_max` is given).
    pub batch_size: u32,
    /// Draw each request's input count uniformly in `batch_size..=batch_size_max`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size_max: Option<u32>,
    /// `encoding_format` sent with each embeddings request (`float`, `base64`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding_format: Option<String>,
    /// `dimensions` sent with each embeddings request (Matryoshka models).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
}

impl Default for Pooling {
    fn default() -> Self {
        Self {
            batch_size: 1,
            batch_size_max: None,
            encoding_format: None,
            dimensions: None,
        }
    }
}

impl Pooling {
    /// Nothing set beyond the defaults (the section is then not written out).
    pub fn is_unset(&self) -> bool {
        *self == Pooling::default()
    }

    /// The largest input count a request can carry.
    pub fn most(&self) -> u32 {
        self.batch_size_max
            .unwrap_or(self.batch_size)
            .max(self.batch_size)
    }
}

/// Generation parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Sampling {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i64>,
    /// Keep generating past end-of-sequence so outputs have the asked length
    /// (default: on for the random dataset, as `vllm bench serve` does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    /// Minimum tokens to generate (vLLM, SGLang).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u32>,
    /// Extra JSON fields merged into every request body.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_body: BTreeMap<String, serde_json::Value>,
}

/// What and where to write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Output {
    /// Directory for result files.
    pub dir: PathBuf,
    /// Metrics whose percentiles the console prints (vLLM's `--percentile-metrics`).
    pub percentile_metrics: Vec<String>,
    /// Percentiles printed per metric (vLLM's `--metric-percentiles`).
    pub metric_percentiles: Vec<f64>,
    /// File name of the JSON result inside `dir` (vLLM's `--result-filename`).
    pub result_filename: String,
    /// Also write every request's record to `requests.jsonl` (vLLM's `--save-detailed`).
    #[serde(skip_serializing_if = "is_false")]
    pub save_detailed: bool,
    /// Run gate: the highest share of failed requests (0..1) before `cicada run`
    /// exits non-zero (4). Unset, a run exits 4 when more than half of its
    /// requests failed; `1.0` never fails on failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_failure_ratio: Option<f64>,
    /// Write the self-contained `report.html`.
    #[serde(skip_serializing_if = "is_true")]
    pub html: bool,
    /// Write the HdrHistogram interval log (`intervals.hlog`).
    #[serde(skip_serializing_if = "is_true")]
    pub hlog: bool,
}

// defaults are left out when serialising, so adding keys keeps scenario hashes stable
fn is_false(b: &bool) -> bool {
    !*b
}

fn is_true(b: &bool) -> bool {
    *b
}

impl Default for Output {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("results"),
            percentile_metrics: ["ttft", "tpot", "itl", "e2el"].map(str::to_string).to_vec(),
            metric_percentiles: vec![99.0],
            result_filename: "result.json".to_string(),
            save_detailed: false,
            max_failure_ratio: None,
            html: true,
            hlog: true,
        }
    }
}

/// One entry of `[[workloads]]`: its name and share, and what it lays over the scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Names the workload in every output (`workload:<name>` rows); unique.
    pub name: String,
    /// Relative share of the run's requests (> 0; the weights need not sum to 1).
    #[serde(default = "one_weight")]
    pub weight: f64,
    /// Its prompts, instead of the top-level `[dataset]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<Dataset>,
    /// The keys of `[target]` it sets for its requests.
    #[serde(default, skip_serializing_if = "WorkloadTarget::is_unset")]
    pub target: WorkloadTarget,
    /// Its generation parameters, instead of the top-level `[sampling]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// Its service-level objectives, instead of the top-level `[slo]`: its
    /// requests' goodput is judged against these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
}

fn one_weight() -> f64 {
    1.0
}

/// The part of `[target]` a workload may set: what its requests are, not
/// where they go (the replicas, connections and headers are the run's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadTarget {
    /// Model id its requests name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Serving API its requests speak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    /// Path its requests go to (defaults to its backend's usual route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

impl WorkloadTarget {
    /// Nothing set (the table is then not written out).
    pub fn is_unset(&self) -> bool {
        *self == WorkloadTarget::default()
    }
}
