//! The server hooks a step ran (`[hooks]`: prefix-cache reset, profiler
//! start and stop), as results report them: `cicada.hooks` in
//! `result.json`, one entry per call, in the order they were made.

use serde::{Deserialize, Serialize};

/// One call of a server hook against one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookCall {
    /// What was asked: `reset_prefix_cache`, `start_profile` or `stop_profile`.
    pub name: String,
    /// The URL POSTed.
    pub url: String,
    /// `before` the step's first request, or `after` its last.
    pub when: String,
    /// The answer's HTTP status (none: no answer came).
    pub status: Option<u16>,
    /// The server did what was asked (2xx, and vLLM's `success` not false).
    pub ok: bool,
    /// From sending the call to its whole answer, ms (retries included).
    pub duration_ms: f64,
    /// When it was sent, Unix seconds.
    pub at_unix: f64,
    /// Why it failed: the transport's error, or the answer's body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HookCall {
    /// One line for the console: `reset_prefix_cache http://h/reset_prefix_cache: 200 in 12 ms`.
    pub fn line(&self) -> String {
        let status = self
            .status
            .map_or_else(|| "no answer".to_string(), |s| s.to_string());
        let mut line = format!(
            "{} ({}) POST {}: {status} in {:.0} ms",
            self.name, self.when, self.url, self.duration_ms
        );
        if let Some(e) = &self.error {
            line.push_str(": ");
            line.push_str(e);
        }
        line
    }
}
