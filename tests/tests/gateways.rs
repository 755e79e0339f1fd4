//! Smoke tests of the gateways the client tests put in front of a server
//! (`tests/support/gateways.rs`): nginx serves the mock over TLS + HTTP/2
//! and h2c and ends connections after `keepalive_requests`; tinyproxy
//! forwards absolute-form requests and CONNECT tunnels and, with BasicAuth,
//! refuses requests without credentials. The client here is reqwest: these
//! tests check the gateways, not cicada.

use std::io::{Read, Write};
use std::time::Duration;

use cicada_tests::Mock;
use cicada_tests::gateways::{Nginx, NginxOptions, Tinyproxy, TinyproxyOptions};

/// The mock with short delays (these tests read only `/v1/models`).
fn mock() -> Mock {
    Mock::start(&["--ttft-ms", "1", "--itl-ms", "1"])
}

fn runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime")
}

/// A reqwest client trusting nginx's CA and using no proxy unless given one.
fn client(nginx: &Nginx, proxy: Option<reqwest::Proxy>) -> reqwest::ClientBuilder {
    let ca = std::fs::read(&nginx.ca_pem).expect("nginx's CA");
    let ca = reqwest::Certificate::from_pem(&ca).expect("nginx's CA is PEM");
    let b = reqwest::Client::builder()
        .tls_certs_only([ca])
        .timeout(Duration::from_secs(30));
    match proxy {
        Some(p) => b.proxy(p),
        None => b.no_proxy(),
    }
}

/// A `/v1/models` answer without its clock reading (`created`), so answers
/// read at different instants compare equal.
fn models(body: &str) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    for m in v["data"].as_array_mut().into_iter().flatten() {
        m.as_object_mut().map(|o| o.remove("created"));
    }
    v
}

/// Status, HTTP version and body of a GET.
async fn get(c: &reqwest::Client, url: &str) -> (u16, reqwest::Version, String) {
    let resp = c
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e:?}"));
    let (status, version) = (resp.status().as_u16(), resp.version());
    let body = resp
        .text()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e:?}"));
    (status, version, body)
}

#[test]
fn nginx_serves_the_mock_over_tls_with_http2_and_over_h2c() {
    let mock = mock();
    let nginx = Nginx::start(&mock.url, NginxOptions::default());
    let (_, direct) = cicada_tests::get_text(&format!("{}/v1/models", mock.url));
    runtime().block_on(async {
        let tls = client(&nginx, None).build().unwrap();
        let (status, version, body) = get(&tls, &format!("{}/v1/models", nginx.https_url)).await;
        assert_eq!(status, 200, "{body}\n{}", nginx.log());
        assert_eq!(version, reqwest::Version::HTTP_2);
        assert_eq!(models(&body), models(&direct));

        let h2c = client(&nginx, None)
            .http2_prior_knowledge()
            .build()
            .unwrap();
        let (status, version, body) = get(&h2c, &format!("{}/v1/models", nginx.h2c_url)).await;
        assert_eq!(status, 200, "{body}\n{}", nginx.log());
        assert_eq!(version, reqwest::Version::HTTP_2);
        assert_eq!(models(&body), models(&direct));
    });
    let served = nginx.wait_served(2, Duration::from_secs(10));
    let seen: Vec<(u16, &str)> = served
        .iter()
        .map(|s| (s.port, s.protocol.as_str()))
        .collect();
    assert_eq!(
        seen,
        [(nginx.tls_port, "HTTP/2.0"), (nginx.h2c_port, "HTTP/2.0")]
    );
}

