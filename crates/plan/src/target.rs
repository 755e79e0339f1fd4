//! The server under test with everything decided: its URLs, model, API,
//! headers and connection settings, as every worker reaches it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::models::{ModelAssignment, WeightedModel};
/// What one request is, as the plan carries it to the client.
pub use cicada_request::{
    AddressChoice, HttpVersion, ProxySetting, ResolvedSampling, ServerFamily, TlsSettings, WireApi,
};

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

/// The target with everything decided: URLs, model, API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedTarget {
    pub api: WireApi,
    /// `flavor` on the wire.
    #[serde(rename = "flavor")]
    pub family: ServerFamily,
    /// Full request URLs, one per replica.
    pub urls: Vec<String>,
    /// The model every request names, or the first of `models`.
    pub model: String,
    /// Several models the requests split over (empty: every request names `model`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<WeightedModel>,
    /// How requests pick one of `models`.
    #[serde(default)]
    pub model_assignment: ModelAssignment,
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

impl ResolvedTarget {
    /// The names requests carry, in order: `models`, or the one `model`.
    pub fn model_names(&self) -> Vec<&str> {
        if self.models.is_empty() {
            vec![self.model.as_str()]
        } else {
            self.models.iter().map(|m| m.name.as_str()).collect()
        }
    }

    /// The model (index into [`ResolvedTarget::model_names`]) of request `index`.
    pub fn model_of(&self, index: u64, seed: u64) -> usize {
        crate::models::pick(self.model_assignment, &self.models, index, seed)
    }
}

fn yes() -> bool {
    true
}

fn default_max_event_bytes() -> u64 {
    cicada_request::DEFAULT_MAX_EVENT_SIZE.get()
}
