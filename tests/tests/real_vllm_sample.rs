//! The same sample as `vllm bench serve`: vLLM 0.32's own client (from the
//! venv `scripts/vllm-server.sh` installs; no vLLM server is started) and
//! `cicada run`, given the same flags and seed, send the same prompts with the
//! same `max_tokens` in the same order, as the built-in mock's request log
//! records them (one `cicada mock` per client, at concurrency 1 so the order
//! is the sending order). `random` draws from a BPE tokenizer with merges and
//! a BOS (`crates/scenarios/tests/fixtures/pyrng/tokenizer`), so vLLM's
//! re-tokenization rounds draw more ids, then from the suite's tiny model's
//! tokenizer (`scripts/vllm-server.sh`'s, with transformers' config files);
//! `sharegpt` reads a file written here,
//! once with fewer prompts than valid records and once with more (vLLM pads
//! its sample by `random.choice`).
//!
//! A third test runs vLLM's dataset classes themselves (`RandomDataset`,
//! `ShareGPTDataset`, in the venv's python, offline) over the fixtures the
//! scenarios crate's unit tests hold cicada's sample to
//! (`crates/scenarios/tests/fixtures/pyrng/make_vllm.py --samples-to`), and
//! checks that the installed vLLM still draws exactly those prompts, prompt
//! lengths and output lengths: the unit tests then compare them, prompt by
//! prompt, with cicada's.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test -p cicada-tests --test real_vllm_sample`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use cicada_tests::servers::{vllm_bench_serve, vllm_tiny_model, vllm_venv};
use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);

/// The BPE tokenizer with a BOS and a `tokenizer_config.json` beside it.
fn tokenizer_dir() -> PathBuf {
    repo_root().join("crates/scenarios/tests/fixtures/pyrng/tokenizer")
}

/// What the mock received, in arrival order: (prompt fingerprint, max_tokens).
fn received(mock: &Mock) -> Vec<(u64, u64)> {
    mock.requests()
        .iter()
        .map(|r| {
            (
                r["prompt_fingerprint"]
                    .as_u64()
                    .expect("a completions prompt"),
                r["max_tokens"].as_u64().expect("max_tokens"),
            )
        })
        .collect()
}

/// `vllm bench serve --backend openai` at concurrency 1 with `flags`; what the mock received.
fn vllm(tok: &Path, flags: &[&str], out: &Path) -> Vec<(u64, u64)> {
    let mock = Mock::start(&["--ttft-ms", "0", "--itl-ms", "0"]);
    let status = vllm_bench_serve()
        .args(["--backend", "openai", "--base-url", &mock.url])
        // the mock's model (its model list lacks the `root` vLLM would read)
        .args(["--model", "cicada-mock"])
        .arg("--tokenizer")
        .arg(tok)
        .args(["--max-concurrency", "1", "--request-rate", "inf"])
        // no initial test request: the log holds the run alone
        .args(["--ready-check-timeout-sec", "0"])
        .args(flags)
        .args(["--save-result", "--result-dir"])
        .arg(out)
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .expect("running vllm bench serve");
    assert!(status.success(), "vllm bench serve failed: {status}");
    received(&mock)
}

/// `cicada run --backend openai` at concurrency 1 with `flags` and
/// `dataset.sampler = sampler`; what the mock received.
fn cicada(tok: &Path, flags: &[&str], sampler: &str, out: &Path) -> Vec<(u64, u64)> {
    let mock = Mock::start(&["--ttft-ms", "0", "--itl-ms", "0"]);
    let set = format!("dataset.sampler={sampler}");
    let mut args = vec!["run", "--backend", "openai", "--base-url", &mock.url];
    args.extend(["--model", "cicada-mock"]);
    args.extend(["--tokenizer", tok.to_str().unwrap()]);
    args.extend(["--max-concurrency", "1", "--request-rate", "inf", "--quiet"]);
    args.extend(["--set", &set]);
    args.extend(flags);
    args.extend(["--result-dir", out.to_str().unwrap()]);
    let r = coord_run(&args, LIMIT);
    assert_ok(&r);
    received(&mock)
}

/// Both clients with the same tokenizer and flags: the same requests, in
/// the same order.
fn same_sample(what: &str, tok: &Path, flags: &[&str], n: usize) -> Vec<(u64, u64)> {
    let dir = scratch();
    let theirs = vllm(tok, flags, &dir.path().join("vllm"));
    let ours = cicada(tok, flags, "vllm", &dir.path().join("cicada"));
    assert_eq!(
        theirs.len(),
        n,
        "{what}: vLLM sent {} requests",
        theirs.len()
    );
    let first_diff = theirs.iter().zip(&ours).position(|(a, b)| a != b);
    assert!(
        theirs == ours,
        "{what}: vllm bench serve and cicada sent different requests (first difference at \
         request {first_diff:?}; {} vs {})\nvLLM:   {theirs:?}\ncicada: {ours:?}",
        theirs.len(),
        ours.len()
    );
    ours
}

