//! Issue: workloads. ShareGPT, prefix, JSONL, conversations and trace replay
//! end to end, checked against the mock's request log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cicada_mock::fingerprint;
use cicada_scenarios::tokenizer::{Tokenizer, train_bpe};
use cicada_tests::timing::{self, MockLateness};
use cicada_tests::*;
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(120);

/// A real tokenizer in which "the" and " the" are one token each.
fn tokenizer(dir: &Path) -> (Tokenizer, PathBuf) {
    let corpus: Vec<String> = (0..300)
        .map(|_| format!("the{}", cicada_mock::VOCABULARY.concat()))
        .collect();
    let t = train_bpe(&corpus, 1200).unwrap();
    let path = write(dir, "tokenizer.json", t.json());
    (t, path)
}

/// Text of exactly `n` tokens.
fn the(t: &Tokenizer, n: usize) -> String {
    let s = vec!["the"; n].join(" ");
    assert_eq!(t.count(&s).unwrap(), n);
    s
}

fn run(dir: &Path, name: &str, text: &str, workers: &str) -> (Run, Value) {
    let sc = write(dir, &format!("{name}.toml"), text);
    let out = dir.join(format!("out-{name}-{workers}"));
    let r = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            workers,
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    let j = if out.join("result.json").exists() {
        read_json(&out.join("result.json"))
    } else {
        Value::Null
    };
    (r, j)
}

/// Like `run`, keeping every request's record (`requests.jsonl`).
fn run_detailed(dir: &Path, name: &str, text: &str, workers: &str) -> (Run, Value) {
    let sc = write(dir, &format!("{name}.toml"), text);
    let out = dir.join(format!("out-{name}-{workers}"));
    let r = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            workers,
            "--output-dir",
            out.to_str().unwrap(),
            "--save-detailed",
            "--quiet",
        ],
        LIMIT,
    );
    let j = read_json(&out.join("result.json"));
    (r, j)
}

fn target(url: &str, backend: &str) -> String {
    format!(
        "seed = 5\n[target]\nbackend = \"{backend}\"\nbase_url = \"{url}\"\nmodel = \"cicada-mock\"\n"
    )
}

/// (fingerprint of the prompt, max_tokens) of every request the mock saw.
fn sent(mock: &Mock) -> Vec<(u64, Option<u64>)> {
    let mut v: Vec<(u64, Option<u64>)> = mock
        .requests()
        .iter()
        .map(|r| {
            (
                r["prompt_fingerprint"].as_u64().unwrap(),
                r["max_tokens"].as_u64(),
            )
        })
        .collect();
    v.sort_unstable();
    v
}

fn counter(j: &Value, name: &str) -> u64 {
    j["cicada"]["counters"][name].as_u64().unwrap_or(0)
}

