//! A scenario's resolved target composed into what `cicada-client` is built
//! from: its connection settings, its headers, its API codec.
//!
//! The types themselves are one and the same on both sides
//! (`cicada-request`); what lives here is the assembly, which needs both the
//! plan's `ResolvedTarget` (scenarios) and the client's `Settings`, `Headers`
//! and `ApiCodec`, so it can live in neither. The worker (sending load) and
//! the target crate (readiness, `/metrics` scrapes) both use it. Build once,
//! when a plan or target arrives, never per request.

use cicada_client::backend::ApiCodec;
use cicada_client::http::{self, ApiKey, Client, HeaderSpec, Headers, SetupError};
use cicada_plan::{ResolvedSampling, ResolvedTarget};

/// A client for `target`'s connections, as its settings say.
pub fn client(target: &ResolvedTarget) -> Result<Client, SetupError> {
    Client::with(settings(target))
}

/// How a client connects to `target`.
pub fn settings(target: &ResolvedTarget) -> http::Settings {
    http::Settings {
        max_event: usize::try_from(target.max_event_bytes).unwrap_or(usize::MAX),
        http: target.http,
        addresses: target.addresses,
        proxy: target.proxy.clone(),
        no_proxy: target.no_proxy.clone(),
        ..http::Settings::new(&target.tls, target.keep_alive)
    }
}

/// The headers every request to `target` carries (`key`: whether a missing
/// API key variable is an error).
pub fn headers(target: &ResolvedTarget, key: ApiKey) -> Result<Headers, SetupError> {
    let spec = HeaderSpec {
        fixed: &target.headers,
        api_key_env: target.api_key_env.as_deref(),
        keep_alive: target.keep_alive,
        anthropic: target.api == cicada_plan::WireApi::Messages,
    };
    http::headers(spec, key)
}

/// How to speak `target`'s API with `sampling`.
pub fn codec(target: &ResolvedTarget, sampling: &ResolvedSampling) -> ApiCodec {
    ApiCodec::new(
        target.api,
        target.family,
        target.model.clone(),
        sampling.clone(),
        target.stream,
    )
}
