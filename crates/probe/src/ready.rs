//! Readiness: before a run, wait (up to `target.ready_timeout`) until every
//! replica answers its health route, discover the model id if needed, then
//! send one real test request per replica that must succeed. Servers like a
//! 671B model on TP16 take half an hour to load; this is where that wait goes,
//! not into the measured run. `ready_timeout = "0s"` skips the waiting and
//! the test request (model discovery then gets one attempt).
//!
//! `ready_timeout` bounds the whole check: no single request outlives it,
//! so a server that accepts connections and never answers costs at most
//! that long (not `target.timeout`). A redirect stops the check at once
//! (see [`super::redirect`]).

use std::time::Duration;

use cicada_client::backend::ApiCodec;
use cicada_client::backend::Ask;
use cicada_client::clock::Clock;
use cicada_client::exchange::{Conduit, perform};
use cicada_client::http::{
    ApiKey, Body, Client, Fetched, HeaderSpec, Headers, HttpError, Method, Request, Settings,
    SetupError,
};
use cicada_metrics::Outcome;
use cicada_mock::PROBE_HEADER;
use cicada_plan::pool::PoolEntry;
use cicada_plan::units::Span;
use cicada_plan::{ResolvedSampling, ResolvedTarget, WireApi};
use tokio::time::Instant;

use super::join_url;
use super::redirect;

/// Longest pause between attempts.
const RETRY_EVERY: Duration = Duration::from_secs(2);
/// Timeout of one health or model-list request.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// Why a request got nothing: the readiness deadline came first.
const NO_ANSWER: &str = "no answer before the readiness deadline";

/// Why the target is not ready to be measured: which check failed, where,
/// and why (a caller can tell a redirect from a refusal from a timeout).
#[derive(Debug, thiserror::Error)]
pub enum ReadinessError {
    /// The check's client or headers could not be set up.
    #[error("preparing the readiness check")]
    Setup(#[source] SetupError),
    /// The test request's marker header could not be added.
    #[error("preparing the test request")]
    TestRequest(#[source] SetupError),
    /// A target URL the client cannot use as written.
    #[error("the target URL {url}")]
    Url {
        url: String,
        #[source]
        source: HttpError,
    },
    /// A readiness request was redirected: cicada never follows one.
    #[error("{what}: {detail}")]
    Redirected {
        what: String,
        status: u16,
        /// What the redirect was and what to do instead.
        detail: String,
    },
    /// `target.ready_timeout` passed before the check succeeded.
    #[error(
        "{what}: {why} (gave up after target.ready_timeout = {timeout}; \"0s\" skips the readiness check)"
    )]
    GaveUp {
        what: String,
        why: String,
        timeout: Span,
    },
    /// The target's certificate is not trusted: waiting will not change it.
    #[error(
        "{what}: {url}: {reason} (set target.tls_ca to trust its CA, or tls_insecure for testing)"
    )]
    Untrusted {
        what: String,
        url: String,
        reason: String,
    },
    /// The server refused the request (route, model, key, a sampling field):
    /// waiting will not help.
    #[error("{what}: {why}{hint}")]
    Refused {
        what: String,
        status: u16,
        why: String,
        /// What usually causes such a refusal (may be empty).
        hint: String,
    },
    /// Model discovery got no answer, with waiting disabled.
    #[error("{what}: {why}")]
    NoAnswer { what: String, why: String },
    /// The model list is not JSON.
    #[error("{url} did not return JSON")]
    NotJson {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    /// The model list names no model.
    #[error("{url} lists no model; set target.model")]
    NoModel { url: String },
}

/// One readiness check: a client for the target and the deadline.
pub struct Check {
    http: Client,
    headers: Headers,
    ready_timeout: Duration,
    deadline: Instant,
}

enum Attempt<T> {
    Done(T),
    /// Try again later (not up yet); the text says why.
    Retry(String),
}

