//! Servers that end connections: the built-in mock closing after every
//! response as llama-server does, or after an idle keep-alive timeout as
//! uvicorn does in front of vLLM and SGLang. A connection the server closes
//! must never cost a request, and no request may be sent twice unless it
//! provably never reached the server (real llama-server:
//! `tests/tests/real_llamacpp.rs`). Each runs with both HTTP/1.1 readers.

use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

/// Both HTTP/1.1 readers, by their `CICADA_HTTP1` name.
const READERS: [&str; 2] = ["wire", "hyper"];

fn run(mock: &Mock, backend: &str, load: &str, reader: &str) -> (Run, Value) {
    run_with(mock, backend, "", load, reader)
}

/// [`run`] with more `[target]` keys.
fn run_with(mock: &Mock, backend: &str, target: &str, load: &str, reader: &str) -> (Run, Value) {
    let dir = scratch();
    let text = format!(
        r#"
name = "connections"
seed = 3
[target]
backend = "{backend}"
base_url = "{url}"
model = "cicada-mock"
{target}
[dataset]
input_len = 16
output_len = 8
{load}
[sampling]
ignore_eos = true
"#,
        url = mock.url
    );
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let r = coord_run_env(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[("CICADA_HTTP1", reader)],
        LIMIT,
    );
    assert_ok(&r);
    let j = read_json(&out.join("result.json"));
    (r, j)
}

fn check_all_ok(j: &Value, n: u64, what: &str) -> u64 {
    assert_eq!(
        j["completed"].as_u64(),
        Some(n),
        "{what}: {}",
        j["cicada"]["outcomes"]
    );
    assert_eq!(
        j["failed"].as_u64(),
        Some(0),
        "{what}: {}",
        j["cicada"]["outcomes"]
    );
    // every resend is of a request that never reached the server
    let resends = j["cicada"]["resends"].as_u64().unwrap();
    assert!(resends <= n, "{what}: {resends} resends for {n} requests");
    resends
}

#[test]
fn closing_after_every_response_costs_no_request_on_any_api() {
    let _g = serial();
    for ((backend, api), reader) in [
        ("openai", "openai"),
        ("openai-chat", "openai-chat"),
        ("llamacpp", "llamacpp"),
        ("llamacpp-chat", "llamacpp-chat"),
    ]
    .into_iter()
    .zip(READERS.into_iter().cycle())
    {
        let mock = Mock::start(&[
            "--ttft-ms",
            "5",
            "--itl-ms",
            "1",
            "--api",
            api,
            "--close-after-response",
            "true",
        ]);
        let (_, j) = run(
            &mock,
            backend,
            "[load]\nnum_prompts = 160\nmax_concurrency = 24",
            reader,
        );
        let what = format!("{backend} ({reader})");
        let resends = check_all_ok(&j, 160, &what);
        // every request needed a connection of its own (plus the readiness check's)
        let connections = mock.stats()["connections"].as_u64().unwrap();
        assert!(connections >= 160, "{what}: {connections} connections");
        // the pool learned not to reuse: the server saw each request once
        assert_eq!(mock.stats()["requests"].as_u64(), Some(160), "{what}");
        eprintln!("{what}: 160 of 160, {resends} resends, {connections} connections");
    }
}

#[test]
fn an_idle_timeout_shorter_than_the_think_time_costs_no_request() {
    let _g = serial();
    // one user per worker, thinking 80 ms between requests; the server drops
    // idle connections after 30 ms, so every reuse finds its connection
    // closed (seen before reuse, or as a counted reconnect)
    for reader in READERS {
        let mock = Mock::start(&["--ttft-ms", "3", "--itl-ms", "1", "--idle-timeout-ms", "30"]);
        let (_, j) = run(
            &mock,
            "openai-chat",
            "[load]\nusers = 2\nspawn_rate = 1000\nthink_time = \"80ms\"\nnum_prompts = 96",
            reader,
        );
        let resends = check_all_ok(&j, 96, reader);
        let connections = mock.stats()["connections"].as_u64().unwrap();
        assert!(
            connections >= 96,
            "{reader}: {connections} connections: idle ones were reused?"
        );
        assert_eq!(mock.stats()["requests"].as_u64(), Some(96), "{reader}");
        eprintln!(
            "idle timeout ({reader}): 96 of 96, {resends} resends, {connections} connections"
        );
    }
}

