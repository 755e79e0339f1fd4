//! The server hooks of `[hooks]`: calls to every server under test (once per
//! base URL, not per worker) around each step. Before it: empty the prefix
//! cache (vLLM's `POST /reset_prefix_cache`, SGLang's `POST /flush_cache`,
//! or the user's route), then start the profiler (`POST /start_profile`);
//! after it: stop the profiler (`POST /stop_profile`). Each call goes out
//! with the run's own headers, API key, TLS trust and proxy, is recorded
//! ([`HookCall`]), and a failure is an error naming the hook, the URL and
//! what the server said: never skipped in silence.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cicada_client::http::{ApiKey, Body, Client, HeaderSpec, Headers, Method, Request, Settings};
use cicada_results::hooks::HookCall;
use cicada_scenarios::Scenario;
use cicada_scenarios::scenario::{START_PROFILE_ROUTE, STOP_PROFILE_ROUTE};
use tokio::time::Instant;

use crate::{Target, join_url};

/// How often a reset that answered `{"success": false}` is asked again
/// (vLLM refuses while blocks are still held, e.g. by requests still
/// running; it says callers may retry), and how many times in all.
const RESET_RETRY_EVERY: Duration = Duration::from_millis(500);
const RESET_ATTEMPTS: u32 = 10;
/// The longest piece of an answer's body an error quotes.
const BODY_QUOTE: usize = 300;

/// Why a server hook failed or could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// A hook call failed: no answer, a status other than 2xx, or a reset
    /// the server said did not happen.
    #[error("server hook {name} failed at {url}: {why}")]
    Failed {
        name: &'static str,
        url: String,
        why: String,
    },
    /// A client for the target could not be made (headers, API key, TLS).
    #[error("server hooks: cannot set up a client for the target")]
    Setup(#[source] cicada_client::http::SetupError),
}

/// Which side of a step a call is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Before,
    After,
}

impl When {
    fn name(self) -> &'static str {
        match self {
            When::Before => "before",
            When::After => "after",
        }
    }
}

/// The hooks a scenario asks for, ready to call against its servers.
pub struct Hooks {
    http: Client,
    headers: Headers,
    bases: Vec<String>,
    /// The reset route, when a reset is asked.
    reset: Option<String>,
    profile: bool,
    timeout: Duration,
}

impl Hooks {
    /// The scenario's hooks against `target`'s servers; none when it asks
    /// for none.
    pub fn new(s: &Scenario, target: &Target) -> Result<Option<Hooks>, HookError> {
        let spec = &s.hooks;
        if !spec.any() {
            return Ok(None);
        }
        // validation refused a `true` the backend cannot resolve
        let reset = spec.reset_route(s.target.backend).and_then(Result::ok);
        let http = Client::with(Settings::from(&target.resolved)).map_err(HookError::Setup)?;
        let headers =
            cicada_client::http::headers(HeaderSpec::from(&target.resolved), ApiKey::IfSet)
                .map_err(HookError::Setup)?;
        Ok(Some(Hooks {
            http,
            headers,
            bases: target.bases.clone(),
            reset,
            profile: spec.profile,
            timeout: spec.timeout.get(),
        }))
    }

    /// Before a step: reset every server's prefix cache, then start every
    /// server's profiler. Each call is handed to `seen` as it ends and
    /// appended to `calls`. On a failure, profilers this started are
    /// stopped again (best effort, recorded too) before the error returns.
    pub async fn before(
        &self,
        calls: &mut Vec<HookCall>,
        seen: &mut dyn FnMut(&HookCall),
    ) -> Result<(), HookError> {
        if let Some(route) = &self.reset {
            for base in &self.bases {
                let url = join_url(base, route);
                let call = self.reset(&url).await;
                self.keep(call, calls, seen)?;
            }
        }
        if !self.profile {
            return Ok(());
        }
        let mut started = Vec::new();
        for base in &self.bases {
            let url = join_url(base, START_PROFILE_ROUTE);
            let call = self.post("start_profile", &url, When::Before).await;
            if let Err(e) = self.keep(call, calls, seen) {
                for base in started {
                    let url = join_url(base, STOP_PROFILE_ROUTE);
                    let call = self.post("stop_profile", &url, When::After).await;
                    let _ = self.keep(call, calls, seen);
                }
                return Err(e);
            }
            started.push(base);
        }
        Ok(())
    }