#[test]
fn nginx_ends_a_connection_after_keepalive_requests() {
    let mock = mock();
    let options = NginxOptions {
        keepalive_requests: 2,
        ..NginxOptions::default()
    };
    let nginx = Nginx::start(&mock.url, options);
    let url = format!("{}/v1/models", nginx.https_url);
    runtime().block_on(async {
        // HTTP/2: five requests, one after another, on what reqwest keeps open
        let c = client(&nginx, None).build().unwrap();
        for _ in 0..5 {
            let (status, version, body) = get(&c, &url).await;
            assert_eq!((status, version), (200, reqwest::Version::HTTP_2), "{body}");
        }
        // HTTP/1.1: the second response on a connection announces its end
        let c = client(&nginx, None).http1_only().build().unwrap();
        for expect in ["keep-alive", "close"] {
            let resp = c.get(&url).send().await.unwrap();
            assert_eq!(resp.version(), reqwest::Version::HTTP_11);
            let connection = resp.headers().get("connection").cloned();
            assert_eq!(
                connection.as_ref().and_then(|v| v.to_str().ok()),
                Some(expect)
            );
            resp.bytes().await.unwrap();
        }
    });
    let served = nginx.wait_served(7, Duration::from_secs(10));
    let h2: Vec<_> = served.iter().filter(|s| s.protocol == "HTTP/2.0").collect();
    let places: Vec<u64> = h2.iter().map(|s| s.nth).collect();
    assert_eq!(places, [1, 2, 1, 2, 1], "{served:#?}\n{}", nginx.log());
    let mut connections: Vec<u64> = h2.iter().map(|s| s.connection).collect();
    connections.dedup();
    assert_eq!(connections.len(), 3, "{served:#?}");
    assert!(served.iter().all(|s| s.status == 200), "{served:#?}");
}

#[test]
fn tinyproxy_forwards_absolute_form_and_tunnels_connect() {
    let mock = mock();
    let nginx = Nginx::start(&mock.url, NginxOptions::default());
    let proxy = Tinyproxy::start(TinyproxyOptions::default());
    let (_, direct) = cicada_tests::get_text(&format!("{}/v1/models", mock.url));
    runtime().block_on(async {
        // http target: absolute-form to the proxy
        let c = client(&nginx, Some(reqwest::Proxy::http(&proxy.url).unwrap()))
            .build()
            .unwrap();
        let url = format!("{}/v1/models", mock.url);
        let (status, _, body) = get(&c, &url).await;
        assert_eq!(status, 200, "{body}\n{}", proxy.log());
        assert_eq!(models(&body), models(&direct));

        // https target: CONNECT, then TLS and HTTP/2 with nginx inside the tunnel
        let c = client(&nginx, Some(reqwest::Proxy::https(&proxy.url).unwrap()))
            .build()
            .unwrap();
        let (status, version, body) = get(&c, &format!("{}/v1/models", nginx.https_url)).await;
        assert_eq!(status, 200, "{body}\n{}", proxy.log());
        assert_eq!(version, reqwest::Version::HTTP_2);
        assert_eq!(models(&body), models(&direct));
    });
    let log = proxy.log();
    let mock_addr = mock.url.trim_start_matches("http://");
    assert!(
        log.contains(&format!("GET http://{mock_addr}/v1/models")),
        "{log}"
    );
    assert!(
        log.contains(&format!("CONNECT 127.0.0.1:{}", nginx.tls_port)),
        "{log}"
    );
}

/// Send `head` to the proxy on a fresh connection and read its answer's
/// first line (the proxy closes after answering 407).
fn proxy_status_line(proxy: &Tinyproxy, head: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(2).any(|w| w == b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().unwrap_or_default().to_string()
}

#[test]
fn tinyproxy_with_basic_auth_answers_407_without_credentials() {
    let mock = mock();
    let proxy = Tinyproxy::start(TinyproxyOptions {
        basic_auth: Some(("cicada".into(), "s3cret".into())),
    });
    let url = format!("{}/v1/models", mock.url);
    runtime().block_on(async {
        let without = reqwest::Client::builder()
            .proxy(reqwest::Proxy::http(&proxy.url).unwrap())
            .build()
            .unwrap();
        let (status, _, body) = get(&without, &url).await;
        assert_eq!(status, 407, "{body}\n{}", proxy.log());

        let with = reqwest::Client::builder()
            .proxy(reqwest::Proxy::http(proxy.url_with_credentials()).unwrap())
            .build()
            .unwrap();
        let (status, _, body) = get(&with, &url).await;
        assert_eq!(status, 200, "{body}\n{}", proxy.log());
    });
    let addr = mock.url.trim_start_matches("http://");
    let line = proxy_status_line(
        &proxy,
        &format!("CONNECT {addr} HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
    );
    assert!(line.contains(" 407 "), "{line}\n{}", proxy.log());
}
