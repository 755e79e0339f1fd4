//! Where a redirect points. A 3xx during readiness means the target URL is
//! wrong (a missing path prefix, `http` for `https`, a trailing slash), and
//! cicada never follows one: every measured request would pay the detour.
//! The readiness check stops at once and names the `Location`.
//!
//! cicada's own HTTP client keeps no response header beyond the framing and
//! `Content-Type`, so the one request that answered 3xx is sent once more
//! here, with reqwest (redirects not followed), the same method, body,
//! headers and TLS trust, to read its `Location`. It runs only on the way
//! to an error.

use std::time::Duration;

use cicada_client::http::Method;
use cicada_scenarios::plan::{ResolvedTarget, TlsSettings};

/// What is needed to send a readiness request again.
pub struct Replay {
    tls: TlsSettings,
    /// The scenario's headers and the bearer key (when its variable is set).
    headers: Vec<(String, String)>,
}

impl Replay {
    /// The replay settings for `target`: its TLS trust, headers and key.
    pub fn new(target: &ResolvedTarget) -> Self {
        let mut headers: Vec<(String, String)> = target
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(key) = target
            .api_key_env
            .as_ref()
            .and_then(|var| std::env::var(var).ok())
        {
            headers.push(("authorization".into(), format!("Bearer {key}")));
        }
        Self {
            tls: target.tls.clone(),
            headers,
        }
    }

    /// The `Location` that `url` answers with (`None`: no such header),
    /// within `within`; `extra` headers are added to the target's.
    pub async fn location(
        &self,
        (method, url, json): (Method, &str, Option<&[u8]>),
        extra: &[(&str, &str)],
        within: Duration,
    ) -> Result<Option<String>, String> {
        let tls = cicada_client::tls::client_config(&self.tls)?;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(within)
            .tls_backend_preconfigured(tls)
            .build()
            .map_err(|e| e.to_string())?;
        let mut req = match method {
            Method::Post => client.post(url),
            _ => client.get(url),
        };
        for (name, value) in self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .chain(extra.iter().copied())
        {
            req = req.header(name, value);
        }
        if let Some(body) = json {
            req = req
                .header("content-type", "application/json")
                .body(body.to_vec());
        }
        let resp = req.send().await.map_err(|e| e.to_string())?;
        Ok(resp
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()))
    }
}

/// Whether `status` is a redirect.
pub fn is_redirect(status: u16) -> bool {
    (300..400).contains(&status)
}

/// What a redirect tells the user: the status, where it points, what to change.
pub fn explain(url: &str, status: u16, location: Result<Option<String>, String>) -> String {
    let to = match location {
        Ok(Some(l)) => format!("Location: {l}"),
        Ok(None) => "without a Location header".to_string(),
        Err(e) => format!("its Location could not be read: {e}"),
    };
    format!(
        "{url} answered HTTP {status} ({to}); cicada does not follow redirects: \
         point target.base_url (or target.endpoint) where the server redirects"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_names_its_status_and_location() {
        assert!(is_redirect(301) && is_redirect(307) && is_redirect(308));
        assert!(!is_redirect(200) && !is_redirect(404));
        let text = explain("http://h/health", 301, Ok(Some("https://h/health".into())));
        assert!(
            text.contains("HTTP 301 (Location: https://h/health)"),
            "{text}"
        );
        assert!(explain("u", 307, Ok(None)).contains("without a Location header"));
    }
}
