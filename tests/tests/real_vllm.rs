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

use cicada_tests::servers::VllmServer;
use cicada_tests::*;
use serde_json::Value;

const INPUT: u64 = 32;
const OUTPUT: u64 = 16;

/// A run with `vllm bench serve`'s flags; returns result.json and stdout.
fn run(
    backend: &str,
    prompts: u64,
    concurrency: u32,
    extra: &[&str],
    out: &Path,
) -> (Value, String) {
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
        &v.url,
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
        "--ignore-eos",
        "--seed",
        "1",
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let r = coord_run(&args, Duration::from_secs(900));
    assert_eq!(
        r.code,
        Some(0),
        "{backend} {extra:?}\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    (read_json(&out.join("result.json")), r.stdout)
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
            let (j, _) = run(backend, 64, 8, &["--set", &s], out.path());
            let what = format!("{backend} stream={stream}");
            check_complete(&j, 64, &what);
            seen.push(format!(
                "{what}: {} reconnects",
                j["cicada"]["reconnects"].as_u64().unwrap()
            ));
        }
    }
    eprintln!("{}", seen.join("\n"));
}

#[test]
fn a_concurrency_sweep_writes_a_row_and_a_result_per_stage() {
    let _g = serial();
    let out = scratch();
    run(
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
    // exactly the measured requests: the readiness request came before the first scrape
    assert_eq!(s["requests_finished"], 64, "{s}");
    assert_eq!(s["generation_tokens"], j["total_output_tokens"], "{s}");
    assert_eq!(
        s["prompt_tokens"], j["cicada"]["server_input_tokens"],
        "{s}"
    );
    assert_eq!(s["ttft"]["count"], 64, "{s}");
    assert!(s["ttft"]["mean_ms"].as_f64().unwrap() > 0.0, "{s}");
    assert!(stdout.contains("Server-side (vllm /metrics)"), "{stdout}");
}

/// `vllm bench serve` with the same settings as cicada's flags; its saved result.
fn vllm_bench(prompts: u64, out: &Path) -> Value {
    let v = VllmServer::shared();
    let status = Command::new(&v.vllm)
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

#[test]
fn vllm_bench_serve_and_cicada_agree_where_definitions_agree() {
    let _g = serial();
    const N: u64 = 40;
    // warm the server's kernels for these shapes first, so neither run pays it
    let warm = scratch();
    run("openai-chat", 16, 1, &[], warm.path());
    let dir = scratch();
    let vllm = vllm_bench(N, dir.path());
    let (ours, _) = run("openai-chat", N, 1, &[], &dir.path().join("cicada"));
    let f = |j: &Value, k: &str| j[k].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "vllm bench serve vs cicada at concurrency 1 ({N} requests): completed {} / {}, input tokens {} / {}, output tokens {} / {}, mean TTFT {:.2} / {:.2} ms, mean TPOT {:.2} / {:.2} ms, mean ITL {:.2} / {:.2} ms",
        vllm["completed"],
        ours["completed"],
        vllm["total_input_tokens"],
        ours["total_input_tokens"],
        vllm["total_output_tokens"],
        ours["total_output_tokens"],
        f(&vllm, "mean_ttft_ms"),
        f(&ours, "mean_ttft_ms"),
        f(&vllm, "mean_tpot_ms"),
        f(&ours, "mean_tpot_ms"),
        f(&vllm, "mean_itl_ms"),
        f(&ours, "mean_itl_ms"),
    );
    for key in ["completed", "total_input_tokens", "total_output_tokens"] {
        assert_eq!(vllm[key], ours[key], "{key}");
    }
    for key in ["mean_ttft_ms", "mean_tpot_ms"] {
        let (a, b) = (f(&vllm, key), f(&ours, key));
        assert!(
            (a - b).abs() <= 0.10 * a,
            "{key}: vllm bench serve {a:.3}, cicada {b:.3}"
        );
    }
}
