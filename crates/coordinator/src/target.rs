//! Resolving the scenario's target: start the embedded mock, pick the API and
//! endpoint, and discover the model id when none is given.

use std::time::Duration;

use anyhow::{Context, bail};
use cicada_mock::MockServer;
use cicada_scenarios::Scenario;
use cicada_scenarios::plan::{Api, Flavor, ResolvedTarget};
use cicada_scenarios::scenario::Backend;

/// The resolved target, plus the embedded mock when the scenario asked for one.
pub struct Target {
    pub resolved: ResolvedTarget,
    pub mock: Option<MockServer>,
}

fn api_of(backend: Backend) -> (Api, Flavor) {
    match backend {
        Backend::Openai => (Api::Completions, Flavor::Openai),
        Backend::OpenaiChat => (Api::Chat, Flavor::Openai),
        Backend::Vllm => (Api::Completions, Flavor::Vllm),
        Backend::VllmChat => (Api::Chat, Flavor::Vllm),
        Backend::Sglang => (Api::Completions, Flavor::Sglang),
        Backend::SglangChat => (Api::Chat, Flavor::Sglang),
        Backend::Mock => (Api::Chat, Flavor::Mock),
    }
}

fn default_endpoint(api: Api) -> &'static str {
    match api {
        Api::Completions => "/v1/completions",
        Api::Chat => "/v1/chat/completions",
    }
}

fn join_url(base: &str, endpoint: &str) -> String {
    format!("{}{}", base.trim_end_matches('/'), endpoint)
}

/// Resolve the target, starting the embedded mock if needed (bound to `mock_ip`:
/// loopback for local fleets, every interface when remote workers must reach it).
pub async fn resolve(s: &Scenario, mock_ip: std::net::IpAddr) -> anyhow::Result<Target> {
    let (api, flavor) = api_of(s.target.backend);
    let endpoint = s
        .target
        .endpoint
        .clone()
        .unwrap_or_else(|| default_endpoint(api).to_string());
    let (bases, mock) = if s.target.backend == Backend::Mock {
        let mock = MockServer::start(s.mock.clone(), std::net::SocketAddr::new(mock_ip, 0))
            .await
            .context("starting the embedded mock server")?;
        let url = format!("http://127.0.0.1:{}", mock.addr().port());
        (vec![url], Some(mock))
    } else {
        let bases: Vec<String> = match &s.target.base_url {
            Some(b) => vec![b.clone()],
            None => s.target.urls.clone(),
        };
        (bases, None)
    };
    let model = match (&s.target.model, &mock) {
        (Some(m), _) => m.clone(),
        (None, Some(m)) => m.config().model.clone(),
        (None, None) => discover_model(&bases[0], s).await?,
    };
    Ok(Target {
        resolved: ResolvedTarget {
            api,
            flavor,
            urls: bases.iter().map(|b| join_url(b, &endpoint)).collect(),
            model,
            headers: s.target.headers.clone(),
            api_key_env: s.target.api_key_env.clone(),
            timeout_ms: s.target.timeout.get().as_millis() as u64,
            stream: s.target.stream,
        },
        mock,
    })
}

/// First model id from `/v1/models`, waiting up to `ready_timeout` for the server.
async fn discover_model(base: &str, s: &Scenario) -> anyhow::Result<String> {
    let url = join_url(base, "/v1/models");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .context("building an HTTP client")?;
    let key = s
        .target
        .api_key_env
        .as_ref()
        .and_then(|v| std::env::var(v).ok());
    let deadline = tokio::time::Instant::now() + s.target.ready_timeout.get();
    let mut last_error;
    loop {
        let mut req = http.get(&url);
        if let Some(k) = &key {
            req = req.bearer_auth(k);
        }
        match req.send().await {
            Ok(resp) if resp.status().is_success() => {
                let v: serde_json::Value = resp
                    .json()
                    .await
                    .with_context(|| format!("{url} did not return JSON"))?;
                return v["data"][0]["id"]
                    .as_str()
                    .map(str::to_string)
                    .with_context(|| format!("{url} lists no model; set target.model"));
            }
            Ok(resp) => last_error = format!("HTTP {}", resp.status()),
            Err(e) => last_error = e.to_string(),
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the target is not ready: {url} answered {last_error} for {} (target.ready_timeout); \
                 set target.model to skip model discovery",
                cicada_scenarios::units::Span(s.target.ready_timeout.get())
            );
        }
        tracing::info!(%url, error = %last_error, "waiting for the target to become ready");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