/// A ShareGPT fixture with crafted entries keeps exactly what vLLM's rules
/// keep, and the same seed sends the same prompts with 1 and 8 workers.
#[test]
fn sharegpt_keeps_what_vllm_keeps_and_shards_identically() {
    let _g = serial();
    let dir = scratch();
    let (tok, tok_path) = tokenizer(dir.path());
    let conv = |p: usize, o: usize, extra: &str| {
        json!({"id": "x", "conversations": [
            {"from": "human", "value": format!("{}{extra}", the(&tok, p))},
            {"from": "gpt", "value": the(&tok, o)}]})
    };
    // (record, kept by vLLM's rules)
    let mut records: Vec<(Value, bool)> = vec![
        (
            json!({"id": "one", "conversations": [{"from": "human", "value": the(&tok, 10)}]}),
            false,
        ),
        (json!({"id": "none"}), false),
        (conv(3, 10, ""), false),    // prompt < 4
        (conv(4, 3, ""), false),     // output < 4
        (conv(4, 4, ""), true),      // both at the minimum
        (conv(1025, 10, ""), false), // prompt > 1024
        (conv(1024, 1024, ""), true),
        (conv(1024, 1025, ""), false), // prompt + output > 2048
    ];
    // more valid ones, each prompt distinct
    for i in 0..24 {
        let extra = " of".repeat(i + 1);
        records.push((conv(5 + i * 3, 4 + i, &extra), true));
    }
    let kept: Vec<(u64, Option<u64>)> = {
        let mut v: Vec<(u64, Option<u64>)> = records
            .iter()
            .filter(|(_, k)| *k)
            .map(|(r, _)| {
                let c = r["conversations"].as_array().unwrap();
                let prompt = c[0]["value"].as_str().unwrap();
                let out = tok.count(c[1]["value"].as_str().unwrap()).unwrap() as u64;
                // chat APIs get one user message: the mock joins messages with "\n"
                (fingerprint(&format!("{prompt}\n")), Some(out))
            })
            .collect();
        v.sort_unstable();
        v
    };
    let file = write(
        dir.path(),
        "sg.json",
        &serde_json::to_string(&records.iter().map(|(r, _)| r).collect::<Vec<_>>()).unwrap(),
    );
    let body = |url: &str| {
        format!(
            "{}[tokenizer]\nsource = \"{}\"\n[dataset]\nkind = \"sharegpt\"\npath = \"{}\"\n[load]\nnum_prompts = {}\nrequest_rate = 200\n",
            target(url, "openai-chat"),
            tok_path.display(),
            file.display(),
            kept.len()
        )
    };
    let mut seen = Vec::new();
    for workers in ["1", "8"] {
        let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
        let (r, j) = run(dir.path(), "sharegpt", &body(&mock.url), workers);
        assert_ok(&r);
        assert!(
            r.stderr.contains("dataset: read 32, filtered 6 (fewer than 2 turns: 2, output < 4 tokens: 1, prompt + output > 2048 tokens: 1, prompt < 4 tokens: 1, prompt > 1024 tokens: 1), kept 26 (sharegpt, counted with"),
            "{}",
            r.stderr
        );
        assert_eq!(j["cicada"]["dataset"]["kept"].as_u64(), Some(26));
        assert_eq!(j["cicada"]["dataset"]["filtered"].as_u64(), Some(6));
        assert_eq!(j["completed"].as_u64(), Some(26));
        let got = sent(&mock);
        assert_eq!(
            got, kept,
            "{workers} workers: exactly the valid records, each once"
        );
        seen.push(got);
    }
    assert_eq!(seen[0], seen[1]);
}

/// A trace replays at its timestamps (×10) across 4 workers: every record is
/// scheduled exactly at its timestamp and sent then (judged against the mock's
/// own lateness, see `timing`); equal hash ids share blocks, which the mock's prefix cache (16-word
/// blocks, like vLLM's 16-token ones) reports.
#[test]
fn trace_replays_at_its_timestamps_across_four_workers() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&[
        "--ttft-ms",
        "2",
        "--itl-ms",
        "0",
        "--prompt-tokens-details",
        "true",
    ]);
    let mut lines = String::new();
    let mut expect_ms: BTreeMap<u64, f64> = BTreeMap::new();
    let mut ts = 0u64;
    for i in 0..40u64 {
        ts += 50 + (i * 137) % 400; // irregular gaps, 0.05 to 0.45 s
        let out = 10 + i; // identifies the record in the mock's log
        let ids = [1, 2, 100 + i];
        let input = 16 * 2 + 3 + i % 5;
        lines.push_str(&format!(
            "{{\"timestamp\": {ts}, \"input_length\": {input}, \"output_length\": {out}, \"hash_ids\": {ids:?}}}\n"
        ));
        expect_ms.insert(out, ts as f64 / 10.0);
    }
    let trace = write(dir.path(), "trace.jsonl", &lines);
    let text = format!(
        "{}[dataset]\nkind = \"trace\"\npath = \"{}\"\nspeed = 10.0\nblock_size = 16\n",
        target(&mock.url, "openai-chat"),
        trace.display()
    );
    let (r, j) = run_detailed(dir.path(), "trace", &text, "4");
    assert_ok(&r);
    let log = mock.requests();
    assert_eq!(log.len(), 40);
    // each record is scheduled exactly at its timestamp over the speed-up...
    let out = dir.path().join("out-trace-4");
    let arrivals = timing::arrivals(&log, &out.join("requests.jsonl"));
    assert_eq!(
        arrivals.len(),
        40,
        "requests.jsonl holds {} of the 40 records the mock saw: {arrivals:?}\ncoord stderr:\n{}",
        arrivals.len(),
        r.stderr
    );
    let shift = |a: &timing::Arrival| {
        a.scheduled_us as f64 - expect_ms[&a.requested_output_tokens.unwrap()] * 1000.0
    };
    let first = shift(&arrivals[0]);
    for a in &arrivals {
        assert_eq!(
            shift(a),
            first,
            "record with output {:?} scheduled off its timestamp",
            a.requested_output_tokens
        );
    }
    // ...and sent then, reaching the mock when cicada says it sent it
    timing::assert_on_schedule(&arrivals, MockLateness::of(&mock.stats()), "trace replay");
    let cached: u64 = log
        .iter()
        .map(|e| e["cached_tokens"].as_u64().unwrap_or(0))
        .sum();
    // the shared blocks 1 and 2 hit for every request: the readiness check's
    // test request (the first record, as vllm bench serve's initial test
    // prompt) already cached them before the first measured one; each
    // request's own partial third block never counts
    assert_eq!(cached, 40 * 32, "{log:?}");
    assert_eq!(counter(&j, "cached_tokens"), cached);
    assert!(
        r.stdout.contains("Cached prompt tokens (server):"),
        "{}",
        r.stdout
    );
}

