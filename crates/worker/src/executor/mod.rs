//! Executors: turn a worker's stripe of the schedule into requests on the wire.

mod closed_loop;
mod dispatch;
mod entry;
mod gate;
mod open_loop;
mod reasoning;
mod request;
mod route;
mod steering;
mod tokens;

use cicada_metrics::{Concurrency, MetricSet, SLICE_US, Scope};
use cicada_plan::Drive;
use tokio_util::sync::CancellationToken;

use cicada_client::clock::Clock;

// multi-turn conversations (the `conversations` workload)
mod conversation;
pub use conversation::run_conversations;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cicada_plan::Plan;
use cicada_plan::pool::Prompt;
use cicada_plan::schedule::Slot;
use thiserror::Error;
use tokens::Tokenizer;

pub use entry::Entry;
pub use gate::{Gate, GateMessage};
pub use steering::{Course, Steering};

use crate::inflight::ScopeTrackers;
use crate::recorder::Recorder;
use cicada_client::backend::{ApiCodec, SharedBody};
use cicada_client::http::{ApiKey, Client, Endpoint, HeaderSpec, Headers, Settings, SetupError};

/// Why a step could not be prepared.
#[derive(Debug, Error)]
pub enum StepError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error("the plan lists no target URL")]
    NoTarget,
    #[error("the shipped tokenizer cannot be loaded: {0}")]
    Tokenizer(String),
    #[error("the plan's tools / response format cannot be compiled: {0}")]
    Shape(#[from] cicada_request::ShapeError),
    #[error("pool entry {id} points at shape {shape}, and the plan has {count}")]
    NoShape { id: u64, shape: u32, count: usize },
}

/// Everything shared by the requests of one step.
pub struct Step {
    /// The step's plan, its pool moved out into [`Step::pool`].
    pub plan: Plan,
    /// One codec per model name (`target.models`, or the one model).
    codecs: Vec<ApiCodec>,
    pub http: Client,
    pub headers: Headers,
    /// One per target URL, in the plan's order.
    pub endpoints: Vec<Endpoint>,
    /// A mixed run's: each workload's, one per target URL (empty without workloads).
    workload_endpoints: Vec<Vec<Endpoint>>,
    /// The plan's pool entries by id, each ready to send.
    pub pool: HashMap<u64, Entry>,
    /// Each (pool entry, model)'s request body, serialised once before the
    /// start, its prompt text shared with the pool (empty for conversations,
    /// or when what the bodies hold beside the pool would pass
    /// [`PREBUILD_PROMPT_BYTES`]).
    bodies: HashMap<(u64, usize), SharedBody>,
    pub recorder: Arc<Recorder>,
    pub timeout: Duration,
    /// Tokenizer for counting output when the server reports no usage.
    pub tokenizer: Option<Tokenizer>,
    /// Requests in flight per target and model, integrated over time.
    pub in_flight_by_scope: ScopeTrackers,
    /// The fleet-wide `max_concurrency` single requests wait for, if any.
    pub gate: Option<Gate>,
    /// Requests this worker's plan has it send (0: open-ended).
    pub planned: u64,
    /// The load as the web UI's changes leave it.
    pub steering: Steering,
    in_flight: AtomicU64,
}