fn counter(j: &Value, name: &str) -> u64 {
    j["cicada"]["counters"][name].as_u64().unwrap_or(0)
}

/// nginx's `keepalive_requests`, played by the mock: every connection ends
/// after three requests, over HTTP/2 with a GOAWAY while the client has
/// more streams on the way, over HTTP/1.1 by closing after the third
/// response. Not one request fails, and the server sees each exactly once:
/// a stream above the GOAWAY's last one was never read, and is the only
/// kind sent again.
#[test]
fn a_server_ending_connections_every_few_requests_costs_no_request() {
    let _g = serial();
    for (http, reader) in [("2", "wire"), ("1.1", "wire"), ("1.1", "hyper")] {
        let mock = Mock::start(&[
            "--ttft-ms",
            "5",
            "--itl-ms",
            "1",
            "--keepalive-requests",
            "3",
        ]);
        let (_, j) = run_with(
            &mock,
            "openai-chat",
            &format!("http = \"{http}\""),
            "[load]\nnum_prompts = 240\nmax_concurrency = 48",
            reader,
        );
        let what = format!("HTTP/{http} ({reader})");
        let resends = check_all_ok(&j, 240, &what);
        assert_eq!(mock.stats()["requests"].as_u64(), Some(240), "{what}");
        let h2 = counter(&j, "requests_http2");
        assert_eq!(h2, if http == "2" { 240 } else { 0 }, "{what}");
        // every resend was of a stream the server provably never read
        assert_eq!(
            resends,
            counter(&j, "resends_goaway")
                + counter(&j, "resends_refused_stream")
                + counter(&j, "resends_unsent")
                + counter(&j, "resends_crossed_close"),
            "{what}"
        );
        // the server ended connections: without it two workers need 2 to 16
        // (HTTP/2 multiplexes); with it about one per 3 requests (HTTP/2
        // takes the streams that cross its GOAWAY, so a few more each: 38
        // to 66 connections seen, as many streams as were in flight when
        // the GOAWAY came; the bound stays twice what no ending would need)
        let connections = mock.stats()["connections"].as_u64().unwrap();
        assert!(
            connections >= 32,
            "{what}: {connections} connections for 240 requests"
        );
        eprintln!(
            "{what}: 240 of 240, {connections} connections, resends {resends} (goaway {})",
            counter(&j, "resends_goaway")
        );
    }
}
/// A server allowing two streams per HTTP/2 connection: streams past its
/// limit are refused (`REFUSED_STREAM`) until the client has read its
/// SETTINGS; they are sent again (never read), nothing fails, and the
/// server sees each request once.
#[test]
fn streams_past_the_servers_limit_are_refused_and_sent_again() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "1", "--h2-max-streams", "2"]);
    let (_, j) = run_with(
        &mock,
        "openai-chat",
        "http = 2",
        "[load]\nnum_prompts = 128\nmax_concurrency = 32",
        "wire",
    );
    let resends = check_all_ok(&j, 128, "h2_max_streams = 2");
    assert_eq!(mock.stats()["requests"].as_u64(), Some(128));
    assert_eq!(counter(&j, "requests_http2"), 128);
    // the mock's most streams at once, over all connections: the client
    // opened enough connections for its 32 users (two workers, 16 each)
    let connections = mock.stats()["connections"].as_u64().unwrap();
    assert!(
        connections >= 16,
        "{connections} connections for 32 streams, 2 each"
    );
    eprintln!(
        "h2_max_streams = 2: 128 of 128, {connections} connections, resends {resends} (refused {})",
        counter(&j, "resends_refused_stream")
    );
}