/// Every turn of each conversation is sent, in order, from one worker, with
/// the model's previous answers in `messages`.
#[test]
fn conversations_send_every_turn_in_order_from_one_worker() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "3", "--itl-ms", "1"]);
    let sessions: Vec<Vec<String>> = (0..7)
        .map(|c| {
            (0..2 + c % 3)
                .map(|t| format!("conversation {c} turn {t} please"))
                .collect()
        })
        .collect();
    let mut file = String::new();
    for (c, turns) in sessions.iter().enumerate() {
        let mut msgs = vec![json!({"role": "system", "content": format!("system {c}")})];
        for (t, u) in turns.iter().enumerate() {
            msgs.push(json!({"role": "user", "content": u}));
            msgs.push(json!({"role": "assistant", "content": vec!["word"; 3 + t].join(" ")}));
        }
        file.push_str(&format!("{}\n", json!({ "messages": msgs })));
    }
    let path = write(dir.path(), "conv.jsonl", &file);
    let text = format!(
        "{}[dataset]\nkind = \"conversations\"\npath = \"{}\"\nshuffle = false\nthink_time = \"40ms\"\n[load]\nnum_prompts = 7\nrequest_rate = 50\n",
        target(&mock.url, "openai-chat"),
        path.display()
    );
    let (r, j) = run(dir.path(), "conversations", &text, "4");
    assert_ok(&r);
    let total: usize = sessions.iter().map(Vec::len).sum();
    assert_eq!(j["completed"].as_u64(), Some(total as u64));
    assert_eq!(
        j["num_prompts"].as_u64(),
        Some(total as u64),
        "planned = every turn"
    );
    let log = mock.requests();
    assert_eq!(log.len(), total);
    for (c, turns) in sessions.iter().enumerate() {
        let mine: Vec<&Value> = log
            .iter()
            .filter(|e| {
                e["request_id"]
                    .as_str()
                    .is_some_and(|id| id.contains(&format!("-c{c}-")))
            })
            .collect();
        assert_eq!(mine.len(), turns.len(), "conversation {c}");
        let mut expect: Vec<(String, u64)> =
            vec![("system".into(), fingerprint(&format!("system {c}")))];
        for (t, e) in mine.iter().enumerate() {
            let id = e["request_id"].as_str().unwrap();
            assert!(
                id.ends_with(&format!("-c{c}-t{t}-w{}", c % 4)),
                "turn {t} of conversation {c} came as {id}: in order, from worker {}",
                c % 4
            );
            expect.push(("user".into(), fingerprint(&turns[t])));
            let got: Vec<(String, u64)> = e["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    (
                        m["role"].as_str().unwrap().to_string(),
                        m["fingerprint"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(got, expect, "conversation {c} turn {t}");
            assert_eq!(
                e["max_tokens"].as_u64(),
                Some(3 + t as u64),
                "the dataset's answer sets the length"
            );
            expect.push((
                "assistant".into(),
                e["output_fingerprint"].as_u64().unwrap(),
            ));
            if t > 0 {
                let gap =
                    e["offset_us"].as_u64().unwrap() - mine[t - 1]["offset_us"].as_u64().unwrap();
                assert!(gap >= 40_000, "think time between turns: {gap} µs");
            }
        }
    }
}

/// The prefix workload's shared prefixes hit the server's prefix cache, and
/// the cached tokens it reports are counted end to end.
#[test]
fn prefix_workload_reports_cached_tokens() {
    let _g = serial();
    let dir = scratch();
    let (_, tok_path) = tokenizer(dir.path());
    let mock = Mock::start(&[
        "--ttft-ms",
        "2",
        "--itl-ms",
        "0",
        "--prompt-tokens-details",
        "true",
    ]);
    let text = format!(
        "{}[tokenizer]\nsource = \"{}\"\n[dataset]\nkind = \"prefix\"\nnum_prefixes = 3\nprefix_len = 64\nsuffix_len = 16\noutput_len = 8\n[load]\nnum_prompts = 30\nrequest_rate = 100\n",
        target(&mock.url, "openai-chat"),
        tok_path.display()
    );
    let (r, j) = run(dir.path(), "prefix", &text, "2");
    assert_ok(&r);
    let log = mock.requests();
    assert_eq!(log.len(), 30);
    let cached: u64 = log
        .iter()
        .map(|e| e["cached_tokens"].as_u64().unwrap_or(0))
        .sum();
    assert!(cached > 0, "the shared prefixes hit the cache");
    assert_eq!(counter(&j, "cached_tokens"), cached);
    assert!(
        r.stdout.contains("Cached prompt tokens (server):"),
        "{}",
        r.stdout
    );
    // three prefixes: only the first request of each finds nothing cached,
    // except the prefix of the pool's first entry, which the readiness check's
    // test request (as vllm bench serve's initial test prompt) already cached
    let cold = log
        .iter()
        .filter(|e| e["cached_tokens"].as_u64() == Some(0))
        .count();
    assert_eq!(cold, 2, "{log:?}");
}

/// A server that stops early is reported (short outputs) unless the backend
/// sends ignore_eos, which the synthetic workloads turn on.
#[test]
fn short_outputs_are_warned_unless_ignore_eos_is_sent() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0", "--eos-after-tokens", "5"]);
    let body = "[dataset]\ninput_len = 16\noutput_len = 20\n[load]\nnum_prompts = 12\n";
    // plain OpenAI gets no ignore_eos (it would reject the field)
    let (r, j) = run(
        dir.path(),
        "plain",
        &format!("{}{body}", target(&mock.url, "openai-chat")),
        "2",
    );
    assert_ok(&r);
    assert_eq!(counter(&j, "short_outputs"), 12);
    assert_eq!(j["total_output_tokens"].as_u64(), Some(12 * 5));
    assert!(
        r.stdout
            .contains("warning: 12 requests returned fewer tokens than asked"),
        "{}",
        r.stdout
    );
    // vLLM gets ignore_eos (on by default for random) and the full length
    let (r, j) = run(
        dir.path(),
        "vllm",
        &format!("{}{body}", target(&mock.url, "vllm-chat")),
        "2",
    );
    assert_ok(&r);
    assert_eq!(counter(&j, "short_outputs"), 0);
    assert_eq!(j["total_output_tokens"].as_u64(), Some(12 * 20));
    assert!(
        !r.stdout.contains("fewer tokens than asked"),
        "{}",
        r.stdout
    );
    // min_tokens without ignore_eos raises the stop point
    let sampling = "[sampling]\nignore_eos = false\nmin_tokens = 20\n";
    let (r, j) = run(
        dir.path(),
        "min",
        &format!("{}{body}{sampling}", target(&mock.url, "vllm-chat")),
        "2",
    );
    assert_ok(&r);
    assert_eq!(counter(&j, "short_outputs"), 0);
    assert_eq!(j["total_output_tokens"].as_u64(), Some(12 * 20));
}

