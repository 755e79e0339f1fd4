//! A plan's resolved target as this crate's own terms: the connection
//! settings, the headers and the API codec a client is built from. Built
//! once when a plan or target arrives, never per request; the worker (load)
//! and the coordinator's target crate (readiness, `/metrics` scrapes) both
//! build their clients so, and so talk alike.

use cicada_plan::{ResolvedSampling, ResolvedTarget, WireApi};

use crate::backend::ApiCodec;
use crate::http::{HeaderSpec, Settings};

impl From<&ResolvedTarget> for Settings {
    /// How a client connects to the target.
    fn from(target: &ResolvedTarget) -> Self {
        Settings {
            max_event: usize::try_from(target.max_event_bytes).unwrap_or(usize::MAX),
            http: target.http,
            addresses: target.addresses,
            proxy: target.proxy.clone(),
            no_proxy: target.no_proxy.clone(),
            ..Settings::new(&target.tls, target.keep_alive)
        }
    }
}

impl<'a> From<&'a ResolvedTarget> for HeaderSpec<'a> {
    /// What every request to the target carries in its headers.
    fn from(target: &'a ResolvedTarget) -> Self {
        HeaderSpec {
            fixed: &target.headers,
            api_key_env: target.api_key_env.as_deref(),
            keep_alive: target.keep_alive,
            anthropic: target.api == WireApi::Messages,
        }
    }
}

impl ApiCodec {
    /// How to speak the target's API with `sampling`.
    pub fn for_target(target: &ResolvedTarget, sampling: &ResolvedSampling) -> Self {
        ApiCodec::new(
            target.api,
            target.family,
            target.model.clone(),
            sampling.clone(),
            target.stream,
        )
    }
}