#[test]
fn random_prompts_lengths_and_order_are_vllms() {
    let _g = serial();
    let flags = [
        "--dataset-name",
        "random",
        "--random-input-len",
        "120",
        "--random-output-len",
        "24",
        "--random-range-ratio",
        "0.4",
        "--random-prefix-len",
        "10",
        "--num-prompts",
        "40",
        "--seed",
        "11",
    ];
    let sent = same_sample("random", &tokenizer_dir(), &flags, 40);
    let distinct: std::collections::BTreeSet<_> = sent.iter().map(|r| r.0).collect();
    assert_eq!(distinct.len(), 40, "every prompt differs");
    // the comparison tells samples apart: cicada's own sampler sends others
    let dir = scratch();
    let other = cicada(&tokenizer_dir(), &flags, "cicada", dir.path());
    assert_eq!(other.len(), 40);
    assert!(
        other.iter().zip(&sent).all(|(a, b)| a.0 != b.0),
        "cicada's own sampler happened to send vLLM's prompts"
    );
    // the tokenizer of the suite's tiny model, as transformers wrote it
    let tiny = vllm_tiny_model();
    let sent = same_sample("random, the tiny model's tokenizer", &tiny, &flags, 40);
    let distinct: std::collections::BTreeSet<_> = sent.iter().map(|r| r.0).collect();
    assert_eq!(distinct.len(), 40, "every prompt differs");
}

/// A ShareGPT file of `records` records: some with one turn, some whose
/// prompt or answer is too short or too long for vLLM's filter.
fn sharegpt_file(dir: &Path, records: usize) -> PathBuf {
    const WORDS: [&str; 16] = [
        "tell", "me", "about", "the", "river", "and", "why", "it", "bends", "slowly", "under",
        "old", "stone", "bridges", "at", "night",
    ];
    let text = |i: usize, n: usize| -> String {
        let words: Vec<&str> = (0..n)
            .map(|j| WORDS[(i * 7 + j * 3) % WORDS.len()])
            .collect();
        format!("q{i} {}", words.join(" "))
    };
    let recs: Vec<Value> = (0..records)
        .map(|i| {
            let turns = if i % 11 == 3 { 1 } else { 2 + i % 3 };
            let prompt = match i % 23 {
                5 => 1200, // over 1024 tokens
                9 => 1,    // under 4
                _ => (i * 37) % 300 + 3,
            };
            let answer = if i % 17 == 2 { 1 } else { (i * 53) % 120 + 4 };
            let conv: Vec<Value> = (0..turns)
                .map(|t| {
                    let (from, n) = if t % 2 == 0 {
                        ("human", prompt)
                    } else {
                        ("gpt", answer)
                    };
                    serde_json::json!({"from": from, "value": text(i + t, n)})
                })
                .collect();
            serde_json::json!({"id": format!("r{i}"), "conversations": conv})
        })
        .collect();
    write(
        dir,
        &format!("sharegpt-{records}.json"),
        &serde_json::to_string(&recs).unwrap(),
    )
}

#[test]
fn sharegpt_records_order_and_padding_are_vllms() {
    let _g = serial();
    let dir = scratch();
    // fewer prompts than valid records: vLLM's shuffle decides which
    let big = sharegpt_file(dir.path(), 300);
    let flags = [
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        big.to_str().unwrap(),
        "--num-prompts",
        "60",
        "--seed",
        "4",
    ];
    let sent = same_sample("sharegpt", &tokenizer_dir(), &flags, 60);
    let distinct: std::collections::BTreeSet<_> = sent.iter().map(|r| r.0).collect();
    assert_eq!(distinct.len(), 60, "60 different records");
    // more prompts than valid records: vLLM pads with random.choice picks
    let small = sharegpt_file(dir.path(), 30);
    let flags = [
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        small.to_str().unwrap(),
        "--num-prompts",
        "50",
        "--seed",
        "9",
    ];
    let sent = same_sample("sharegpt, oversampled", &tokenizer_dir(), &flags, 50);
    let distinct: std::collections::BTreeSet<_> = sent.iter().map(|r| r.0).collect();
    assert!(
        distinct.len() < 30,
        "padded with repeats: {}",
        distinct.len()
    );
}

/// The committed fixtures of `crates/scenarios/src/dataset/vllm_sample.rs`'s
/// unit tests are what the installed vLLM's dataset classes sample today.
#[test]
fn unit_test_fixtures_are_what_vllm_samples() {
    let _g = serial();
    let fixtures = repo_root().join("crates/scenarios/tests/fixtures/pyrng");
    let dir = scratch();
    let status = vllm_venv("python")
        .arg(fixtures.join("make_vllm.py"))
        .arg("--samples-to")
        .arg(dir.path())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .expect("running the vLLM venv's python");
    assert!(
        status.success(),
        "make_vllm.py --samples-to failed: {status}"
    );
    for name in ["vllm_random.json", "vllm_sharegpt.json"] {
        let now = read_json(&dir.path().join(name));
        let committed = read_json(&fixtures.join(name));
        let cases = |v: &Value| v["cases"].as_array().cloned().unwrap_or_default();
        let (now, committed) = (cases(&now), cases(&committed));
        assert_eq!(now.len(), committed.len(), "{name}: cases");
        assert!(!now.is_empty(), "{name}: no cases");
        for (a, b) in now.iter().zip(&committed) {
            let samples = |v: &Value| v["samples"].as_array().map_or(0, Vec::len);
            assert!(
                samples(a) > 0,
                "{name}, {}: vLLM sampled nothing",
                a["name"]
            );
            let first =
                (0..samples(a).max(samples(b))).find(|&i| a["samples"][i] != b["samples"][i]);
            assert!(
                a == b,
                "{name}, case {}: vLLM's sample differs from the committed fixture \
                 (first at sample {first:?}: vLLM {} vs committed {})",
                a["name"],
                first.map_or(Value::Null, |i| a["samples"][i].clone()),
                first.map_or(Value::Null, |i| b["samples"][i].clone()),
            );
        }
    }
}
