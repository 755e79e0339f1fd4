//! Issue 39, item 5: `dataset.prompt_token_ids` (vllm-bench's
//! `--prompt-token-ids`) sends the random dataset's prompts as token ids.
//! Against `cicada mock`: every request carries an id array of exactly the
//! drawn length, the very ids of its pool entry, and the record's input and
//! server counts agree with it; a chat backend is refused naming the key.
//! The real server's exact counts are in `real_vllm.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cicada_scenarios::dataset::build_pool;
use cicada_scenarios::tokenizer::{Tokenizer, train_bpe};
use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

/// A small real BPE tokenizer over the mock's words.
fn tokenizer(dir: &Path) -> (Tokenizer, PathBuf) {
    let corpus: Vec<String> = (0..300)
        .map(|_| format!("the{}", cicada_mock::VOCABULARY.concat()))
        .collect();
    let t = train_bpe(&corpus, 1200).unwrap();
    let path = write(dir, "tokenizer.json", t.json());
    (t, path)
}

fn scenario(url: &str, backend: &str, tok: &Path) -> String {
    format!(
        "seed = 11\n[target]\nbackend = \"{backend}\"\nbase_url = \"{url}\"\nmodel = \"cicada-mock\"\n\
         [tokenizer]\nsource = \"{}\"\n\
         [dataset]\nkind = \"random\"\ninput_len = 300\nrange_ratio = 0.5\nprefix_len = 12\noutput_len = 4\nprompt_token_ids = true\n\
         [load]\nnum_prompts = 48\nrequest_rate = 400\n",
        tok.display()
    )
}

/// The request's global index, from the `x-request-id` cicada sends
/// (`cicada-<run>-<index>`).
fn index_of(r: &Value) -> u64 {
    let id = r["request_id"].as_str().expect("request id");
    id.rsplit('-').next().unwrap().parse().unwrap()
}

/// Every request the mock saw is its pool entry's id array, of exactly the
/// drawn length; each record's input and server counts are that length.
#[test]
fn the_mock_sees_id_arrays_of_exactly_the_drawn_lengths() {
    let _g = serial();
    let dir = scratch();
    let (tok, tok_path) = tokenizer(dir.path());
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
    let text = scenario(&mock.url, "vllm", &tok_path);
    let sc = write(dir.path(), "ids.toml", &text);
    let out = dir.path().join("out");
    let r = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            out.to_str().unwrap(),
            "--save-detailed",
            "--quiet",
        ],
        LIMIT,
    );
    assert_ok(&r);
    // the pool as the scenario draws it, independently of the run
    let s = cicada_scenarios::parse(&text, "ids.toml", &[]).unwrap();
    let pool = build_pool(&s, Some(&tok)).unwrap();
    let drawn: Vec<(u32, u64)> = pool
        .entries
        .iter()
        .map(|e| (e.input_tokens, cicada_mock::fingerprint(&e.prompt.text())))
        .collect();
    let lengths: std::collections::BTreeSet<u32> = drawn.iter().map(|(n, _)| *n).collect();
    assert!(lengths.len() > 10, "lengths are drawn: {lengths:?}");
    let log = mock.requests();
    assert_eq!(log.len(), 48, "{}", r.stderr);
    for req in &log {
        let i = index_of(req) as usize;
        let (len, fp) = drawn[i % drawn.len()];
        assert_eq!(req["token_ids"], true, "request {i} sent text: {req}");
        assert_eq!(req["prompt_tokens"], u64::from(len), "request {i}");
        assert_eq!(req["prompt_fingerprint"], fp, "request {i}: other ids");
    }
    // the run's own records: input (the drawn length) = the server's count
    let records: BTreeMap<u64, Value> = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("index").is_some())
        .map(|v| (v["index"].as_u64().unwrap(), v))
        .collect();
    assert_eq!(records.len(), 48);
    for (i, rec) in &records {
        let (len, _) = drawn[*i as usize % drawn.len()];
        assert_eq!(rec["input_tokens"], u64::from(len), "record {i}");
        assert_eq!(rec["server_input_tokens"], u64::from(len), "record {i}");
    }
    let j = read_json(&out.join("result.json"));
    let total: u64 = records
        .values()
        .map(|r| r["input_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(j["total_input_tokens"], total);
}

/// A chat backend cannot take ids: the run is refused before it starts,
/// naming the key and the backend.
#[test]
fn a_chat_backend_is_refused_naming_the_key() {
    let dir = scratch();
    let (_, tok_path) = tokenizer(dir.path());
    let text = scenario("http://127.0.0.1:9", "vllm-chat", &tok_path);
    let sc = write(dir.path(), "chat.toml", &text);
    let r = coord_run(&["validate", sc.to_str().unwrap()], LIMIT);
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    let said = format!("{}{}", r.stdout, r.stderr);
    assert!(said.contains("dataset.prompt_token_ids"), "{said}");
    assert!(said.contains("vllm-chat"), "{said}");
}
