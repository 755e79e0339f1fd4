//! Issue 27: Locust's web UI for a cicada run. Real `cicada` with local
//! workers and the embedded mock over loopback: the Locust-compatible API
//! while a run goes, `POST /stop` writing results as Ctrl-C does, the token
//! rule beyond loopback, `cicada web` started by a Locust-only script, and
//! the page in headless Chromium.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cicada_tests::browser::{console_messages, dump_url_for};
use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

fn scenario(name: &str, load: &str) -> String {
    format!(
        r#"
name = "{name}"
seed = 27
[target]
backend = "mock"
[mock]
ttft_ms = 20
itl_ms = 2
[dataset]
kind = "random"
input_len = 16
output_len = 8
[load]
{load}
"#
    )
}

/// One HTTP request with headers and a body; (status, body). `None` when
/// nothing answers (yet).
fn http(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Option<(u16, String)> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime");
    rt.block_on(async {
        let client = reqwest::Client::new();
        let mut req = client.request(method.parse().unwrap(), url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.body(body.to_string()).send().await.ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.text().await.ok()?))
    })
}

fn get(url: &str) -> (u16, String) {
    http("GET", url, &[], "").unwrap_or_else(|| panic!("GET {url}: no answer"))
}

fn post_form(url: &str, body: &str) -> (u16, String) {
    let form = [("content-type", "application/x-www-form-urlencoded")];
    http("POST", url, &form, body).unwrap_or_else(|| panic!("POST {url}: no answer"))
}

/// `cicada <args>` in the background with its output piped.
fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(cicada());
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("starting cicada")
}

/// Poll `/stats/requests` until `ok` holds; the last answer.
fn wait_stats(base: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Value::Null;
    while Instant::now() < deadline {
        if let Some((200, body)) = http("GET", &format!("{base}/stats/requests"), &[], "") {
            last = serde_json::from_str(&body).expect("/stats/requests is JSON");
            if ok(&last) {
                return last;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("/stats/requests never showed {what}; last:\n{last:#}");
}

fn aggregated(stats: &Value) -> &Value {
    stats["stats"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == "Aggregated"))
        .expect("an Aggregated row")
}

fn run_args<'a>(sc: &'a Path, out: &'a Path, addr: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        sc.to_str().unwrap(),
        "--workers",
        "2",
        "--quiet",
        "--output-dir",
        out.to_str().unwrap(),
        "--web",
        addr,
    ]
}

/// While a run goes, `/stats/requests` has Locust's shape and cicada's LLM
/// figures, the CSVs, the report and the downloads are served, a cross-site
/// stop (GET or POST) is refused, and `POST /stop` ends the run with its results written
/// as a first Ctrl-C does (exit 130, partial, stopped by `POST /stop`).
#[test]
fn the_api_follows_a_run_and_stop_writes_its_results() {
    let _g = serial();
    let dir = scratch();
    let sc = write(
        dir.path(),
        "s.toml",
        &scenario("web-api", "duration = \"60s\"\nrequest_rate = 30"),
    );
    let out = dir.path().join("out");
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let child = spawn(&run_args(&sc, &out, &addr), &[]);
    let s = wait_stats(&base, "requests with TTFT", |s| {
        s["state"] == "running"
            && s["cicada"]["latency"]["ttft_ms"]["p50"].is_number()
            && s["cicada"]["points"].as_u64() >= Some(2)
    });
    for key in [
        "stats",
        "errors",
        "total_rps",
        "fail_ratio",
        "current_response_time_percentiles",
        "state",
        "user_count",
        "workers",
        "worker_count",
    ] {
        assert!(s.get(key).is_some(), "no `{key}` in {s:#}");
    }
    assert_eq!(s["worker_count"], 2);
    let agg = aggregated(&s);
    assert!(agg["num_requests"].as_u64() > Some(0), "{agg}");
    assert!(agg["median_response_time"].as_f64() > Some(15.0), "{agg}");
    let ttft = s["cicada"]["latency"]["ttft_ms"]["p50"].as_f64().unwrap();
    assert!(
        (15.0..200.0).contains(&ttft),
        "TTFT p50 {ttft} ms (mock: 20 ms)"
    );
    assert!(s["cicada"]["output_tokens_per_s"].is_number());

    let (code, csv) = get(&format!("{base}/stats/requests/csv"));
    assert_eq!(code, 200);
    assert!(csv.starts_with("Type,Name,Request Count,Failure Count,Median Response Time"));
    assert!(csv.lines().any(|l| l.starts_with(",Aggregated,")), "{csv}");
    let (code, fails) = get(&format!("{base}/stats/failures/csv"));
    assert_eq!(
        (code, fails.lines().next()),
        (
            200,
            Some("Method,Name,Error,Occurrences,First Seen,Last Seen")
        )
    );
    let (code, report) = get(&format!("{base}/stats/report"));
    assert_eq!(code, 200);
    assert!(
        report.contains("<svg class=\"chart"),
        "the report so far has charts"
    );
    let (code, doc) = get(&format!("{base}/result.json"));
    assert_eq!(code, 200);
    let doc: Value = serde_json::from_str(&doc).expect("result.json so far is JSON");
    assert_eq!(doc["cicada"]["scenario"]["name"], "web-api");
    let (code, summary) = get(&format!("{base}/summary.csv"));
    assert_eq!(code, 200);
    assert_eq!(
        summary.lines().count(),
        2,
        "header and the running step: {summary}"
    );
    let (code, hist) = get(&format!("{base}/stats/history?from=1"));
    assert_eq!(code, 200);
    let hist: Value = serde_json::from_str(&hist).unwrap();
    assert_eq!(hist["from"], 1);

    // control routes: never from another site, whatever the method
    let img = [("sec-fetch-site", "cross-site")];
    let refused = http("GET", &format!("{base}/stop"), &img, "").unwrap();
    assert_eq!(refused.0, 403, "{}", refused.1);
    assert_eq!(
        http("PUT", &format!("{base}/stop"), &[], "").unwrap().0,
        405
    );
    let evil = [
        ("origin", "http://evil.example"),
        ("content-type", "text/plain"),
    ];
    let refused = http("POST", &format!("{base}/stop"), &evil, "").unwrap();
    assert_eq!(refused.0, 403, "{}", refused.1);
    assert_eq!(
        wait_stats(&base, "still running", |_| true)["state"],
        "running"
    );

    stop_from_page(&base, child, LIMIT);
    let result = read_json(&out.join("result.json"));
    assert_eq!(
        result["cicada"]["interrupted_by"], "POST /stop",
        "{result:#}"
    );
    assert!(result["completed"].as_u64() > Some(0));
    assert!(out.join("summary.csv").exists());
}