/// JSONL prompts and chats reach the server as written, with their lengths.
#[test]
fn jsonl_prompts_and_messages_reach_the_server_as_written() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
    let path = write(
        dir.path(),
        "p.jsonl",
        "{\"prompt\": \"What is the capital of India?\", \"output_tokens\": 10}\n\
         {\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"and of France?\"}], \"output_tokens\": 4}\n",
    );
    let text = format!(
        "{}[dataset]\nkind = \"jsonl\"\npath = \"{}\"\n[load]\nnum_prompts = 2\n",
        target(&mock.url, "openai-chat"),
        path.display()
    );
    let (r, _) = run(dir.path(), "jsonl", &text, "2");
    assert_ok(&r);
    let mut got: Vec<(Vec<(String, u64)>, u64)> = mock
        .requests()
        .iter()
        .map(|e| {
            let m = e["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    (
                        m["role"].as_str().unwrap().to_string(),
                        m["fingerprint"].as_u64().unwrap(),
                    )
                })
                .collect();
            (m, e["max_tokens"].as_u64().unwrap())
        })
        .collect();
    got.sort();
    let mut want = vec![
        (
            vec![(
                "user".to_string(),
                fingerprint("What is the capital of India?"),
            )],
            10,
        ),
        (
            vec![
                ("system".to_string(), fingerprint("be brief")),
                ("user".to_string(), fingerprint("and of France?")),
            ],
            4,
        ),
    ];
    want.sort();
    assert_eq!(got, want);
}

