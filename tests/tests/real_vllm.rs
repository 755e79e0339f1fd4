//! cicada against a real vLLM server (vLLM's CPU build with a tiny
//! random-weight model; installed by `scripts/vllm-server.sh` on first use,
//! started once for this file: about a minute). Every OpenAI-compatible
//! backend, streamed and not; a concurrency sweep; the server-side block read
//! from vLLM's real `/metrics`; and `vllm bench serve` (from the same venv)
//! beside cicada on the same server with the same settings: where the two
//! define a figure alike, they agree.
//!
//! Run alone: `cargo test -p cicada-tests --test real_vllm`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use cicada_tests::gateways::{Nginx, NginxOptions, UpstreamKeepAlive};
use cicada_tests::servers::{CLIENT_CORE, VllmServer, coord_run_pinned, pin};
use cicada_tests::*;
use serde_json::Value;

// the README's flags, as issue reports ran them: 160 prompts of 48 tokens,
// 24 out, at concurrency 24
const INPUT: u64 = 48;
const OUTPUT: u64 = 24;
const PROMPTS: u64 = 160;

/// `cicada run` with `vllm bench serve`'s flags, on the clients' core; returns stdout.
fn cicada(backend: &str, prompts: u64, concurrency: u32, extra: &[&str], out: &Path) -> String {
    cicada_at(
        &VllmServer::shared().url,
        backend,
        prompts,
        concurrency,
        extra,
        out,
    )
}