/// Why a health or model-list request got no answer (yet): the reason a
/// retry is logged with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NoAnswer(String);

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Check {
    /// A check for `target` that gives up after `ready_timeout` (zero disables waiting).
    pub fn new(target: &ResolvedTarget, ready_timeout: Duration) -> Result<Self, ReadinessError> {
        Ok(Self {
            http: Client::with(Settings::from(target)).map_err(ReadinessError::Setup)?,
            headers: cicada_client::http::headers(HeaderSpec::from(target), ApiKey::IfSet)
                .map_err(ReadinessError::Setup)?,
            ready_timeout,
            deadline: Instant::now() + ready_timeout,
        })
    }

    /// Whether to wait for health and send the test request.
    pub fn enabled(&self) -> bool {
        !self.ready_timeout.is_zero()
    }

    /// `work`, cut off at the readiness deadline when waiting is enabled
    /// (`None`: the deadline came first).
    async fn by_deadline<F: std::future::Future>(&self, work: F) -> Option<F::Output> {
        if !self.enabled() {
            return Some(work.await);
        }
        tokio::time::timeout_at(self.deadline, work).await.ok()
    }

    /// The error for a readiness request to `url` answered with redirect
    /// `status` pointing at `location`: cicada never follows one.
    fn redirected(
        &self,
        what: &str,
        url: &str,
        status: u16,
        location: Option<&str>,
    ) -> ReadinessError {
        ReadinessError::Redirected {
            what: what.to_string(),
            status,
            detail: redirect::explain(url, status, location),
        }
    }

    /// Repeat `attempt` until it is done or the deadline passes.
    async fn until_ready<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T, ReadinessError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Attempt<T>, ReadinessError>>,
    {
        let mut told = false;
        loop {
            let why = match attempt().await? {
                Attempt::Done(v) => return Ok(v),
                Attempt::Retry(why) => why,
            };
            let now = Instant::now();
            if now >= self.deadline {
                return Err(ReadinessError::GaveUp {
                    what: what.to_string(),
                    why,
                    timeout: Span(self.ready_timeout),
                });
            }
            if !told {
                // loading a large model takes minutes: say why nothing happens
                eprintln!(
                    "{what} yet ({why}); waiting up to {} (target.ready_timeout)",
                    Span(whole_seconds(self.deadline - now))
                );
                told = true;
            }
            tracing::info!(%why, "{what}: waiting for the target");
            tokio::time::sleep(RETRY_EVERY.min(self.deadline - now)).await;
        }
    }

    /// One health or model-list request. `Err`: a redirect, which waiting
    /// will not change; `Ok(Err)`: no answer (yet), the text says why.
    async fn get(
        &self,
        what: &str,
        url: &str,
        post: bool,
    ) -> Result<Result<Fetched, NoAnswer>, ReadinessError> {
        let endpoint = match self.http.endpoint(url) {
            Ok(e) => e,
            Err(e) => return Ok(Err(NoAnswer(e.to_string()))),
        };
        let method = if post { Method::Post } else { Method::Get };
        let empty = cicada_client::backend::SharedBody::from(b"{}".to_vec());
        let body = post.then_some(Body {
            parts: empty.parts(),
            content_type: "application/json",
        });
        let request = Request {
            method,
            endpoint: &endpoint,
            headers: &self.headers,
            request_id: None,
            body,
        };
        Ok(
            match self
                .by_deadline(self.http.fetch(request, CHECK_TIMEOUT))
                .await
            {
                None => Err(NoAnswer(NO_ANSWER.to_string())),
                Some(Err(e)) => Err(NoAnswer(e.to_string())),
                Some(Ok(r)) if redirect::is_redirect(r.status) => {
                    return Err(self.redirected(what, url, r.status, r.location.as_deref()));
                }
                Some(Ok(r)) => Ok(r),
            },
        )
    }

    /// Wait until `base` answers its health route (`/health`, or `/v1/models`
    /// where there is none; Triton: `/v2/health/ready`) with a success.
    pub async fn wait_healthy(&self, base: &str, api: WireApi) -> Result<(), ReadinessError> {
        let primary = if api == WireApi::Triton {
            "/v2/health/ready"
        } else {
            "/health"
        };
        let what = format!("the target {base} is not ready");
        self.until_ready(&what, || async {
            let url = join_url(base, primary);
            Ok(match self.get(&what, &url, false).await? {
                Ok(r) if r.ok() => Attempt::Done(()),
                Ok(r) if api != WireApi::Triton && matches!(r.status, 404 | 405) => {
                    let models = join_url(base, "/v1/models");
                    match self.get(&what, &models, false).await? {
                        Ok(r) if r.ok() => Attempt::Done(()),
                        Ok(r) => Attempt::Retry(format!("{models} answered HTTP {}", r.status)),
                        Err(e) => Attempt::Retry(format!("{models}: {e}")),
                    }
                }
                Ok(r) => Attempt::Retry(format!("{url} answered HTTP {}", r.status)),
                // a server that is still loading does not change its certificate
                Err(e) if e.0.to_ascii_lowercase().contains("certificate") => {
                    return Err(ReadinessError::Untrusted {
                        what: what.clone(),
                        url,
                        reason: e.0,
                    });
                }
                Err(e) => Attempt::Retry(format!("{url}: {e}")),
            })
        })
        .await
    }

    /// The first model the server lists: `/v1/models`, TGI's and TEI's
    /// `/info`, or Triton's repository index.
    pub async fn discover_model(&self, base: &str, api: WireApi) -> Result<String, ReadinessError> {
        let tgi_info = matches!(api, WireApi::Tgi | WireApi::TeiEmbed | WireApi::TeiRerank);
        let (route, post) = match api {
            _ if tgi_info => ("/info", false),
            WireApi::Triton => ("/v2/repository/index", true),
            _ => ("/v1/models", false),
        };
        let url = join_url(base, route);
        let what = format!("cannot discover the model id from {url}; set target.model");
        self.until_ready(&what, || async {
            let resp = match self.get(&what, &url, post).await? {
                Ok(r) if r.ok() => r,
                // refused (key, route): waiting will not help
                Ok(r) if (400..500).contains(&r.status) && !matches!(r.status, 408 | 429) => {
                    return Err(ReadinessError::Refused {
                        what: what.clone(),
                        status: r.status,
                        why: format!("HTTP {}", r.status),
                        hint: key_hint(r.status),
                    });
                }
                Ok(r) => return Ok(Attempt::Retry(format!("HTTP {}", r.status))),
                Err(e) if self.enabled() => return Ok(Attempt::Retry(e.0)),
                Err(e) => {
                    return Err(ReadinessError::NoAnswer {
                        what: what.clone(),
                        why: e.0,
                    });
                }
            };
            let v: serde_json::Value =
                serde_json::from_slice(&resp.body).map_err(|source| ReadinessError::NotJson {
                    url: url.clone(),
                    source,
                })?;
            let id = match api {
                _ if tgi_info => v["model_id"].as_str(),
                WireApi::Triton => v
                    .as_array()
                    .and_then(|models| {
                        models
                            .iter()
                            .find(|m| m["state"] == "READY")
                            .or(models.first())
                    })
                    .and_then(|m| m["name"].as_str()),
                _ => v["data"][0]["id"].as_str(),
            };
            match id {
                Some(id) => Ok(Attempt::Done(id.to_string())),
                None => Err(ReadinessError::NoModel { url: url.clone() }),
            }
        })
        .await
    }

    /// Send `entry` once to every replica; each must succeed. Marked with
    /// `X-Cicada-Probe` so servers' logs (and the mock's ground truth) can tell it apart.
    pub async fn probe(
        &self,
        target: &ResolvedTarget,
        sampling: &ResolvedSampling,
        entry: &PoolEntry,
    ) -> Result<(), ReadinessError> {
        let codec = ApiCodec::for_target(target, sampling);
        let ask = Ask {
            prompt: entry.prompt.clone(),
            media: entry.media.clone(),
            output_tokens: entry.output_tokens,
            // the probe asks for text: whether the server can answer at all
            structured: None,
        };
        let headers = self
            .headers
            .with(PROBE_HEADER, "ready")
            .map_err(ReadinessError::TestRequest)?;
        for url in &target.urls {
            let endpoint = self
                .http
                .endpoint(url)
                .map_err(|source| ReadinessError::Url {
                    url: url.clone(),
                    source,
                })?;
            let body = codec.shared_body(&ask);
            let what = format!("the test request to {url} did not succeed");
            self.until_ready(&what, || async {
                let clock = Clock::new(Instant::now());
                let conduit = Conduit {
                    http: &self.http,
                    headers: &headers,
                    codec: &codec,
                    clock: &clock,
                    timeout: Duration::from_millis(target.timeout_ms),
                    keep_text: false,
                    keep_output: false,
                };
                let sent = perform(conduit, &endpoint, "cicada-probe", body.parts());
                let Some(ex) = self.by_deadline(sent).await else {
                    return Ok(Attempt::Retry(NO_ANSWER.to_string()));
                };
                let (outcome, error) = ex.outcome();
                let why = format!("{outcome}: {}", error.unwrap_or_default());
                match outcome {
                    Outcome::Ok => Ok(Attempt::Done(())),
                    Outcome::Http(c) if redirect::is_redirect(c) => {
                        Err(self.redirected(&what, url, c, ex.location.as_deref()))
                    }
                    // the request itself is wrong (route, model, key): waiting will not help
                    Outcome::Http(c) if (400..500).contains(&c) && c != 408 && c != 429 => {
                        Err(ReadinessError::Refused {
                            what: what.clone(),
                            status: c,
                            hint: key_hint(c) + &field_hint(&why, sampling),
                            why,
                        })
                    }
                    _ => Ok(Attempt::Retry(why)),
                }
            })
            .await?;
            tracing::info!(%url, "test request succeeded");
        }
        Ok(())
    }
}

/// `d` rounded up to whole seconds, for a message (`3s`, not `2s 999ms 834us`).
fn whole_seconds(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// A hint for a server that refuses a sampling field cicada sent.
fn field_hint(error: &str, sampling: &ResolvedSampling) -> String {
    if sampling.ignore_eos && error.contains("ignore_eos") {
        " (the server refuses `ignore_eos`, sent because sampling.ignore_eos is on (--ignore-eos): set sampling.ignore_eos = false for this server)".to_string()
    } else if sampling.min_tokens.is_some() && error.contains("min_tokens") {
        " (the server refuses `min_tokens`: remove sampling.min_tokens for this server)".to_string()
    } else {
        String::new()
    }
}

/// A hint for refusals that usually mean a missing or wrong API key.
fn key_hint(status: u16) -> String {
    if matches!(status, 401 | 403) {
        " (check target.api_key_env: the variable must hold the key in the coordinator's and every worker's environment)".to_string()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_said_in_whole_seconds() {
        let d = Duration::from_nanos(2_999_834_553);
        assert_eq!(Span(whole_seconds(d)).to_string(), "3s");
        assert_eq!(
            whole_seconds(Duration::from_secs(40)),
            Duration::from_secs(40)
        );
    }
}