    /// After a step: stop every server's profiler (each one, even when an
    /// earlier one failed); the first failure is the error.
    pub async fn after(
        &self,
        calls: &mut Vec<HookCall>,
        seen: &mut dyn FnMut(&HookCall),
    ) -> Result<(), HookError> {
        if !self.profile {
            return Ok(());
        }
        let mut first = None;
        for base in &self.bases {
            let url = join_url(base, STOP_PROFILE_ROUTE);
            let call = self.post("stop_profile", &url, When::After).await;
            if let Err(e) = self.keep(call, calls, seen) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Record `call`, show it, and turn a failed one into its error.
    fn keep(
        &self,
        (call, name): (HookCall, &'static str),
        calls: &mut Vec<HookCall>,
        seen: &mut dyn FnMut(&HookCall),
    ) -> Result<(), HookError> {
        seen(&call);
        let failed = (!call.ok).then(|| HookError::Failed {
            name,
            url: call.url.clone(),
            why: match (call.status, &call.error) {
                (Some(s), Some(e)) => format!("HTTP {s}: {e}"),
                (Some(s), None) => format!("HTTP {s}"),
                (None, Some(e)) => format!("no answer: {e}"),
                (None, None) => "no answer".to_string(),
            },
        });
        calls.push(call);
        failed.map_or(Ok(()), Err)
    }

    /// Reset one server's prefix cache, asking again while it answers
    /// `{"success": false}`.
    async fn reset(&self, url: &str) -> (HookCall, &'static str) {
        let began = Instant::now();
        let mut attempt = 1;
        loop {
            let (mut call, name) = self.post("reset_prefix_cache", url, When::Before).await;
            let refused = call.ok && call.error.is_some();
            if !refused || attempt >= RESET_ATTEMPTS || began.elapsed() >= self.timeout {
                call.ok = call.ok && !refused;
                call.duration_ms = began.elapsed().as_secs_f64() * 1e3;
                if refused {
                    call.error = Some(format!(
                        "{} (asked {attempt} times over {:.1} s)",
                        call.error.unwrap_or_default(),
                        began.elapsed().as_secs_f64()
                    ));
                }
                return (call, name);
            }
            attempt += 1;
            tokio::time::sleep(RESET_RETRY_EVERY).await;
        }
    }

    /// POST `url` once with an empty body; a reset's 2xx whose JSON says
    /// `"success": false` comes back ok with that body as its error (for
    /// [`Hooks::reset`] to ask again).
    async fn post(&self, name: &'static str, url: &str, when: When) -> (HookCall, &'static str) {
        let at_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let began = Instant::now();
        let mut call = HookCall {
            name: name.to_string(),
            url: url.to_string(),
            when: when.name().to_string(),
            status: None,
            ok: false,
            duration_ms: 0.0,
            at_unix,
            error: None,
        };
        let answer = match self.http.endpoint(url) {
            Err(e) => Err(e.to_string()),
            Ok(endpoint) => {
                let request = Request {
                    method: Method::Post,
                    endpoint: &endpoint,
                    headers: &self.headers,
                    request_id: None,
                    body: Some(Body {
                        parts: &[],
                        content_type: "application/json",
                    }),
                };
                self.http
                    .fetch(request, self.timeout)
                    .await
                    .map_err(|e| e.to_string())
            }
        };
        call.duration_ms = began.elapsed().as_secs_f64() * 1e3;
        match answer {
            Err(e) => call.error = Some(e),
            Ok(r) => {
                call.status = Some(r.status);
                call.ok = r.ok();
                let body = r.text();
                if !r.ok() {
                    call.error = Some(quote(&body));
                } else if name == "reset_prefix_cache" && said_no(&body) {
                    call.error = Some(format!("the server answered {}", quote(&body)));
                }
            }
        }
        tracing::info!(hook = name, %url, status = ?call.status, ok = call.ok, "server hook");
        (call, name)
    }
}

/// The answer is JSON with `"success": false` (vLLM's reset that did not happen).
fn said_no(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("success").and_then(serde_json::Value::as_bool))
        == Some(false)
}

/// `body` trimmed to one short line for an error.
fn quote(body: &str) -> String {
    let one: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.is_empty() {
        return "(empty body)".to_string();
    }
    match one.char_indices().nth(BODY_QUOTE) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_that_did_not_happen_is_told_apart() {
        assert!(said_no(r#"{"success": false}"#));
        assert!(!said_no(r#"{"success": true}"#));
        assert!(!said_no("Cache flushed."));
        assert!(!said_no(""));
    }

    #[test]
    fn bodies_are_quoted_on_one_short_line() {
        assert_eq!(quote(""), "(empty body)");
        assert_eq!(
            quote("{\"detail\":\n \"Not Found\"}"),
            "{\"detail\": \"Not Found\"}"
        );
        let long = "x".repeat(1000);
        assert_eq!(quote(&long).chars().count(), BODY_QUOTE + 1);
    }
}