/// [`cicada`] against `base_url` (a gateway in front of the server).
fn cicada_at(
    base_url: &str,
    backend: &str,
    prompts: u64,
    concurrency: u32,
    extra: &[&str],
    out: &Path,
) -> String {
    let v = VllmServer::shared();
    let (n, c, i, o) = (
        prompts.to_string(),
        concurrency.to_string(),
        INPUT.to_string(),
        OUTPUT.to_string(),
    );
    let mut args = vec![
        "run",
        "--backend",
        backend,
        "--base-url",
        base_url,
        "--model",
        &v.name,
        "--tokenizer",
        v.model.to_str().unwrap(),
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
        "--seed",
        "1",
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
    ];
    // /v1/messages carries no ignore_eos: vLLM drops it there (cicada refuses to ask)
    if backend != "anthropic-messages" {
        args.push("--ignore-eos");
    }
    args.extend_from_slice(extra);
    let r = coord_run_pinned(&args, Duration::from_secs(900));
    assert_eq!(
        r.code,
        Some(0),
        "{backend} {extra:?}\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    r.stdout
}

/// One run (no sweep); returns result.json and stdout.
fn run(
    backend: &str,
    prompts: u64,
    concurrency: u32,
    extra: &[&str],
    out: &Path,
) -> (Value, String) {
    let stdout = cicada(backend, prompts, concurrency, extra, out);
    (read_json(&out.join("result.json")), stdout)
}

/// Every request completed with exactly the asked length.
fn check_complete(j: &Value, prompts: u64, what: &str) {
    assert_eq!(
        j["completed"], prompts,
        "{what}: {}",
        j["cicada"]["outcomes"]
    );
    assert_eq!(j["failed"], 0, "{what}: {}", j["cicada"]["outcomes"]);
    assert_eq!(j["total_output_tokens"], prompts * OUTPUT, "{what}");
    assert_eq!(
        j["cicada"]["counters"]["short_outputs"]
            .as_u64()
            .unwrap_or(0),
        0,
        "{what}"
    );
    // the client's count: each prompt's own tokens (the tokenizer adds <s>)
    assert_eq!(
        j["cicada"]["client_input_tokens"],
        prompts * (INPUT - 1),
        "{what}"
    );
    // vllm bench serve's total: the server's usage.prompt_tokens
    assert_eq!(
        j["total_input_tokens"], j["cicada"]["server_input_tokens"],
        "{what}"
    );
}

#[test]
fn every_backend_completes_every_request_streamed_and_not() {
    let _g = serial();
    let mut seen = Vec::new();
    for backend in ["openai", "openai-chat", "vllm", "vllm-chat"] {
        for stream in [true, false] {
            let out = scratch();
            let s = format!("target.stream={stream}");
            let (j, _) = run(backend, PROMPTS, 24, &["--set", &s], out.path());
            let what = format!("{backend} stream={stream}");
            check_complete(&j, PROMPTS, &what);
            seen.push(format!(
                "{what}: {} resends",
                j["cicada"]["resends"].as_u64().unwrap()
            ));
        }
    }
    eprintln!("{}", seen.join("\n"));
}

/// `--prompt-token-ids` (vllm-bench's flag): prompts go as id arrays, and
/// vLLM's own `usage.prompt_tokens` equals the drawn length exactly for
/// every request (lengths drawn ±50 %, after a shared 8-token prefix),
/// streamed and not; vLLM adds no BOS to an id prompt, so the record's input
/// count is the server's.
#[test]
fn token_id_prompts_are_counted_exactly_by_vllm() {
    let _g = serial();
    for stream in [true, false] {
        let out = scratch();
        let s = format!("target.stream={stream}");
        let extra = [
            "--prompt-token-ids",
            "--random-range-ratio",
            "0.5",
            "--random-prefix-len",
            "8",
            "--save-detailed",
            "--set",
            &s,
        ];
        let (j, _) = run("vllm", 64, 16, &extra, out.path());
        let what = format!("token ids, stream={stream}");
        assert_eq!(j["completed"], 64, "{what}: {}", j["cicada"]["outcomes"]);
        assert_eq!(j["failed"], 0, "{what}");
        let text = std::fs::read_to_string(out.path().join("requests.jsonl")).unwrap();
        let records: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v.get("index").is_some())
            .collect();
        assert_eq!(records.len(), 64, "{what}");
        let mut lengths = std::collections::BTreeSet::new();
        for r in &records {
            let drawn = r["input_tokens"].as_u64().unwrap();
            assert_eq!(
                r["server_input_tokens"].as_u64(),
                Some(drawn),
                "{what}: request {} drew {drawn} tokens",
                r["index"]
            );
            // INPUT ±50 % after the 8-token prefix
            assert!(
                (8 + INPUT / 2..=8 + INPUT * 3 / 2).contains(&drawn),
                "{what}: {drawn}"
            );
            lengths.insert(drawn);
        }
        assert!(lengths.len() > 5, "{what}: lengths are drawn: {lengths:?}");
        assert_eq!(
            j["total_input_tokens"], j["cicada"]["client_input_tokens"],
            "{what}"
        );
    }
}

