//! cicada's `sglang` and `sglang-chat` backends through SGLang's own router
//! (`smg` 0.3.2 from PyPI's `sglang-router`, installed by
//! `scripts/sglang-router.sh`) in front of a real `llama-server`: SGLang's
//! engine does not run without a GPU here, its router does. Streamed and not,
//! the model discovered through the router: every request answered with
//! the asked length, each one counted once by the router's own `/metrics`
//! and taken up once by the server (no retry), the server's token counts
//! (its `/metrics`) equal to the result's, and the SGLang extras the backend
//! sends unasked (`ignore_eos`) reaching the server through the router (its
//! `/slots`).
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test -p cicada-tests --test real_sglang_router`.

use std::path::Path;
use std::time::Duration;

use cicada_tests::servers::LlamaServer;
use cicada_tests::sglang_router::SglangRouter;
use cicada_tests::*;
use serde_json::Value;

const SLOTS: u32 = 4;
const PROMPTS: u64 = 48;
const INPUT: u64 = 32;
const OUTPUT: u64 = 16;

/// The sum of a Prometheus page's samples of `name` whose labels include
/// every one of `labels` (`key="value"`).
fn prom_sum(page: &str, name: &str, labels: &[&str]) -> f64 {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            let ours = (rest.is_empty() || rest.starts_with('{'))
                && labels.iter().all(|want| rest.contains(want));
            ours.then(|| value.trim().parse::<f64>().ok()).flatten()
        })
        .sum()
}

fn page(url: &str) -> String {
    let (status, text) = get_text(&format!("{url}/metrics"));
    assert_eq!(status, 200, "{url}/metrics: {text}");
    text
}

/// One run through the router, no readiness probe (the counts are the
/// run's alone); returns result.json.
fn run(
    router: &SglangRouter,
    server: &LlamaServer,
    backend: &str,
    stream: bool,
    out: &Path,
) -> Value {
    let (n, i, o, c) = (
        PROMPTS.to_string(),
        INPUT.to_string(),
        OUTPUT.to_string(),
        SLOTS.to_string(),
    );
    let s = format!("target.stream={stream}");
    let r = coord_run(
        &[
            "run",
            "--backend",
            backend,
            "--base-url",
            &router.url,
            "--tokenizer",
            server.tokenizer.to_str().unwrap(),
            "--ready-check-timeout-sec",
            "0",
            "--dataset-name",
            "random",
            "--random-input-len",
            &i,
            "--random-output-len",
            &o,
            "--num-prompts",
            &n,
            "--max-concurrency",
            &c,
            "--set",
            &s,
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        Duration::from_secs(600),
    );
    assert_eq!(
        r.code,
        Some(0),
        "{backend} stream={stream}\nstdout:\n{}\nstderr:\n{}\nrouter log:\n{}\nserver log:\n{}",
        r.stdout,
        r.stderr,
        router.log(),
        server.log()
    );
    read_json(&out.join("result.json"))
}

/// `backend` streamed and not through the router, judged by the router's and
/// the server's own records; `endpoint` is the router's label for its route.
fn through_the_router(backend: &str, endpoint: &str) {
    let _g = serial();
    let server = LlamaServer::start(SLOTS, 512);
    let router = SglangRouter::start(&server.url);
    for stream in [true, false] {
        let what = format!("{backend} stream={stream}");
        let requests = |p: &str| {
            let label = format!("endpoint=\"{endpoint}\"");
            prom_sum(p, "smg_router_requests_total", &[&label]) as u64
        };
        let tokens = |p: &str, name: &str| prom_sum(p, name, &[]) as u64;
        let (router_before, server_before) = (page(&router.metrics_url), page(&server.url));
        let tasks_before = server.tasks_started() as u64;
        let out = scratch();
        let j = run(&router, &server, backend, stream, out.path());
        let outcomes = &j["cicada"]["outcomes"];
        assert_eq!(j["completed"], PROMPTS, "{what}: {outcomes}");
        assert_eq!(j["failed"], 0, "{what}: {outcomes}");
        assert_eq!(j["total_output_tokens"], PROMPTS * OUTPUT, "{what}");
        assert_eq!(j["cicada"]["token_sources"]["usage"], PROMPTS, "{what}");
        let (router_after, server_after) = (page(&router.metrics_url), page(&server.url));
        // the router counted each request once, and the server took each up once
        assert_eq!(
            requests(&router_after) - requests(&router_before),
            PROMPTS,
            "{what}: the router's count\n{router_after}"
        );
        assert_eq!(
            server.tasks_started() as u64 - tasks_before,
            PROMPTS,
            "{what}: the server's tasks"
        );
        // the server's own token counts are the result's
        let generated = tokens(&server_after, "llamacpp:tokens_predicted_total")
            - tokens(&server_before, "llamacpp:tokens_predicted_total");
        assert_eq!(generated, PROMPTS * OUTPUT, "{what}");
        let evaluated = tokens(&server_after, "llamacpp:prompt_tokens_total")
            - tokens(&server_before, "llamacpp:prompt_tokens_total");
        let cached = j["cicada"]["counters"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0);
        assert_eq!(
            Some(evaluated + cached),
            j["cicada"]["server_input_tokens"].as_u64(),
            "{what}: {cached} cached"
        );
        // ignore_eos went out unasked and reached the server through the router
        let (status, slots) = get_text(&format!("{}/slots", server.url));
        assert_eq!(status, 200, "{slots}");
        let slots: Value = serde_json::from_str(&slots).unwrap_or(Value::Null);
        let tasks: Vec<&Value> = slots
            .as_array()
            .unwrap_or_else(|| panic!("/slots: {slots}"))
            .iter()
            .filter_map(|slot| slot.get("params"))
            .collect();
        assert_eq!(tasks.len(), SLOTS as usize, "{what}: {slots}");
        for params in tasks {
            assert_eq!(params["ignore_eos"], true, "{what}: {params}");
            assert_eq!(params["n_predict"], OUTPUT, "{what}: {params}");
        }
    }
}

#[test]
fn sglang_through_sglangs_router_matches_the_servers_counts() {
    through_the_router("sglang", "completions");
}

#[test]
fn sglang_chat_through_sglangs_router_matches_the_servers_counts() {
    through_the_router("sglang-chat", "chat");
}
