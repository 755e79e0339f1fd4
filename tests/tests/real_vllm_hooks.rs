//! Server hooks (`[hooks]`, issue 38 item 5) against the real vLLM 0.32
//! (CPU build, tiny model; `scripts/vllm-server.sh`), started with prefix
//! caching, in development mode (`VLLM_SERVER_DEV_MODE=1`: it serves
//! `POST /reset_prefix_cache`) and with the torch profiler configured
//! (`--profiler-config`: it serves `/start_profile` and `/stop_profile`).
//!
//! The same prompts run three times, judged by vLLM's own `/metrics`
//! (`vllm:prefix_cache_hits_total`, scraped by the test around each run):
//! the second run without a reset hits the cache for every prompt; with
//! `--reset-prefix-cache` before it, a third identical run hits it for none.
//! A profiled run leaves new torch traces in the profiler's directory.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test -p cicada-tests --test real_vllm_hooks`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cicada_tests::servers::{VllmServer, coord_run_pinned};
use cicada_tests::{read_json, scratch, serial};
use serde_json::Value;

/// Where the profiler writes (vLLM wants an absolute path; `${TMPDIR}` is
/// the install's scratch directory, from its env.sh).
const PROFILE_DIR: &str = "${TMPDIR}/cicada-hooks-profiles";
const FLAGS: &[&str] = &[
    "--enable-prefix-caching",
    "--profiler-config",
    r#"{"profiler": "torch", "torch_profiler_dir": "${TMPDIR}/cicada-hooks-profiles"}"#,
];
/// Prompt tokens: two whole 128-token blocks (vLLM's CPU block size) each.
const INPUT: &str = "300";
const PROMPTS: u64 = 8;
/// The exit code of a failed server hook (crates/cli/src/exit.rs).
const EXIT_HOOK_FAILED: i32 = 7;

fn server() -> &'static VllmServer {
    VllmServer::shared_dev(FLAGS)
}

