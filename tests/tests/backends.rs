//! Issue: backends and targets. Every serving API against the mock speaking
//! its wire format, several replicas at once, the server-side view from
//! `/metrics`, and `cicada run` with vllm bench serve's flags and no
//! scenario file (readiness, TLS, keep-alive and secrets: `target_access`).

use std::time::Duration;

use cicada_tests::target_run::{run_text, scenario};
use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

/// Every backend name, driven against `cicada mock --api <mode>`: all 24
/// requests succeed with the asked 8 tokens, counted the API's way.
#[test]
fn every_backend_runs_against_its_fake() {
    let _g = serial();
    let cases = [
        ("openai", "openai", "usage"),
        ("openai-chat", "openai-chat", "usage"),
        ("vllm", "openai", "usage"),
        ("vllm-chat", "openai-chat", "usage"),
        ("sglang", "openai", "usage"),
        ("sglang-chat", "openai-chat", "usage"),
        ("tgi", "tgi", "usage"),
        ("llamacpp", "llamacpp", "usage"),
        ("llamacpp-chat", "llamacpp-chat", "usage"),
        ("llamacpp-completions", "llamacpp-completions", "usage"),
        ("triton", "triton", "events"),
    ];
    for (backend, mode, source) in cases {
        let mock = Mock::start(&["--ttft-ms", "3", "--itl-ms", "1", "--api", mode]);
        let dir = scratch();
        let target = format!("backend = \"{backend}\"\nbase_url = \"{}\"", mock.url);
        let (r, j) = run_text(dir.path(), &scenario(&target, ""), "2", &[]);
        assert_ok(&r);
        assert_eq!(j["completed"].as_u64(), Some(24), "{backend}\n{}", r.stdout);
        assert_eq!(j["total_output_tokens"].as_u64(), Some(24 * 8), "{backend}");
        assert_eq!(
            j["cicada"]["token_source"].as_str(),
            Some(source),
            "{backend}"
        );
        // the model was discovered from the server
        assert_eq!(j["model_id"].as_str(), Some("cicada-mock"), "{backend}");
        assert!(j["mean_ttft_ms"].as_f64().unwrap() >= 3.0, "{backend}");
        let stats = mock.stats();
        assert_eq!(stats["requests"].as_u64(), Some(24), "{backend}");
        // one readiness test request, kept out of the run's ground truth
        assert_eq!(stats["probes"].as_u64(), Some(1), "{backend}");
    }
}

/// Without streaming only E2EL and token counts exist; TTFT/ITL stay empty.
#[test]
fn non_streaming_measures_e2el_and_tokens() {
    let _g = serial();
    for (backend, mode) in [
        ("openai-chat", "openai-chat"),
        ("tgi", "tgi"),
        ("triton", "triton"),
        ("llamacpp", "llamacpp"),
    ] {
        let mock = Mock::start(&["--ttft-ms", "3", "--itl-ms", "1", "--api", mode]);
        let dir = scratch();
        let target = format!(
            "backend = \"{backend}\"\nbase_url = \"{}\"\nmodel = \"cicada-mock\"\nstream = false",
            mock.url
        );
        let (r, j) = run_text(dir.path(), &scenario(&target, ""), "1", &[]);
        assert_ok(&r);
        assert_eq!(j["completed"].as_u64(), Some(24), "{backend}");
        // Triton reports no counts: without a tokenizer a whole response is one event
        let per_request = if backend == "triton" { 1 } else { 8 };
        assert_eq!(
            j["total_output_tokens"].as_u64(),
            Some(24 * per_request),
            "{backend}"
        );
        let m = &j["cicada"]["metrics"];
        assert!(m["e2el"]["count"].as_u64() == Some(24), "{backend}: {m}");
        for streamed_only in ["ttft", "itl", "tpot", "icl"] {
            assert!(
                m.get(streamed_only).is_none(),
                "{backend}: no {streamed_only} without a stream"
            );
        }
        assert!(
            mock.requests().iter().all(|q| q["stream"] == false),
            "{backend}"
        );
    }
}

/// `[mock] api` drives the embedded mock through another API.
#[test]
fn embedded_mock_speaks_the_chosen_api() {
    let _g = serial();
    let dir = scratch();
    let text = scenario(
        "backend = \"mock\"",
        "[mock]\napi = \"tgi\"\nttft_ms = 2\nitl_ms = 1",
    );
    let (r, j) = run_text(dir.path(), &text, "1", &[]);
    assert_ok(&r);
    assert_eq!(j["completed"].as_u64(), Some(24));
    assert_eq!(
        j["cicada"]["target_urls"][0]
            .as_str()
            .map(|u| u.ends_with("/generate_stream")),
        Some(true)
    );
}

fn target_row<'a>(header: &[String], rows: &'a [Vec<String>], target: &str) -> &'a Vec<String> {
    let col = header.iter().position(|h| h == "target").unwrap();
    rows.iter()
        .find(|r| r[col] == target)
        .unwrap_or_else(|| panic!("no row for {target}"))
}