impl Step {
    /// Prepare a step: HTTP client, headers (API key from this worker's
    /// environment), pool, and the gate of a fleet-wide cap, which tells the
    /// coordinator through `uplink` when other workers share it.
    pub fn new(
        mut plan: Plan,
        recorder_shards: usize,
        uplink: Option<tokio::sync::mpsc::UnboundedSender<GateMessage>>,
    ) -> Result<Self, StepError> {
        if plan.target.urls.is_empty() {
            return Err(StepError::NoTarget);
        }
        // before the pool moves out: a conversation plan counts its turns
        let planned = plan.planned_requests();
        let headers =
            cicada_client::http::headers(HeaderSpec::from(&plan.target), ApiKey::Required)?;
        let http = Client::with(Settings::from(&plan.target))?;
        let endpoints = plan
            .target
            .urls
            .iter()
            .map(|u| http.endpoint(u))
            .collect::<Result<Vec<_>, _>>()
            .map_err(SetupError::from)?;
        let workload_endpoints = plan
            .workloads
            .iter()
            .map(|w| {
                w.target
                    .urls
                    .iter()
                    .map(|u| http.endpoint(u))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(SetupError::from)?;
        let codecs = codecs(&plan);
        let details = plan.details.then_some(crate::details::DetailContext {
            step: plan.step,
            worker: plan.worker_index,
        });
        let recorder = Arc::new(
            Recorder::with_details(recorder_shards, plan.slo, details)
                .with_workload_slos(plan.workloads.iter().map(|w| w.slo).collect()),
        );
        // each shape compiled once, shared by the entries that ask it
        let shapes = std::mem::take(&mut plan.shapes)
            .into_iter()
            .map(|s| cicada_request::Structured::new(s).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        // the pool moves (10,000s of prompts are neither copied nor converted)
        let mut sizes = HashMap::new();
        let pool: HashMap<u64, Entry> = std::mem::take(&mut plan.pool)
            .into_iter()
            .map(|e| Ok((e.id, Entry::new(e, &shapes, &mut sizes)?)))
            .collect::<Result<_, StepError>>()?;
        let owner = |id: u64| {
            plan.workloads
                .iter()
                .position(|w| (w.pool_start..w.pool_start + w.pool_len).contains(&id))
        };
        let bodies = prebuilt_bodies(&codecs, &pool, plan.conversations.is_some(), owner);
        let in_flight_by_scope = ScopeTrackers::new(plan.target.urls.len(), codecs.len());
        let tokenizer = match &plan.tokenizer {
            Some(json) => {
                Some(Tokenizer::from_json(json).map_err(|e| StepError::Tokenizer(e.to_string()))?)
            }
            None => None,
        };
        let gate = plan
            .fleet_cap()
            .map(|(cap, shared)| Gate::new(cap, uplink.filter(|_| shared)));
        Ok(Self {
            gate,
            planned,
            steering: Steering::new(&plan),
            timeout: Duration::from_millis(plan.target.timeout_ms),
            plan,
            codecs,
            http,
            headers,
            endpoints,
            workload_endpoints,
            pool,
            bodies,
            recorder,
            tokenizer,
            in_flight_by_scope,
            in_flight: AtomicU64::new(0),
        })
    }

    /// The request body for `entry` naming `model`: built before the start
    /// when the pool allowed it, so a burst of requests does not serialise
    /// JSON. Either way its prompt text is the pool's, never a copy.
    fn body(&self, entry: &Entry, model: usize) -> Cow<'_, SharedBody> {
        match self.bodies.get(&(entry.id, model)) {
            Some(b) => Cow::Borrowed(b),
            None => Cow::Owned(self.codec(model).shared_body(&entry.ask)),
        }
    }

    /// The codec of `model` (an index into the plan's model names).
    pub fn codec(&self, model: usize) -> &ApiCodec {
        &self.codecs[model.min(self.codecs.len() - 1)]
    }

    /// The model (index) of request `index` of the global run.
    pub fn model_of(&self, index: u64) -> usize {
        self.plan.target.model_of(index, self.plan.seed())
    }

    /// What the request of `slot` sends and where it is counted: its model
    /// (without workloads) or its workload (drawn by the seed and its index
    /// in a mixed run), and the pool entry that goes with it.
    pub fn choice(&self, slot: &Slot) -> Choice {
        match cicada_plan::workloads::entry_of(&self.plan.workloads, slot.index, self.plan.seed()) {
            Some((w, pool_id)) => Choice {
                codec: w,
                pool_id,
                model: 0,
                workload: w as u32,
            },
            None => {
                let model = self.model_of(slot.index);
                Choice {
                    codec: model,
                    pool_id: slot.pool_id,
                    model: model as u32,
                    workload: 0,
                }
            }
        }
    }

    /// The session settings of the workload arrival `slot` picks, when it is
    /// a session workload of a mixed run (the arrival then starts a session).
    pub fn sessions_of(&self, slot: &Slot) -> Option<&cicada_plan::ConversationSettings> {
        let (w, _) =
            cicada_plan::workloads::entry_of(&self.plan.workloads, slot.index, self.plan.seed())?;
        self.plan.workloads.get(w)?.sessions.as_ref()
    }

    /// The endpoint of replica `target` for requests of `codec`: its
    /// workload's route in a mixed run, the plan's otherwise.
    pub fn endpoint(&self, codec: usize, target: usize) -> &Endpoint {
        match self.workload_endpoints.get(codec) {
            Some(eps) if !eps.is_empty() => &eps[target.min(eps.len() - 1)],
            _ => &self.endpoints[target.min(self.endpoints.len() - 1)],
        }
    }

    /// The (model, workload) of a scope whose requests used `codec`.
    fn scope_of_codec(&self, codec: usize) -> (u32, u32) {
        if self.plan.workloads.is_empty() {
            (codec as u32, 0)
        } else {
            (0, codec as u32)
        }
    }

    /// Targets reached through a proxy, as the console and result show them.
    pub fn routes(&self) -> Vec<String> {
        self.endpoints
            .iter()
            .filter_map(|e| {
                self.http
                    .route_of(e)
                    .map(|r| format!("{} via {r}", e.url()))
            })
            .collect()
    }

    /// Requests currently in flight.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Everything recorded since the last call, by scope, with in-flight time up to `now_us`.
    pub fn take_interval(&self, now_us: u64) -> Vec<(Scope, MetricSet)> {
        let mut sets = self.recorder.take();
        for ((target, codec), tracker) in self.in_flight_by_scope.iter() {
            let (model, workload) = self.scope_of_codec(codec);
            let taken = tracker.take(now_us);
            for (warmup, integral) in [(false, taken.measured), (true, taken.warmup)] {
                for (slice, request_us) in integral.iter() {
                    let at = std::time::Duration::from_micros(slice * SLICE_US);
                    let scope = Scope {
                        target: target as u32,
                        model,
                        workload,
                        stage: self.steering.stage_of(at),
                        warmup,
                    };
                    let mut c = Concurrency::default();
                    c.add(slice, request_us);
                    sets.entry(scope).or_default().concurrency.merge(&c);
                }
            }
        }
        sets.into_iter().filter(|(_, s)| !s.is_empty()).collect()
    }
}

/// Bytes a step's prebuilt bodies may hold beside the pool's own prompt
/// texts (which they share): their JSON around the texts, and whole the
/// bodies of token ids, batches, images and escaped texts.
const PREBUILD_PROMPT_BYTES: usize = 64 << 20;

/// One codec per model the plan's requests name, or per workload in a mixed run.
fn codecs(plan: &Plan) -> Vec<ApiCodec> {
    if !plan.workloads.is_empty() {
        return plan
            .workloads
            .iter()
            .map(|w| ApiCodec::for_target(&w.target, &w.sampling))
            .collect();
    }
    let mut target = plan.target.clone();
    let loras = cicada_plan::models::lora_selection(&plan.target.models);
    plan.target
        .model_names()
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            name.clone_into(&mut target.model);
            ApiCodec::for_target(&target, &plan.sampling).with_lora(loras.get(i).copied().flatten())
        })
        .collect()
}

