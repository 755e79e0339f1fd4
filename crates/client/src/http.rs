//! The HTTP client and headers for a target: TLS trust (extra CA, or none for
//! testing), keep-alive or a fresh connection per request, the scenario's
//! headers and the API key from this process's environment. Workers and the
//! coordinator's readiness probe build theirs here, so both talk alike.

use std::time::Duration;

use cicada_scenarios::plan::ResolvedTarget;
use reqwest::header::{AUTHORIZATION, CONNECTION, HeaderMap, HeaderName, HeaderValue};
use thiserror::Error;

/// Why a client for the target could not be set up.
#[derive(Debug, Error)]
pub enum SetupError {
    #[error("the API key variable {0} is not set in this process's environment")]
    MissingApiKey(String),
    #[error("header {name}: {reason}")]
    BadHeader { name: String, reason: String },
    #[error("target.tls_ca holds no usable PEM certificate: {0}")]
    BadCa(String),
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// Whether to require the API key variable to be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiKey {
    /// Missing is an error (workers: every request would be refused).
    Required,
    /// Missing means no `Authorization` header (a probe from another host).
    IfSet,
}

/// Headers for every request: the scenario's, `Authorization: Bearer <key>`
/// (marked sensitive, never logged), and `Connection: close` without keep-alive.
pub fn headers(target: &ResolvedTarget, key: ApiKey) -> Result<HeaderMap, SetupError> {
    let mut headers = HeaderMap::new();
    for (name, value) in &target.headers {
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| SetupError::BadHeader {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        let v = HeaderValue::from_str(value).map_err(|e| SetupError::BadHeader {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        headers.insert(n, v);
    }
    if let Some(var) = &target.api_key_env {
        match std::env::var(var) {
            Ok(k) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {k}")).map_err(|_| {
                    SetupError::BadHeader {
                        name: "Authorization".into(),
                        reason: format!("the value of {var} is not a valid header value"),
                    }
                })?;
                v.set_sensitive(true);
                headers.insert(AUTHORIZATION, v);
            }
            Err(_) if key == ApiKey::IfSet => {}
            Err(_) => return Err(SetupError::MissingApiKey(var.clone())),
        }
    }
    if !target.keep_alive {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(headers)
}

/// A client for the target's connections.
pub fn client(target: &ResolvedTarget) -> Result<reqwest::Client, SetupError> {
    let idle = if target.keep_alive { usize::MAX } else { 0 };
    let mut b = reqwest::Client::builder()
        .pool_max_idle_per_host(idle)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(30));
    if let Some(pem) = &target.tls.ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
            .map_err(|e| SetupError::BadCa(e.to_string()))?;
        if certs.is_empty() {
            return Err(SetupError::BadCa("no certificate found".into()));
        }
        b = b.tls_certs_merge(certs);
    }
    if target.tls.insecure {
        b = b.tls_danger_accept_invalid_certs(true);
    }
    b.build().map_err(|e| SetupError::Client(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_scenarios::plan::{Api, Flavor, Routing, TlsSettings};
    use std::collections::BTreeMap;

    fn target() -> ResolvedTarget {
        ResolvedTarget {
            api: Api::Chat,
            flavor: Flavor::Openai,
            urls: vec!["http://x/v1/chat/completions".into()],
            model: "m".into(),
            headers: BTreeMap::from([("X-A".to_string(), "b".to_string())]),
            api_key_env: Some("CICADA_TEST_HTTP_KEY_UNSET".into()),
            timeout_ms: 1000,
            stream: true,
            routing: Routing::RoundRobin,
            tls: TlsSettings::default(),
            keep_alive: false,
        }
    }

    #[test]
    fn headers_key_and_connection() {
        let t = target();
        assert!(matches!(
            headers(&t, ApiKey::Required),
            Err(SetupError::MissingApiKey(_))
        ));
        let h = headers(&t, ApiKey::IfSet).unwrap();
        assert_eq!(h["x-a"], "b");
        assert_eq!(h[CONNECTION], "close");
        assert!(h.get(AUTHORIZATION).is_none());
        let mut bad = target();
        bad.headers.insert("bad header".into(), "v".into());
        assert!(matches!(
            headers(&bad, ApiKey::IfSet),
            Err(SetupError::BadHeader { .. })
        ));
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        crate::tls::install_crypto_provider();
        let mut t = target();
        t.tls.ca_pem = Some("not a certificate".into());
        assert!(matches!(client(&t), Err(SetupError::BadCa(_))));
        t.tls.ca_pem = None;
        t.tls.insecure = true;
        assert!(client(&t).is_ok());
    }
}
