//! The listener (plain or TLS), the route table and the JSON helpers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::MockConfig;
use crate::clock::{ClockDriver, PreciseClock};
use crate::reply::Shared;
use crate::stats::{LoggedRequest, MockStats, State};

/// Why the mock could not start.
#[derive(Debug, Error)]
pub enum MockError {
    /// The configuration has invalid values.
    #[error("invalid mock configuration: {0}")]
    Config(String),
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The TLS certificate or key could not be used.
    #[error("invalid TLS certificate or key: {0}")]
    Tls(String),
}

/// A running mock server; dropping the handle stops accepting connections.
pub struct MockServer {
    addr: SocketAddr,
    tls: bool,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
    _clock: ClockDriver,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// A PEM certificate chain and private key for serving HTTPS.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

fn tls_acceptor(files: &TlsFiles) -> Result<tokio_rustls::TlsAcceptor, MockError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&files.cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| MockError::Tls(format!("certificate: {e}")))?;
    if certs.is_empty() {
        return Err(MockError::Tls("no certificate in the PEM text".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(&files.key_pem)
        .map_err(|e| MockError::Tls(format!("private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| MockError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| MockError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

impl MockServer {
    /// Bind `addr` (port 0 picks a free port) and serve on the current tokio runtime.
    pub async fn start(config: MockConfig, addr: SocketAddr) -> Result<Self, MockError> {
        Self::start_with(config, addr, None).await
    }

    /// Like [`MockServer::start`], serving HTTPS with the given certificate when `tls` is set.
    pub async fn start_with(
        config: MockConfig,
        addr: SocketAddr,
        tls: Option<TlsFiles>,
    ) -> Result<Self, MockError> {
        let problems = config.problems();
        if !problems.is_empty() {
            let text: Vec<String> = problems.iter().map(|(k, m)| format!("{k}: {m}")).collect();
            return Err(MockError::Config(text.join("; ")));
        }
        let acceptor = tls.as_ref().map(tls_acceptor).transpose()?;
        let listener = listen(addr).map_err(|source| MockError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| MockError::Bind { addr, source })?;
        let model_json: Arc<str> = serde_json::to_string(&config.model)
            .unwrap_or_else(|_| "\"cicada-mock\"".to_string())
            .into();
        let (clock, driver) = PreciseClock::start();
        let shared = Arc::new(Shared {
            config,
            model_json,
            state: Arc::new(State::new()),
            started: Instant::now(),
            clock,
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone(), acceptor));
        tracing::info!(%addr, tls = tls.is_some(), "mock server listening");
        Ok(Self {
            addr,
            tls: tls.is_some(),
            shared,
            accept,
            _clock: driver,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL, e.g. `http://127.0.0.1:8000` (`https://localhost:PORT` with TLS,
    /// the name test certificates are issued for).
    pub fn url(&self) -> String {
        if self.tls {
            format!("https://localhost:{}", self.addr.port())
        } else {
            format!("http://{}", self.addr)
        }
    }

    /// Ground truth so far.
    pub fn stats(&self) -> MockStats {
        self.shared.state.snapshot()
    }

    /// Every request logged so far, in arrival order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.state.log()
    }

    /// The configuration being served.
    pub fn config(&self) -> &MockConfig {
        &self.shared.config
    }
}

/// Connections the kernel may queue before the mock accepts them: thousands
/// of clients connecting at once must not wait for SYN retries (the default
/// 1024 would; the kernel caps it at `net.core.somaxconn`).
const BACKLOG: u32 = 16_384;

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning
                tracing::warn!(error = %e, "mock accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        shared.state.connections.fetch_add(1, Ordering::Relaxed);
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => crate::connection::serve(stream, shared).await,
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(s) => crate::connection::serve(s, shared).await,
                    Err(e) => tracing::debug!(error = %e, "mock TLS handshake failed"),
                },
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FaultRates;

    async fn start(config: MockConfig) -> MockServer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        MockServer::start(config, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap()
    }

    async fn post(url: &str, body: serde_json::Value) -> (u16, String, Duration) {
        let t0 = std::time::Instant::now();
        let resp = reqwest::Client::new()
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, text, t0.elapsed())
    }

    fn events(text: &str) -> Vec<&str> {
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| e.strip_prefix("data: ").unwrap())
            .collect()
    }

    #[tokio::test]
    async fn chat_stream_has_role_content_usage_and_done() {
        let mock = start(MockConfig {
            ttft_ms: 20.0,
            itl_ms: 2.0,
            tokens_per_event: 2,
            ..MockConfig::default()
        })
        .await;
        let (status, text, took) = post(
            &format!("{}/v1/chat/completions", mock.url()),
            serde_json::json!({"model":"x","messages":[{"role":"user","content":"one two three"}],
                "max_completion_tokens": 9, "stream": true, "stream_options": {"include_usage": true}}),
        )
        .await;
        assert_eq!(status, 200);
        let ev = events(&text);
        // role + ceil(9/2)=5 content + usage + [DONE]
        assert_eq!(ev.len(), 8, "{text}");
        assert!(ev[0].contains("\"role\":\"assistant\""));
        assert_eq!(*ev.last().unwrap(), "[DONE]");
        let usage: serde_json::Value = serde_json::from_str(ev[6]).unwrap();
        assert_eq!(usage["usage"]["completion_tokens"], 9);
        assert_eq!(usage["usage"]["prompt_tokens"], 3);
        // 20 ms + 4 gaps of 4 ms
        assert!(took >= Duration::from_millis(36), "{took:?}");
        let stats = mock.stats();
        assert_eq!(stats.requests, 1);
        assert_eq!(stats.completed, 1);
        assert_eq!(stats.output_tokens, 9);
        assert_eq!(stats.lateness.count, 5);
        assert_eq!(mock.requests()[0].max_tokens, Some(9));
    }

    #[tokio::test]
    async fn completions_without_usage_and_non_streaming() {
        let mock = start(MockConfig {
            ttft_ms: 1.0,
            itl_ms: 0.0,
            ..MockConfig::default()
        })
        .await;
        let url = format!("{}/prefix/v1/completions", mock.url());
        let (_, text, _) = post(
            &url,
            serde_json::json!({"prompt":"a b","max_tokens":3,"stream":true}),
        )
        .await;
        let ev = events(&text);
        assert_eq!(ev.len(), 4);
        // vLLM prints every field of a completions chunk: usage is null, never counted
        assert!(!text.contains("\"usage\":{"), "{text}");
        let (status, text, _) =
            post(&url, serde_json::json!({"prompt":"a b","max_tokens":3})).await;
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["usage"]["completion_tokens"], 3);
        assert_eq!(
            v["choices"][0]["text"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count(),
            3
        );
    }

    #[tokio::test]
    async fn faults_are_injected_and_counted() {
        let mock = start(MockConfig {
            ttft_ms: 0.0,
            itl_ms: 0.0,
            faults: FaultRates {
                http_500: 0.5,
                error_event: 0.5,
                ..FaultRates::default()
            },
            ..MockConfig::default()
        })
        .await;
        let url = format!("{}/v1/completions", mock.url());
        let mut errors = 0;
        for _ in 0..40 {
            let (status, text, _) = post(
                &url,
                serde_json::json!({"prompt":"a","max_tokens":4,"stream":true}),
            )
            .await;
            if status == 500 {
                errors += 1;
            } else {
                assert!(text.contains("\"error\""), "{text}");
            }
        }
        let stats = mock.stats();
        assert_eq!(
            stats
                .expected_outcomes
                .get("http_500")
                .copied()
                .unwrap_or(0),
            errors
        );
        assert_eq!(
            stats
                .expected_outcomes
                .get("server_error_event")
                .copied()
                .unwrap_or(0),
            40 - errors
        );
    }

    #[tokio::test]
    async fn health_models_and_bad_input() {
        let mock = start(MockConfig::default()).await;
        let c = reqwest::Client::new();
        assert_eq!(
            c.get(format!("{}/health", mock.url()))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
        let models: serde_json::Value = c
            .get(format!("{}/v1/models", mock.url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(models["data"][0]["id"], "cicada-mock");
        let resp = c
            .post(format!("{}/v1/completions", mock.url()))
            .body("{nope")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        let bad = MockServer::start(
            MockConfig {
                tokens_per_event: 0,
                ..MockConfig::default()
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        assert!(bad.is_err());
    }
}