/// Two replicas with different latencies: each one's figures are its own,
/// and the run's counts are their sums, in the console, JSON and CSV.
#[test]
fn two_replicas_report_each_and_the_sum() {
    let _g = serial();
    let fast = Mock::start(&["--ttft-ms", "5", "--itl-ms", "1"]);
    let slow = Mock::start(&["--ttft-ms", "60", "--itl-ms", "4"]);
    let dir = scratch();
    let target = format!(
        "backend = \"vllm-chat\"\nurls = [\"{}\", \"{}\"]\nmodel = \"cicada-mock\"",
        fast.url, slow.url
    );
    let text = scenario(&target, "").replace("num_prompts = 24", "num_prompts = 40");
    let (r, j) = run_text(dir.path(), &text, "2", &[]);
    assert_ok(&r);
    let targets = j["cicada"]["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2);
    let (a, b) = (&targets[0], &targets[1]);
    assert!(a["url"].as_str().unwrap().starts_with(&fast.url));
    assert!(b["url"].as_str().unwrap().starts_with(&slow.url));
    // round robin: 20 each, as each mock saw
    assert_eq!(a["completed"].as_u64(), Some(20));
    assert_eq!(b["completed"].as_u64(), Some(20));
    assert_eq!(fast.stats()["requests"].as_u64(), Some(20));
    assert_eq!(slow.stats()["requests"].as_u64(), Some(20));
    let ttft = |t: &serde_json::Value| t["metrics"]["ttft"]["mean"].as_f64().unwrap();
    assert!((ttft(a) - 5.0).abs() < 4.0, "fast TTFT {}", ttft(a));
    assert!((ttft(b) - 60.0).abs() < 6.0, "slow TTFT {}", ttft(b));
    let itl = |t: &serde_json::Value| t["metrics"]["itl"]["mean"].as_f64().unwrap();
    assert!(itl(b) > 2.5 * itl(a), "ITL {} vs {}", itl(a), itl(b));
    for key in [
        "completed",
        "total_input_tokens",
        "total_output_tokens",
        "sent",
    ] {
        let total = if key == "sent" {
            &j["cicada"]["sent"]
        } else {
            &j[key]
        };
        assert_eq!(
            total.as_u64(),
            Some(a[key].as_u64().unwrap() + b[key].as_u64().unwrap()),
            "{key}"
        );
    }
    let sum = a["request_throughput"].as_f64().unwrap() + b["request_throughput"].as_f64().unwrap();
    assert!((sum - j["request_throughput"].as_f64().unwrap()).abs() < 1e-6);
    // each replica's own server view
    assert_eq!(a["server"]["requests_finished"].as_f64(), Some(20.0));
    assert_eq!(
        j["cicada"]["server"]["requests_finished"].as_f64(),
        Some(40.0)
    );
    assert!(r.stdout.contains("Per target (2)"), "{}", r.stdout);
    assert!(r.stdout.contains(a["url"].as_str().unwrap()));
    let (header, rows) = read_csv(&dir.path().join("out/summary.csv"));
    assert_eq!(rows.len(), 3);
    let completed = header.iter().position(|h| h == "completed").unwrap();
    assert_eq!(target_row(&header, &rows, "all")[completed], "40");
    assert_eq!(
        target_row(&header, &rows, a["url"].as_str().unwrap())[completed],
        "20"
    );
    assert_eq!(
        target_row(&header, &rows, b["url"].as_str().unwrap())[completed],
        "20"
    );
}

/// least_in_flight sends more to the replica that answers faster; random
/// splits by the seed; both account every request.
#[test]
fn routing_choices() {
    let _g = serial();
    let fast = Mock::start(&["--ttft-ms", "2", "--itl-ms", "0.5"]);
    let slow = Mock::start(&["--ttft-ms", "150", "--itl-ms", "10"]);
    let target = format!(
        "backend = \"openai\"\nurls = [\"{}\", \"{}\"]\nmodel = \"cicada-mock\"\nrouting = \"least_in_flight\"",
        fast.url, slow.url
    );
    let dir = scratch();
    let text = scenario(&target, "").replace("num_prompts = 24", "num_prompts = 60");
    let (r, j) = run_text(dir.path(), &text, "1", &[]);
    assert_ok(&r);
    let n = |m: &Mock| m.stats()["requests"].as_u64().unwrap();
    let (f, s) = (n(&fast), n(&slow));
    assert_eq!(f + s, 60);
    assert!(f > 3 * s, "least_in_flight: fast {f}, slow {s}");
    assert_eq!(j["completed"].as_u64(), Some(60));

    let dir = scratch();
    let text = text.replace("least_in_flight", "random");
    let (r, j) = run_text(dir.path(), &text, "3", &[]);
    assert_ok(&r);
    let (f2, s2) = (n(&fast) - f, n(&slow) - s);
    assert_eq!(f2 + s2, 60);
    assert!(f2 >= 15 && s2 >= 15, "random: {f2} vs {s2}");
    let per: Vec<u64> = j["cicada"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["sent"].as_u64().unwrap())
        .collect();
    assert_eq!(per, vec![f2, s2]);
}

/// The server-side view matches what the mock did: speculative decoding,
/// prefix cache, preemptions, KV usage, request and token counts.
#[test]
fn server_metrics_match_the_mock() {
    let _g = serial();
    let mock = Mock::start(&[
        "--ttft-ms",
        "150",
        "--itl-ms",
        "20",
        "--tokens-per-event",
        "3",
        "--spec-tokens",
        "4",
        "--kv-cache-tokens",
        "200",
    ]);
    let dir = scratch();
    let target = format!("backend = \"vllm\"\nbase_url = \"{}\"", mock.url);
    let text = scenario(&target, "report_interval = \"200ms\"")
        .replace("output_len = 8", "output_len = 9\nprefix_len = 32")
        .replace("request_rate = \"inf\"", "request_rate = 20");
    let (r, j) = run_text(dir.path(), &text, "2", &[]);
    assert_ok(&r);
    let s = &j["cicada"]["server"];
    let truth = mock.stats();
    assert_eq!(s["source"].as_str(), Some("vllm"));
    assert_eq!(s["requests_finished"].as_f64(), Some(24.0));
    assert_eq!(s["generation_tokens"].as_f64(), Some(24.0 * 9.0));
    // 9 tokens in events of 3: two steps per request, 2 of 4 drafts accepted each
    assert_eq!(s["spec_decode_num_drafts"].as_f64(), Some(48.0));
    assert_eq!(s["spec_decode_acceptance_rate"].as_f64(), Some(0.5));
    assert_eq!(s["spec_decode_acceptance_length"].as_f64(), Some(3.0));
    let pos: Vec<f64> = s["spec_decode_per_position_acceptance_rates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(pos, vec![1.0, 1.0, 0.0, 0.0]);
    assert_eq!(
        s["prefix_cache_hits"].as_f64(),
        truth["cached_tokens"].as_f64(),
        "cache hits vs the mock's truth"
    );
    assert!(s["prefix_cache_hits"].as_f64().unwrap() > 0.0);
    assert_eq!(
        s["prefix_cache_queries"].as_f64(),
        truth["prompt_tokens"].as_f64()
    );
    assert_eq!(s["preemptions"].as_f64(), truth["preemptions"].as_f64());
    let kv = s["kv_cache_usage_peak"].as_f64().unwrap();
    assert!(
        kv > 0.0 && kv <= truth["max_kv_usage"].as_f64().unwrap() + 1e-9,
        "kv {kv}"
    );
    let ttft = s["ttft"]["mean_ms"].as_f64().unwrap();
    assert!((ttft - 150.0).abs() < 20.0, "server TTFT {ttft}");
    assert!(
        r.stdout.contains("Server-side (vllm /metrics)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("Spec decode acceptance rate (%):"));
}

/// The acceptance command: vllm bench serve's flags, no scenario file.
#[test]
fn vllm_flags_run_without_a_scenario_file() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let out = dir.path().join("vllm-results");
    let r = coord_run(
        &[
            "run",
            "--backend",
            "openai-chat",
            "--base-url",
            &mock.url,
            "--dataset-name",
            "random",
            "--num-prompts",
            "32",
            "--max-concurrency",
            "8",
            "--random-input-len",
            "16",
            "--random-output-len",
            "6",
            "--percentile-metrics",
            "ttft,e2el",
            "--metric-percentiles",
            "50,99",
            "--save-result",
            "--result-dir",
            out.to_str().unwrap(),
            "--result-filename",
            "bench.json",
            "--quiet",
        ],
        LIMIT,
    );
    assert_ok(&r);
    let j = read_json(&out.join("bench.json"));
    assert_eq!(j["completed"].as_u64(), Some(32));
    assert_eq!(j["max_concurrency"].as_u64(), Some(8));
    // vLLM's figure counts every request active at any moment of a second, so
    // short requests push it past the cap; the instantaneous peak cannot.
    let per_second = j["max_concurrent_requests"].as_u64().unwrap();
    assert!((1..=32).contains(&per_second), "{per_second}");
    let peak = j["cicada"]["peak_concurrent_requests_100ms"]
        .as_f64()
        .unwrap();
    assert!(peak <= 8.0 + 1e-9, "{peak}");
    assert_eq!(j["model_id"].as_str(), Some("cicada-mock"));
    assert!(j["p50_ttft_ms"].is_number());
    assert!(r.stdout.contains("P50 E2EL (ms):"), "{}", r.stdout);
    assert!(!r.stdout.contains("Mean TPOT"), "only the asked sections");
    assert_eq!(
        j["cicada"]["scenario_origin"].as_str(),
        Some("command line")
    );
    assert_eq!(mock.stats()["requests"].as_u64(), Some(32));
}