/// `vllm:prefix_cache_hits_total` now, from the server's own `/metrics`.
fn hits_total() -> f64 {
    let (status, text) = cicada_tests::get_text(&format!("{}/metrics", server().url));
    assert_eq!(status, 200);
    text.lines()
        .filter(|l| l.starts_with("vllm:prefix_cache_hits_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `cicada run` of the same 8 prompts (seed 7) with `extra`; its exit code,
/// stderr and result.json (Null when none was written).
fn run(out: &Path, extra: &[&str]) -> (Option<i32>, String, Value) {
    let v = server();
    let n = PROMPTS.to_string();
    let mut args = vec![
        "run",
        "--backend",
        "vllm",
        "--base-url",
        &v.url,
        "--model",
        &v.name,
        "--tokenizer",
        v.model.to_str().unwrap(),
        "--dataset-name",
        "random",
        "--random-input-len",
        INPUT,
        "--random-output-len",
        "4",
        "--ignore-eos",
        "--num-prompts",
        &n,
        "--max-concurrency",
        "2",
        "--seed",
        "7",
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
        // no readiness test request: it would send the first prompt before
        // the run (before a reset), and the test's scrapes around the whole
        // process would count its hit
        "--ready-check-timeout-sec",
        "0",
    ];
    args.extend_from_slice(extra);
    let r = coord_run_pinned(&args, Duration::from_secs(900));
    let file = out.join("result.json");
    let j = if file.exists() {
        read_json(&file)
    } else {
        Value::Null
    };
    (r.code, r.stderr, j)
}

/// A run that must pass; the server's prefix-cache hits during it, by its
/// own `/metrics`, and its result.json.
fn hits_of(out: &Path, extra: &[&str]) -> (f64, Value) {
    let before = hits_total();
    let (code, stderr, j) = run(out, extra);
    assert_eq!(
        code,
        Some(0),
        "{extra:?}\n{stderr}\nserver log:\n{}",
        server().log_tail()
    );
    assert_eq!(j["completed"], PROMPTS, "{extra:?}");
    (hits_total() - before, j)
}

#[test]
fn a_prefix_cache_reset_leaves_the_next_identical_run_without_hits() {
    let _g = serial();
    let dir = scratch();
    // cold, or warm from the other test's run of the same prompts
    let (first, _) = hits_of(&dir.path().join("first"), &[]);
    let (again, j) = hits_of(&dir.path().join("again"), &[]);
    // 8 prompts of 300 tokens, 2 whole 128-token blocks each
    assert!(
        again >= (PROMPTS * 256) as f64,
        "without a reset every prompt hits again: {again} (first run {first})"
    );
    assert_eq!(
        j["cicada"]["server"]["prefix_cache_hits"].as_f64(),
        Some(again),
        "cicada's own reading of the same counter"
    );
    let (reset, j) = hits_of(&dir.path().join("reset"), &["--reset-prefix-cache"]);
    assert_eq!(reset, 0.0, "after the reset no prompt hits the cache");
    assert_eq!(
        j["cicada"]["server"]["prefix_cache_hits"].as_f64(),
        Some(0.0)
    );
    let calls = j["cicada"]["hooks"].as_array().expect("cicada.hooks");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["name"], "reset_prefix_cache");
    assert_eq!(
        calls[0]["url"],
        format!("{}/reset_prefix_cache", server().url)
    );
    assert_eq!(calls[0]["status"], 200);
    assert_eq!(calls[0]["ok"], true);
    eprintln!("prefix-cache hits: first {first}, again {again}, after a reset {reset}");
    // SGLang's route on vLLM: a clear error, nothing measured
    let before = hits_total();
    let (code, stderr, j) = run(
        &dir.path().join("sglang"),
        &["--reset-prefix-cache", "sglang"],
    );
    assert_eq!(code, Some(EXIT_HOOK_FAILED), "{stderr}");
    let want = format!(
        "server hook reset_prefix_cache failed at {}/flush_cache: HTTP 404",
        server().url
    );
    assert!(stderr.contains(&want), "want {want:?} in:\n{stderr}");
    assert!(j.is_null(), "no result written");
    assert_eq!(hits_total(), before, "nothing was sent");
}

/// The files in the profiler's directory now.
fn files(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn a_profiled_run_leaves_the_servers_torch_traces() {
    let _g = serial();
    let v = server();
    let tmp = v
        .env
        .iter()
        .find(|(k, _)| k == "TMPDIR")
        .map(|(_, t)| t.clone())
        .expect("env.sh sets TMPDIR");
    let profiles = PathBuf::from(PROFILE_DIR.replace("${TMPDIR}", &tmp));
    let before = files(&profiles);
    let dir = scratch();
    // stopping the profiler writes the traces: 20 to 100 s on a busy CPU,
    // within the default hooks.timeout
    let (_, j) = hits_of(&dir.path().join("profiled"), &["--profile"]);
    let calls = j["cicada"]["hooks"].as_array().expect("cicada.hooks");
    let names: Vec<(&str, &str, u64)> = calls
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap(),
                c["when"].as_str().unwrap(),
                c["status"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("start_profile", "before", 200),
            ("stop_profile", "after", 200)
        ]
    );
    let new: Vec<PathBuf> = files(&profiles).difference(&before).cloned().collect();
    let traces = new
        .iter()
        .filter(|p| p.to_string_lossy().ends_with(".pt.trace.json.gz"))
        .count();
    assert!(
        traces > 0,
        "no new trace in {}; server log:\n{}",
        profiles.display(),
        v.log_tail()
    );
    eprintln!(
        "profiler: stop took {:.0} ms, wrote {new:?}",
        calls[1]["duration_ms"].as_f64().unwrap_or_default()
    );
    for p in new {
        let _ = std::fs::remove_file(p);
    }
}