/// Malformed datasets stop the run with an error naming the file and record.
#[test]
fn malformed_datasets_name_the_file_and_record() {
    let _g = serial();
    let dir = scratch();
    let (_, tok_path) = tokenizer(dir.path());
    let cases = [
        (
            "jsonl",
            "bad.jsonl",
            "{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\",}\n",
            "bad.jsonl:3: ",
        ),
        (
            "jsonl",
            "missing.jsonl",
            "{\"output_tokens\": 3}\n",
            "missing.jsonl:1: missing field \"prompt\"",
        ),
        (
            "sharegpt",
            "bad.json",
            "[{\"conversations\": []}, {\"conversations\": [{\"from\": \"human\"}]}]",
            "bad.json: record [1]: missing field `value`",
        ),
        (
            "sharegpt",
            "filtered.json",
            "[{\"conversations\": [{\"value\": \"hi\"}, {\"value\": \"yo\"}]}]",
            "the dataset yields no requests: all 1 records were filtered out (prompt < 4 tokens: 1)",
        ),
        (
            "trace",
            "t.jsonl",
            "{\"timestamp\": 0, \"input_length\": 5}\n",
            "t.jsonl:1: missing field `output_length`",
        ),
        (
            "conversations",
            "c.jsonl",
            "{\"messages\": [{\"role\": \"user\"}]}\n",
            "c.jsonl:1: missing field `content`",
        ),
    ];
    for (kind, file, text, want) in cases {
        let path = write(dir.path(), file, text);
        let scenario = format!(
            "[target]\nbackend = \"mock\"\n[tokenizer]\nsource = \"{}\"\n[dataset]\nkind = \"{kind}\"\npath = \"{}\"\n",
            tok_path.display(),
            path.display()
        );
        let (r, _) = run(dir.path(), &format!("bad-{kind}"), &scenario, "1");
        assert_eq!(r.code, Some(2), "{kind}: {}", r.stderr);
        assert!(
            r.stderr.contains(want),
            "{kind}: want {want:?} in\n{}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
    // keys checked before any file is read: name the file, line and key
    let sc = write(
        dir.path(),
        "v.toml",
        "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"sharegpt\"\npath = \"x.json\"\nspeed = 2\n",
    );
    let r = coord_run(&["validate", sc.to_str().unwrap()], LIMIT);
    assert_eq!(r.code, Some(2));
    // a key of another kind stops the reading (each kind is a type with
    // exactly its keys), before the checks that need a whole [dataset]
    assert!(
        r.stderr
            .contains("v.toml:6: `dataset.speed`: does not apply to kind \"sharegpt\""),
        "{}",
        r.stderr
    );
}
