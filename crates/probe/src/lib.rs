//! The server under test, as the coordinator sees it: the scenario's
//! `[target]` resolved (start the embedded mock, pick the API, server family
//! and endpoint, read the TLS trust file, wait until every replica is ready
//! and discover the model id when none is given), and its Prometheus
//! `/metrics` scraped around each step (`scrape`) and read (`prom`).

use cicada_mock::MockApi;
use cicada_mock::{MockError, MockServer};
use cicada_plan::pool::PoolEntry;
use cicada_plan::{ResolvedTarget, ServerFamily, TlsSettings, WireApi};
use cicada_scenarios::Scenario;
use cicada_scenarios::scenario::Backend;

pub mod hooks;
pub mod prom;
mod ready;
mod redirect;
pub mod scrape;

pub use ready::ReadinessError;

/// Why the target could not be resolved: the scenario's `[target]` names
/// no server, a file it names cannot be read, the embedded mock did not
/// start, or the server was not ready.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The embedded mock server did not start.
    #[error("starting the embedded mock server")]
    Mock(#[source] MockError),
    /// Neither `target.base_url` nor `target.urls` is set.
    #[error("target.base_url or target.urls is required")]
    NoUrl,
    /// `target.tls_ca` cannot be read.
    #[error("target.tls_ca: cannot read {}", path.display())]
    TlsCa {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The server was not ready, or its model could not be discovered.
    #[error(transparent)]
    Ready(#[from] ReadinessError),
}

/// The resolved target, plus the embedded mock when the scenario asked for one.
pub struct Target {
    pub resolved: ResolvedTarget,
    /// Each replica's base URL (with any path prefix), in `resolved.urls` order.
    pub bases: Vec<String>,
    pub mock: Option<MockServer>,
    /// The route every base is joined with (with the model filled in).
    endpoint: String,
    /// Each workload of `[[workloads]]`: its target and its route, as
    /// `resolved` and `endpoint` (empty without workloads).
    workloads: Vec<(ResolvedTarget, String)>,
}

impl Target {
    /// The target as a worker that reached the coordinator at `via` reaches
    /// it: the embedded mock at that address when it is not loopback (a
    /// remote worker cannot reach our loopback, where `resolved` names the
    /// mock); as resolved otherwise, and for every other server.
    pub fn reached_from(&self, via: Option<std::net::IpAddr>) -> ResolvedTarget {
        self.seen_from(&self.resolved, &self.endpoint, via)
    }

    /// Each workload's target as a worker that reached the coordinator at
    /// `via` reaches it (see [`Target::reached_from`]), in `[[workloads]]` order.
    pub fn workloads_reached_from(&self, via: Option<std::net::IpAddr>) -> Vec<ResolvedTarget> {
        self.workloads
            .iter()
            .map(|(t, endpoint)| self.seen_from(t, endpoint, via))
            .collect()
    }

    fn seen_from(
        &self,
        resolved: &ResolvedTarget,
        endpoint: &str,
        via: Option<std::net::IpAddr>,
    ) -> ResolvedTarget {
        let mut t = resolved.clone();
        if let (Some(mock), Some(ip)) = (&self.mock, via)
            && !ip.is_loopback()
        {
            let base = format!(
                "http://{}",
                std::net::SocketAddr::new(ip, mock.addr().port())
            );
            t.urls = vec![join_url(&base, endpoint)];
        }
        t
    }
}

/// A workload's target: the run's, with the API, model and route the
/// workload's own scenario (`own`) names; its model is the run's unless it
/// names one (it is not discovered again).
fn workload_target(
    main: &ResolvedTarget,
    bases: &[String],
    own: &Scenario,
) -> (ResolvedTarget, String) {
    let t = &own.target;
    let (api, family) = api_of(t.backend, own.mock.api);
    let mut w = main.clone();
    w.api = api;
    w.family = family;
    w.stream = t.stream && !t.backend.pools(own.mock.api);
    if let Some(m) = &t.model {
        w.model.clone_from(m);
    }
    let endpoint = t
        .endpoint
        .as_deref()
        .unwrap_or_else(|| default_endpoint(api, w.stream))
        .replace("{model}", &path_segment(&w.model));
    w.urls = bases.iter().map(|b| join_url(b, &endpoint)).collect();
    (w, endpoint)
}

/// The API and server family a backend name stands for (`mock_api` picks
/// how the embedded mock is spoken to).
pub fn api_of(backend: Backend, mock_api: MockApi) -> (WireApi, ServerFamily) {
    match backend {
        Backend::Openai => (WireApi::Completions, ServerFamily::Openai),
        Backend::OpenaiChat => (WireApi::Chat, ServerFamily::Openai),
        Backend::Vllm => (WireApi::Completions, ServerFamily::Vllm),
        Backend::VllmChat => (WireApi::Chat, ServerFamily::Vllm),
        Backend::Sglang => (WireApi::Completions, ServerFamily::Sglang),
        Backend::SglangChat => (WireApi::Chat, ServerFamily::Sglang),
        Backend::Tgi => (WireApi::Tgi, ServerFamily::Tgi),
        Backend::Llamacpp => (WireApi::LlamaCpp, ServerFamily::LlamaCpp),
        Backend::LlamacppChat => (WireApi::Chat, ServerFamily::LlamaCpp),
        Backend::LlamacppCompletions => (WireApi::Completions, ServerFamily::LlamaCpp),
        Backend::Triton => (WireApi::Triton, ServerFamily::Triton),
        Backend::OpenaiAudio => (WireApi::Transcription, ServerFamily::Openai),
        Backend::OpenaiEmbeddings => (WireApi::Embeddings, ServerFamily::Openai),
        Backend::VllmRerank => (WireApi::Rerank, ServerFamily::Vllm),
        Backend::TeiEmbed => (WireApi::TeiEmbed, ServerFamily::Tgi),
        Backend::TeiRerank => (WireApi::TeiRerank, ServerFamily::Tgi),
        Backend::VllmPooling => (WireApi::Pooling, ServerFamily::Vllm),
        Backend::VllmScore => (WireApi::Score, ServerFamily::Vllm),
        Backend::Mock => match mock_api {
            MockApi::OpenaiChat => (WireApi::Chat, ServerFamily::Mock),
            MockApi::Openai => (WireApi::Completions, ServerFamily::Mock),
            MockApi::Tgi => (WireApi::Tgi, ServerFamily::Tgi),
            MockApi::Llamacpp => (WireApi::LlamaCpp, ServerFamily::LlamaCpp),
            MockApi::LlamacppChat => (WireApi::Chat, ServerFamily::LlamaCpp),
            MockApi::LlamacppCompletions => (WireApi::Completions, ServerFamily::LlamaCpp),
            MockApi::Triton => (WireApi::Triton, ServerFamily::Triton),
            MockApi::OpenaiResponses => (WireApi::Responses, ServerFamily::Mock),
            MockApi::AnthropicMessages => (WireApi::Messages, ServerFamily::Mock),
            MockApi::OpenaiEmbeddings => (WireApi::Embeddings, ServerFamily::Mock),
            MockApi::VllmRerank => (WireApi::Rerank, ServerFamily::Mock),
            MockApi::TeiEmbed => (WireApi::TeiEmbed, ServerFamily::Mock),
            MockApi::TeiRerank => (WireApi::TeiRerank, ServerFamily::Mock),
            MockApi::VllmPooling => (WireApi::Pooling, ServerFamily::Mock),
            MockApi::VllmScore => (WireApi::Score, ServerFamily::Mock),
        },
        // plain: `ignore_eos` only when asked (vLLM and llama-server read it on
        // /v1/responses), never on /v1/messages (no server reads it there)
        Backend::OpenaiResponses => (WireApi::Responses, ServerFamily::Openai),
        Backend::AnthropicMessages => (WireApi::Messages, ServerFamily::Openai),
    }
}

/// The route an API is usually served on; `{model}` stands for the model id.
pub fn default_endpoint(api: WireApi, stream: bool) -> &'static str {
    match (api, stream) {
        (WireApi::Completions, _) => "/v1/completions",
        (WireApi::Chat, _) => "/v1/chat/completions",
        (WireApi::Tgi, true) => "/generate_stream",
        (WireApi::Tgi, false) => "/generate",
        (WireApi::LlamaCpp, _) => "/completion",
        (WireApi::Triton, true) => "/v2/models/{model}/generate_stream",
        (WireApi::Triton, false) => "/v2/models/{model}/generate",
        (WireApi::Responses, _) => "/v1/responses",
        (WireApi::Messages, _) => "/v1/messages",
        (WireApi::Transcription, _) => "/v1/audio/transcriptions",
        (WireApi::Embeddings, _) => "/v1/embeddings",
        // vLLM serves `/rerank` too, llama-server `/rerank` and `/reranking`
        (WireApi::Rerank, _) => "/v1/rerank",
        (WireApi::TeiEmbed, _) => "/embed",
        (WireApi::TeiRerank, _) => "/rerank",
        (WireApi::Pooling, _) => "/pooling",
        // vLLM serves `/v1/score` too
        (WireApi::Score, _) => "/score",
    }
}

/// `base` (with any path prefix) joined with `endpoint`.
pub fn join_url(base: &str, endpoint: &str) -> String {
    format!("{}{}", base.trim_end_matches('/'), endpoint)
}

/// A model id made safe for one URL path segment.
fn path_segment(model: &str) -> String {
    let mut out = String::with_capacity(model.len());
    for b in model.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The target as the scenario states it, before any server is reached: no
/// URLs and no model unless the scenario names one.
fn unresolved(s: &Scenario, ca_pem: Option<String>) -> ResolvedTarget {
    let t = &s.target;
    let (api, family) = api_of(t.backend, s.mock.api);
    ResolvedTarget {
        api,
        family,
        urls: Vec::new(),
        model: String::new(),
        models: t.models.clone(),
        model_assignment: t.model_assignment,
        headers: t.headers.clone(),
        api_key_env: t.api_key_env.clone(),
        timeout_ms: t.timeout.get().as_millis() as u64,
        // pooling APIs answer whole
        stream: t.stream && !t.backend.pools(s.mock.api),
        routing: t.routing,
        tls: TlsSettings {
            ca_pem,
            insecure: t.tls_insecure,
        },
        keep_alive: t.keep_alive,
        http: t.http,
        addresses: t.addresses,
        proxy: t.proxy.clone(),
        no_proxy: t.no_proxy.clone(),
        max_event_bytes: t.max_event_size.get(),
    }
}

/// The target a plan would carry, decided without reaching any server or
/// starting the mock (`cicada run --dry-run`): the model the scenario names
/// (else the mock's, else none), the bases joined with the default route.
pub fn offline(s: &Scenario) -> ResolvedTarget {
    let t = &s.target;
    let mut resolved = unresolved(s, None);
    resolved.model = match (t.models.first(), &t.model) {
        (Some(first), _) => first.name.clone(),
        (None, Some(m)) => m.clone(),
        (None, None) if t.backend == Backend::Mock => s.mock.model.clone(),
        (None, None) => String::new(),
    };
    let endpoint = t
        .endpoint
        .as_deref()
        .unwrap_or_else(|| default_endpoint(resolved.api, resolved.stream))
        .replace("{model}", &path_segment(&resolved.model));
    let bases: Vec<String> = match &t.base_url {
        Some(b) => vec![b.clone()],
        None => t.urls.clone(),
    };
    resolved.urls = bases.iter().map(|b| join_url(b, &endpoint)).collect();
    resolved
}

/// Resolve the target, starting the embedded mock if needed (bound to `mock_ip`:
/// loopback for local fleets, every interface when remote workers must reach
/// it), and wait until it is ready (`probe` is the request sent as the readiness test).
pub async fn resolve(
    s: &Scenario,
    mock_ip: std::net::IpAddr,
    probe: Option<&PoolEntry>,
) -> Result<Target, ResolveError> {
    let t = &s.target;
    let (bases, mock) = if t.backend == Backend::Mock {
        let mock = MockServer::start(s.mock.clone(), std::net::SocketAddr::new(mock_ip, 0))
            .await
            .map_err(ResolveError::Mock)?;
        let url = format!("http://127.0.0.1:{}", mock.addr().port());
        (vec![url], Some(mock))
    } else {
        let bases: Vec<String> = match &t.base_url {
            Some(b) => vec![b.clone()],
            None => t.urls.clone(),
        };
        (bases, None)
    };
    if bases.is_empty() {
        return Err(ResolveError::NoUrl);
    }
    let ca_pem = match &t.tls_ca {
        Some(path) => {
            Some(
                std::fs::read_to_string(path).map_err(|source| ResolveError::TlsCa {
                    path: path.clone(),
                    source,
                })?,
            )
        }
        None => None,
    };
    let mut resolved = unresolved(s, ca_pem);
    let api = resolved.api;
    let check = ready::Check::new(&resolved, t.ready_timeout.get())?;
    if check.enabled() {
        for base in &bases {
            check.wait_healthy(base, api).await?;
        }
    }
    resolved.model = match (t.models.first(), &t.model, &mock) {
        (Some(first), _, _) => first.name.clone(),
        (None, Some(m), _) => m.clone(),
        (None, None, Some(m)) => m.config().model.clone(),
        (None, None, None) => check.discover_model(&bases[0], api).await?,
    };
    let endpoint = t
        .endpoint
        .as_deref()
        .unwrap_or_else(|| default_endpoint(api, resolved.stream))
        .replace("{model}", &path_segment(&resolved.model));
    resolved.urls = bases.iter().map(|b| join_url(b, &endpoint)).collect();
    if check.enabled()
        && let Some(entry) = probe
    {
        let sampling = cicada_scenarios::sharding::resolve_sampling(s);
        check.probe(&resolved, &sampling, entry).await?;
    }
    let workloads = s
        .workload_scenarios()
        .iter()
        .map(|own| workload_target(&resolved, &bases, own))
        .collect();
    Ok(Target {
        resolved,
        bases,
        mock,
        endpoint,
        workloads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_has_an_api_and_a_route() {
        for b in Backend::ALL {
            let (api, _) = api_of(b, MockApi::default());
            for stream in [true, false] {
                assert!(default_endpoint(api, stream).starts_with('/'));
            }
        }
        assert_eq!(
            api_of(Backend::Mock, MockApi::Tgi),
            (WireApi::Tgi, ServerFamily::Tgi)
        );
        assert_eq!(default_endpoint(WireApi::Tgi, false), "/generate");
        assert_eq!(
            join_url("http://h:1/prefix/", "/v1/models"),
            "http://h:1/prefix/v1/models"
        );
        assert_eq!(path_segment("org/model v1"), "org%2Fmodel%20v1");
    }

    #[tokio::test]
    async fn remote_workers_reach_the_embedded_mock_where_they_reached_us() {
        let mut s = Scenario::default();
        s.target.backend = Backend::Mock;
        s.target.ready_timeout = cicada_plan::units::Span::secs(0);
        let t = resolve(&s, std::net::Ipv4Addr::LOCALHOST.into(), None)
            .await
            .unwrap();
        let port = t.mock.as_ref().unwrap().addr().port();
        let url = |host: &str| vec![format!("http://{host}:{port}/v1/chat/completions")];
        assert_eq!(t.resolved.urls, url("127.0.0.1"));
        // local workers, and remote ones that came in over loopback
        assert_eq!(t.reached_from(None), t.resolved);
        assert_eq!(t.reached_from(Some([127, 0, 0, 1].into())), t.resolved);
        let far = t.reached_from(Some([10, 0, 0, 7].into()));
        assert_eq!(far.urls, url("10.0.0.7"));
        assert_eq!(far.model, t.resolved.model, "nothing else changes");
        let v6 = t.reached_from(Some("fd00::7".parse().unwrap()));
        assert_eq!(v6.urls, url("[fd00::7]"));
        // any other server is the same for every worker
        s.target.backend = Backend::OpenaiChat;
        s.target.base_url = Some("http://192.0.2.1:8000".into());
        s.target.model = Some("m".into());
        let other = resolve(&s, std::net::Ipv4Addr::LOCALHOST.into(), None)
            .await
            .unwrap();
        assert_eq!(
            other.reached_from(Some([10, 0, 0, 7].into())),
            other.resolved
        );
    }
}