/// Every (pool entry, codec)'s body, unless what they hold beside the
/// pool's texts (which they share) times the models passes
/// [`PREBUILD_PROMPT_BYTES`], or the step runs conversations (whose turns
/// are built as they go; a mixed run's session entries get none either). An
/// entry `owner` gives a codec (a mixed run's workload) gets that codec's
/// body alone.
fn prebuilt_bodies(
    codecs: &[ApiCodec],
    pool: &HashMap<u64, Entry>,
    conversations: bool,
    owner: impl Fn(u64) -> Option<usize>,
) -> HashMap<(u64, usize), SharedBody> {
    // a body shares a plain prompt's text; token ids, batches and rerank
    // lists it holds whole, images base64 (4/3 of their bytes), audio as it is
    let own_bytes: usize = pool
        .values()
        .map(|e| {
            let text = match &e.ask.prompt {
                Prompt::Text(_) | Prompt::Chat(_) => 0,
                other => other.text_bytes(),
            };
            text + e.ask.media.approx_bytes() / 3 * 4 + 256
        })
        .sum();
    if conversations || own_bytes.saturating_mul(codecs.len()) > PREBUILD_PROMPT_BYTES {
        return HashMap::new();
    }
    pool.values()
        .filter(|e| e.conversation.is_none())
        .flat_map(|e| {
            let own = owner(e.id);
            codecs
                .iter()
                .enumerate()
                .filter(move |(m, _)| own.is_none_or(|o| o == *m))
                .map(|(m, codec)| ((e.id, m), codec.shared_body(&e.ask)))
        })
        .collect()
}

/// What one request sends and where it is counted (see [`Step::choice`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// Its codec: its model's, or its workload's in a mixed run.
    pub codec: usize,
    /// The pool entry it sends.
    pub pool_id: u64,
    /// Its scope's model.
    pub model: u32,
    /// Its scope's workload.
    pub workload: u32,
}

/// How a step's dispatching ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ended {
    /// Requests dispatched.
    pub sent: u64,
    /// Requests of the plan due before its time limit that were not sent
    /// when the limit came (the worker was behind its schedule).
    pub not_sent_at_end: u64,
}

impl Ended {
    /// Everything dispatched that was due: `sent` requests, none left over.
    fn all(sent: u64) -> Self {
        Ended {
            sent,
            not_sent_at_end: 0,
        }
    }
}

/// Run the step with the executor its plan asks for.
/// `stop` ends dispatching (in-flight requests finish); `cancel` also aborts
/// in-flight requests, which are counted as cancelled.
pub async fn run(
    step: Arc<Step>,
    clock: Clock,
    stop: CancellationToken,
    cancel: CancellationToken,
) -> Ended {
    if step.plan.conversations.is_some() {
        return Ended::all(run_conversations(step, clock, stop, cancel).await);
    }
    match &step.plan.drive {
        Drive::Open { .. } => open_loop::run(step, clock, stop, cancel).await,
        Drive::Closed(_) => Ended::all(closed_loop::run(step, clock, stop, cancel).await),
    }
}
