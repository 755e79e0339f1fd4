//! Serving APIs: how to build a request body and read the response for each.

mod openai;

use std::borrow::Cow;

use cicada_scenarios::dataset::PoolEntry;
use cicada_scenarios::plan::{Api, Flavor, ResolvedSampling};

/// Token counts a server reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
}

/// What one streamed event (or a whole non-streamed body) said.
#[derive(Debug, Default, PartialEq)]
pub struct EventInfo<'a> {
    /// Generated text (content and reasoning), if the event carried any.
    pub content: Option<Cow<'a, str>>,
    /// Usage, if the event carried it (cumulative when continuous).
    pub usage: Option<Usage>,
    /// The server gave a finish reason.
    pub finished: bool,
    /// The `[DONE]` marker.
    pub done: bool,
    /// An in-band error the server reported.
    pub error: Option<String>,
}

/// How to talk to one serving API.
#[derive(Debug, Clone)]
pub struct Backend {
    api: Api,
    flavor: Flavor,
    model: String,
    sampling: ResolvedSampling,
    stream: bool,
}

impl Backend {
    /// A backend for the resolved API, flavor, model and sampling.
    pub fn new(
        api: Api,
        flavor: Flavor,
        model: String,
        sampling: ResolvedSampling,
        stream: bool,
    ) -> Self {
        Self {
            api,
            flavor,
            model,
            sampling,
            stream,
        }
    }

    /// Whether responses stream.
    pub fn streams(&self) -> bool {
        self.stream
    }

    /// JSON body for one pool entry.
    pub fn body(&self, entry: &PoolEntry) -> Vec<u8> {
        openai::body(self, entry)
    }

    /// Interpret one SSE data payload. `Err` means the payload is not the API's format.
    pub fn parse_event<'a>(&self, data: &'a [u8]) -> Result<EventInfo<'a>, String> {
        openai::parse_event(self.api, data)
    }

    /// Interpret a complete non-streamed response body.
    pub fn parse_full<'a>(&self, body: &'a [u8]) -> Result<EventInfo<'a>, String> {
        openai::parse_full(self.api, body)
    }
}