/// The Responses and Messages routes, streamed and not: nothing fails, and
/// the token counts are the server's own (its `/metrics` agree). Responses
/// takes `ignore_eos`, so every output has the asked length; vLLM's Messages
/// route has no way to ask, so outputs may end early at the model's EOS, and
/// the tiny model (about a hundred tokens) sometimes picks EOS first: an
/// answer with no text, which cicada, like vLLM's bench, counts as failed
/// (class `empty`). Those are the only failures allowed there, and a run
/// that has them checks the server's totals as bounds (vLLM's totals count
/// successful requests only; the server counted the empty ones too).
#[test]
fn responses_and_messages_complete_every_request_streamed_and_not() {
    let _g = serial();
    const N: u64 = 64;
    let mut seen = Vec::new();
    for backend in ["openai-responses", "anthropic-messages"] {
        for stream in [true, false] {
            let out = scratch();
            let s = format!("target.stream={stream}");
            let (j, _) = run(backend, N, 8, &["--set", &s], out.path());
            let what = format!("{backend} stream={stream}");
            let short = j["cicada"]["counters"]["short_outputs"]
                .as_u64()
                .unwrap_or(0);
            let empty = j["cicada"]["outcomes"]["empty"]["count"]
                .as_u64()
                .unwrap_or(0);
            if backend == "openai-responses" {
                check_complete(&j, N, &what);
            } else {
                let completed = j["completed"].as_u64().unwrap();
                assert_eq!(completed + empty, N, "{what}: {}", j["cicada"]["outcomes"]);
                assert_eq!(j["failed"], empty, "{what}: {}", j["cicada"]["outcomes"]);
                let out_tokens = j["total_output_tokens"].as_u64().unwrap();
                assert!(out_tokens <= N * OUTPUT, "{what}: {out_tokens}");
                assert_eq!(
                    j["total_input_tokens"], j["cicada"]["server_input_tokens"],
                    "{what}: every message_start carried the prompt count"
                );
            }
            let completed = N - empty;
            assert_eq!(j["cicada"]["token_sources"]["usage"], completed, "{what}");
            let srv = &j["cicada"]["server"];
            let n = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
            assert_eq!(n(&srv["requests_finished"]), N as f64, "{what}: {srv}");
            let pairs = [
                ("generation_tokens", n(&j["total_output_tokens"])),
                ("prompt_tokens", n(&j["cicada"]["server_input_tokens"])),
            ];
            for (name, ours) in pairs {
                let theirs = n(&srv[name]);
                if empty == 0 {
                    assert_eq!(theirs, ours, "{what}: {name}: {srv}");
                } else {
                    assert!(theirs >= ours, "{what}: {name}: {srv}");
                }
            }
            seen.push(format!(
                "{what}: {} output tokens, {short} short outputs",
                j["total_output_tokens"]
            ));
        }
    }
    eprintln!("{}", seen.join("\n"));
}

#[test]
fn a_concurrency_sweep_writes_a_row_and_a_result_per_stage() {
    let _g = serial();
    let out = scratch();
    cicada(
        "vllm-chat",
        48,
        1,
        &["--set", "sweep.max_concurrency=[1, 4, 16]"],
        out.path(),
    );
    let (header, rows) = read_csv(&out.path().join("summary.csv"));
    let conc = header.iter().position(|h| h == "max_concurrency").unwrap();
    let done = header.iter().position(|h| h == "completed").unwrap();
    let caps: Vec<&str> = rows.iter().map(|r| r[conc].as_str()).collect();
    assert_eq!(caps, ["1", "4", "16"]);
    for (stage, row) in rows.iter().enumerate() {
        assert_eq!(row[done], "48", "stage {}", stage + 1);
        let j = read_json(&out.path().join(format!("result-stage{}.json", stage + 1)));
        check_complete(&j, 48, &format!("stage {}", stage + 1));
    }
}

#[test]
fn the_server_side_block_is_read_from_its_real_metrics() {
    let _g = serial();
    let out = scratch();
    let (j, stdout) = run("vllm-chat", 64, 8, &[], out.path());
    check_complete(&j, 64, "vllm-chat");
    let s = &j["cicada"]["server"];
    assert_eq!(s["source"], "vllm", "{s}");
    let n = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    // exactly the measured requests: the readiness request came before the first scrape
    assert_eq!(n(&s["requests_finished"]), 64.0, "{s}");
    assert_eq!(
        n(&s["generation_tokens"]),
        n(&j["total_output_tokens"]),
        "{s}"
    );
    assert_eq!(
        n(&s["prompt_tokens"]),
        n(&j["cicada"]["server_input_tokens"]),
        "{s}"
    );
    assert_eq!(n(&s["ttft"]["count"]), 64.0, "{s}");
    assert!(s["ttft"]["mean_ms"].as_f64().unwrap() > 0.0, "{s}");
    assert!(stdout.contains("Server-side (vllm /metrics)"), "{stdout}");
    // the server's own TPOT beside the client's, and percentiles as buckets
    let tpot = &s["tpot"];
    assert_eq!(n(&tpot["count"]), 64.0, "{s}");
    assert!(n(&tpot["mean_ms"]) > 0.0, "{s}");
    assert!(tpot["p50_ms"]["at_most"].is_number(), "{s}");
    assert!(
        stdout.contains("Client vs Server (vllm /metrics)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Mean TPOT client - server (ms):"),
        "{stdout}"
    );
    eprintln!(
        "vllm-chat at concurrency 8: client TTFT {:.2} ms vs server {:.2} ms; client TPOT {:.3} ms vs server {:.3} ms",
        n(&j["mean_ttft_ms"]),
        n(&s["ttft"]["mean_ms"]),
        n(&j["mean_tpot_ms"]),
        n(&tpot["mean_ms"])
    );
}