/// Beyond loopback a token is required: no bind without one; with one,
/// a request without it is refused (401), a wrong one forbidden (403), the
/// right one (header, or the cookie `/?token=` sets) served.
#[test]
fn beyond_loopback_every_request_needs_the_token() {
    let _g = serial();
    let dir = scratch();
    let sc = write(
        dir.path(),
        "s.toml",
        &scenario("web-token", "duration = \"60s\"\nrequest_rate = 5"),
    );
    let out = dir.path().join("out");
    let port = free_port();
    let any = format!("0.0.0.0:{port}");
    let refused = coord_run(&run_args(&sc, &out, &any), LIMIT);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("CICADA_WEB_TOKEN"),
        "{}",
        refused.stderr
    );

    let token_file = write(dir.path(), "web-token", "s3cret-27\n");
    let mut args = run_args(&sc, &out, &any);
    args.extend(["--web-token-file", token_file.to_str().unwrap()]);
    let child = spawn(&args, &[]);
    let base = format!("http://127.0.0.1:{port}");
    let bearer = [("authorization", "Bearer s3cret-27")];
    let deadline = Instant::now() + Duration::from_secs(60);
    while http("GET", &format!("{base}/stats/requests"), &bearer, "").map(|r| r.0) != Some(200) {
        assert!(Instant::now() < deadline, "the UI never answered");
        std::thread::sleep(Duration::from_millis(200));
    }
    let stats = format!("{base}/stats/requests");
    assert_eq!(get(&stats).0, 401);
    let wrong = [("authorization", "Bearer s3cret-28")];
    assert_eq!(http("GET", &stats, &wrong, "").unwrap().0, 403);
    assert_eq!(
        http("POST", &format!("{base}/stop"), &[], "").unwrap().0,
        401
    );
    assert_eq!(get(&format!("{base}/")).0, 401);
    let page = get(&format!("{base}/?token=s3cret-27"));
    assert_eq!(page.0, 200);
    let jar = [("cookie", "cicada_web_token=s3cret-27")];
    assert_eq!(http("GET", &stats, &jar, "").unwrap().0, 200);
    let stop = http("POST", &format!("{base}/stop"), &bearer, "").unwrap();
    assert_eq!(stop.0, 200);
    let run = wait_with_limit(child, LIMIT);
    assert_eq!(run.code, Some(130), "{}", run.stderr);
}