/// `vllm bench serve` with the same settings as cicada's flags; its saved result.
fn vllm_bench(prompts: u64, out: &Path) -> Value {
    let v = VllmServer::shared();
    let mut cmd = Command::new(&v.vllm);
    pin(&mut cmd, CLIENT_CORE);
    let status = cmd
        .args(["bench", "serve", "--backend", "openai-chat"])
        .args(["--base-url", &v.url, "--endpoint", "/v1/chat/completions"])
        .args(["--model", &v.name, "--tokenizer"])
        .arg(&v.model)
        .args(["--dataset-name", "random"])
        .args(["--random-input-len", &INPUT.to_string()])
        .args(["--random-output-len", &OUTPUT.to_string()])
        .args(["--num-prompts", &prompts.to_string()])
        .args(["--max-concurrency", "1", "--ignore-eos", "--seed", "1"])
        .args(["--percentile-metrics", "ttft,tpot,itl,e2el"])
        .args(["--save-result", "--result-dir"])
        .arg(out)
        .args(["--result-filename", "vllm.json"])
        .envs(v.env.iter().map(|(k, val)| (k.as_str(), val.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .expect("running vllm bench serve");
    assert!(status.success(), "vllm bench serve failed: {status}");
    read_json(&out.join("vllm.json"))
}

/// The server's own (sum in seconds, count) of the first of `names` it
/// exports, summed over its label sets.
fn server_histogram(text: &str, names: &[&str]) -> (f64, f64) {
    let total = |name: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    names
        .iter()
        .map(|n| (total(&format!("{n}_sum")), total(&format!("{n}_count"))))
        .find(|(_, count)| *count > 0.0)
        .unwrap_or((0.0, 0.0))
}

/// The server's own TTFT and per-request TPOT histograms (sum, count) now.
fn server_timing() -> [(f64, f64); 2] {
    let (status, text) = get_text(&format!("{}/metrics", VllmServer::shared().url));
    assert_eq!(status, 200, "vLLM /metrics");
    [
        server_histogram(&text, &["vllm:time_to_first_token_seconds"]),
        server_histogram(
            &text,
            &[
                "vllm:request_time_per_output_token_seconds",
                "vllm:time_per_output_token_seconds",
            ],
        ),
    ]
}

/// One client run, with the server's own mean TTFT and mean TPOT (ms) over
/// exactly that run.
fn with_server_timing(run: impl FnOnce() -> Value) -> (Value, [f64; 2]) {
    let before = server_timing();
    let j = run();
    let after = server_timing();
    let mean = |i: usize| {
        let n = after[i].1 - before[i].1;
        assert!(n > 0.0, "the server counted nothing during the run");
        (after[i].0 - before[i].0) / n * 1e3
    };
    (j, [mean(0), mean(1)])
}

/// Where the two clients define a figure alike they agree: the same
/// requests, input and output tokens; and the client's share of TTFT (its
/// mean TTFT minus the server's own mean TTFT over the same run: network,
/// HTTP and the client's reading of the stream) is no larger for cicada, and
/// likewise for TPOT against the server's per-request TPOT.
/// Judged against the server's figure because the server itself drifts:
/// CPU vLLM's mean TTFT moved 7.6 to 9.6 ms between back-to-back runs of
/// the same client here, more than any client difference.
#[test]
fn vllm_bench_serve_and_cicada_agree_where_definitions_agree() {
    let _g = serial();
    const N: u64 = 40;
    // warm the server's kernels for these shapes first, so neither run pays it
    let warm = scratch();
    run("openai-chat", 16, 1, &[], warm.path());
    let f = |j: &Value, k: &str| j[k].as_f64().unwrap_or(f64::NAN);
    // rounds in alternating order, so a drift of the server's speed during
    // the test weighs on both clients alike; each tool's figure is the median
    // of its rounds, so one round disturbed by the machine's other work does
    // not decide
    const ROUNDS: usize = 4;
    let (mut theirs, mut ours) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let dir = scratch();
        let mut pair = |vllm_first: bool| {
            if vllm_first {
                theirs.push(with_server_timing(|| vllm_bench(N, dir.path())));
            } else {
                let out = dir.path().join("cicada");
                ours.push(with_server_timing(|| run("openai-chat", N, 1, &[], &out).0));
            }
        };
        pair(round % 2 == 0);
        pair(round % 2 != 0);
    }
    for ((vllm, [vs, _]), (cicada, [cs, _])) in theirs.iter().zip(&ours) {
        eprintln!(
            "vllm bench serve / cicada at concurrency 1 ({N} requests): completed {} / {}, input tokens {} / {}, output tokens {} / {}, mean TTFT {:.2} / {:.2} ms (server's own {vs:.2} / {cs:.2}), mean TPOT {:.2} / {:.2} ms, mean ITL {:.2} / {:.2} ms",
            vllm["completed"],
            cicada["completed"],
            vllm["total_input_tokens"],
            cicada["total_input_tokens"],
            vllm["total_output_tokens"],
            cicada["total_output_tokens"],
            f(vllm, "mean_ttft_ms"),
            f(cicada, "mean_ttft_ms"),
            f(vllm, "mean_tpot_ms"),
            f(cicada, "mean_tpot_ms"),
            f(vllm, "mean_itl_ms"),
            f(cicada, "mean_itl_ms"),
        );
        for key in ["completed", "total_input_tokens", "total_output_tokens"] {
            assert_eq!(vllm[key], cicada[key], "{key}");
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[ROUNDS / 2 - 1] + v[ROUNDS / 2]) / 2.0
    };
    // the client's share of a figure: its mean minus the server's own over the same run
    let share = |runs: &[(Value, [f64; 2])], key: &str, i: usize| {
        median(runs.iter().map(|(j, s)| f(j, key) - s[i]).collect())
    };
    let (a, b) = (
        share(&theirs, "mean_ttft_ms", 0),
        share(&ours, "mean_ttft_ms", 0),
    );
    eprintln!(
        "client share of mean TTFT (client minus server), median of {ROUNDS} rounds: vllm bench serve {a:.3} ms, cicada {b:.3} ms"
    );
    assert!(
        a >= 0.0 && b >= 0.0,
        "a client saw its first token before the server sent it: {a:.3}, {b:.3}"
    );
    // cicada's share is no larger than the Python client's, give or take
    // 0.5 ms of loopback and scheduling noise on a busy 2-core machine
    assert!(
        b <= a + 0.5,
        "client share of TTFT: vllm bench serve {a:.3} ms, cicada {b:.3} ms"
    );
    // TPOT the same way (the server's speed moved 2.9 -> 8 ms per token
    // between rounds of one CI run): the client's share is what it adds
    let (a, b) = (
        share(&theirs, "mean_tpot_ms", 1),
        share(&ours, "mean_tpot_ms", 1),
    );
    eprintln!(
        "client share of mean TPOT (client minus server), median of {ROUNDS} rounds: vllm bench serve {a:.3} ms, cicada {b:.3} ms"
    );
    assert!(
        b <= a + 0.25,
        "client share of TPOT: vllm bench serve {a:.3} ms, cicada {b:.3} ms"
    );
}

/// Through nginx as a TLS + HTTP/2 gateway that ends every client
/// connection after five streams (`keepalive_requests 5`: a GOAWAY) in front
/// of vLLM: not one request fails or goes twice, every one goes over HTTP/2,
/// and through a steady gateway (connections kept alive on both sides) the
/// client's share of mean TTFT (its mean minus the server's own over the same
/// run) moves by less than 1.5 ms against a direct run.
#[test]
fn through_an_http2_gateway_nothing_fails_and_ttft_moves_less_than_1_5_ms() {
    let _g = serial();
    let v = VllmServer::shared();
    let nginx = Nginx::start(
        &v.url,
        NginxOptions {
            keepalive_requests: 5,
            ..NginxOptions::default()
        },
    );
    let tls = format!("target.tls_ca={}", nginx.ca_pem.display());
    let via = ["--set", tls.as_str(), "--set", "target.http=2"];
    let counter = |j: &Value, k: &str| j["cicada"]["counters"][k].as_u64().unwrap_or(0);
    // at concurrency 24 GOAWAYs cross streams in flight
    let out = scratch();
    let stdout = cicada_at(
        &nginx.https_url,
        "openai-chat",
        PROMPTS,
        24,
        &via,
        out.path(),
    );
    let j = read_json(&out.path().join("result.json"));
    check_complete(&j, PROMPTS, "openai-chat through nginx");
    assert_eq!(counter(&j, "requests_http2"), PROMPTS, "{stdout}");
    let posts = nginx.posts_once_served(PROMPTS as usize + 1);
    assert_eq!(
        posts.len() as u64,
        PROMPTS + 1,
        "nginx saw {} POSTs",
        posts.len()
    );
    assert!(
        posts
            .iter()
            .all(|s| s.protocol == "HTTP/2.0" && s.status == 200 && s.nth <= 5),
        "{posts:?}"
    );
    // the client's share of mean TTFT at concurrency 1, direct and through
    // nginx in alternating rounds; each path's figure is its rounds' median.
    // Measured through a gateway set up as a production one is (ingress-nginx
    // keeps upstream connections alive and clients' connections for 1000s
    // of requests): GOAWAY every 5 streams and a new upstream connection per
    // request are correctness stress above, and here they would put a TLS
    // handshake into every fifth TTFT and uvicorn's accept into every one
    // (1.4 ms together on this machine), which is not what a gateway costs
    drop(nginx);
    let nginx = Nginx::start(
        &v.url,
        NginxOptions {
            upstream_keepalive: UpstreamKeepAlive::On(Duration::from_secs(4)),
            ..NginxOptions::default()
        },
    );
    let tls = format!("target.tls_ca={}", nginx.ca_pem.display());
    let via = ["--set", tls.as_str(), "--set", "target.http=2"];
    const N: u64 = 32;
    const ROUNDS: usize = 3;
    let f = |j: &Value, k: &str| j[k].as_f64().unwrap_or(f64::NAN);
    let (mut direct, mut gateway) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (a, b) = (scratch(), scratch());
        let (d, [ds, _]) = with_server_timing(|| run("openai-chat", N, 1, &[], a.path()).0);
        let (g, [gs, _]) = with_server_timing(|| {
            cicada_at(&nginx.https_url, "openai-chat", N, 1, &via, b.path());
            read_json(&b.path().join("result.json"))
        });
        check_complete(&d, N, "direct at concurrency 1");
        check_complete(&g, N, "through nginx at concurrency 1");
        let (d_share, g_share) = (f(&d, "mean_ttft_ms") - ds, f(&g, "mean_ttft_ms") - gs);
        eprintln!(
            "round {round}: client share of mean TTFT: direct {d_share:.3} ms, through nginx {g_share:.3} ms (server's own {ds:.3} / {gs:.3} ms)"
        );
        direct.push(d_share);
        gateway.push(g_share);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (d, g) = (median(&mut direct), median(&mut gateway));
    eprintln!(
        "the gateway's share of TTFT: {:.3} ms ({g:.3} - {d:.3})",
        g - d
    );
    assert!(
        (g - d).abs() <= 1.5,
        "client share of TTFT through nginx {g:.3} ms, direct {d:.3} ms"
    );
}