/// A script that knows only Locust's routes runs a test: `cicada web`
/// waits with its fleet attached, `POST /swarm` starts the users the form
/// asks for, `/stats/requests` shows them working, `POST /swarm` again
/// changes them (Locust's Edit), `POST /stop` writes
/// the results; the UI stays up until Ctrl-C.
#[test]
fn a_locust_script_runs_a_test_end_to_end() {
    let _g = serial();
    let dir = scratch();
    let sc = write(
        dir.path(),
        "s.toml",
        &scenario("web-swarm", "users = 2\nduration = \"60s\""),
    );
    let out = dir.path().join("out");
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let child = spawn(
        &[
            "web",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--quiet",
            "--output-dir",
            out.to_str().unwrap(),
            "--web",
            &addr,
        ],
        &[],
    );
    let ready = wait_stats(&base, "ready with 2 workers", |s| {
        s["state"] == "ready" && s["worker_count"] == 2
    });
    assert_eq!(
        ready["cicada"]["scenario"]["users"], 2,
        "the form's defaults"
    );
    let bad = post_form(&format!("{base}/swarm"), "user_count=0");
    assert_eq!(bad.0, 400, "{}", bad.1);
    let (code, body) = post_form(&format!("{base}/swarm"), "user_count=6&spawn_rate=100");
    assert_eq!(code, 200, "{body}");
    let started: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(started["success"], true);
    let running = wait_stats(&base, "6 users sending", |s| {
        s["state"] == "running" && aggregated(s)["num_requests"].as_u64() > Some(20)
    });
    assert_eq!(running["user_count"], 6);
    // Locust's Edit is `POST /swarm` again while it runs
    let (code, body) = post_form(&format!("{base}/swarm"), "user_count=3");
    assert_eq!(code, 200, "{body}");
    wait_stats(&base, "3 users after the change", |s| s["user_count"] == 3);
    let (code, _) = post_form(&format!("{base}/stop"), "");
    assert_eq!(code, 200);
    let stopped = wait_stats(&base, "stopped", |s| s["state"] == "stopped");
    assert!(aggregated(&stopped)["num_requests"].as_u64() > Some(20));
    let result = read_json(&out.join("result.json"));
    assert_eq!(
        result["cicada"]["scenario"]["load"]["users"], 6,
        "the form's users ran"
    );
    assert_eq!(result["cicada"]["interrupted_by"], "POST /stop");
    // SAFETY: plain FFI call on our own child
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let run = wait_with_limit(child, LIMIT);
    assert_eq!(run.code, Some(130), "{}", run.stderr);
}

/// The page in headless Chromium against a running fleet: no console
/// messages or script errors, the statistics table and the charts filled,
/// more chart points on a later load; then Stop (the route the page's
/// button posts to) writes the results.
#[test]
fn the_page_loads_in_chromium_and_updates() {
    let _g = serial();
    let dir = scratch();
    let sc = write(
        dir.path(),
        "s.toml",
        &scenario(
            "web-page",
            "duration = \"90s\"\nrequest_rate = 20\n[mock.faults]\nhttp_500 = 0.2",
        ),
    );
    let out = dir.path().join("out");
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let child = spawn(&run_args(&sc, &out, &addr), &[]);
    wait_stats(&base, "two chart points", |s| {
        s["cicada"]["points"].as_u64() >= Some(2)
    });
    let points = |dom: &str| -> u64 {
        dom.split("id=\"status\" data-points=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("the page never updated:\n{dom}"))
    };
    let (first, log) = dump_url_for(&format!("{base}/#charts"), 3000);
    assert!(
        console_messages(&log).is_empty(),
        "console: {:?}",
        console_messages(&log)
    );
    let errors = first
        .split("id=\"errors\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .expect("the error box is in the page");
    assert!(errors.trim().is_empty(), "script errors: {errors}");
    assert!(first.contains("<td class=\"l\">Aggregated</td>"), "{first}");
    assert!(
        first.contains("http_500"),
        "the failures tab lists the class"
    );
    assert_eq!(first.matches("<svg class=\"chart\"").count(), 6);
    assert!(
        first.matches("<path d=\"M").count() >= 6,
        "lines were drawn"
    );
    std::thread::sleep(Duration::from_secs(3));
    let (second, log) = dump_url_for(&format!("{base}/"), 3000);
    assert!(
        console_messages(&log).is_empty(),
        "console: {:?}",
        console_messages(&log)
    );
    assert!(
        points(&second) > points(&first),
        "the charts grew between loads"
    );
    assert_eq!(post_form(&format!("{base}/stop"), "").0, 200);
    let run = wait_with_limit(child, LIMIT);
    assert_eq!(run.code, Some(130), "{}", run.stderr);
    assert!(out.join("result.json").exists() && out.join("report.html").exists());
}
