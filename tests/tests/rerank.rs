//! Issue 26, the rest of the pooling family: `vllm-rerank` (a query and
//! documents per request), TEI's `tei-rerank` and `tei-embed`, vLLM's
//! `vllm-score` and `vllm-pooling`, through real
//! `cicada run` coordinator and worker processes against `cicada mock`,
//! judged against the mock's own count of the requests, documents (or
//! inputs) and input tokens that arrived.

use std::time::Duration;

use cicada_tests::pooling::check_pooling_figures;
use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

/// The mock's answer delay, ms: every request's E2EL is at least this.
const DELAY_MS: f64 = 3.0;

/// Requests each run sends.
const REQUESTS: u64 = 50;

fn scenario(backend: &str, url: &str, dataset: &str, rest: &str) -> String {
    format!(
        r#"
name = "rerank"
seed = 5
[target]
backend = "{backend}"
base_url = "{url}"
model = "ranker"
{dataset}
{rest}
[load]
num_prompts = {REQUESTS}
request_rate = "inf"
max_concurrency = 5
"#
    )
}

/// What the mock logged: (requests, items per request, prompt tokens), every
/// request on `path`.
fn served(mock: &Mock, path: &str) -> (u64, Vec<u64>, u64) {
    let log = mock.requests();
    assert!(log.iter().all(|q| q["path"] == path), "{:?}", log.first());
    let items: Vec<u64> = log.iter().map(|q| q["inputs"].as_u64().unwrap()).collect();
    let tokens = log
        .iter()
        .map(|q| q["prompt_tokens"].as_u64().unwrap())
        .sum();
    (log.len() as u64, items, tokens)
}

/// The run succeeded with no failure, its figures agree, and the mock saw
/// exactly the requests, items and input tokens the result counts.
fn check_against_mock(r: &Run, j: &Value, mock: &Mock, path: &str) -> (u64, Vec<u64>, u64) {
    assert_ok(r);
    assert_eq!(j["completed"].as_u64(), Some(REQUESTS), "{}", r.stdout);
    assert_eq!(j["failed"].as_u64(), Some(0), "{}", r.stdout);
    check_pooling_figures(j, DELAY_MS);
    let (requests, items, tokens) = served(mock, path);
    let stats = mock.stats();
    assert_eq!(requests, REQUESTS);
    assert_eq!(stats["requests"].as_u64(), Some(REQUESTS), "{stats}");
    let counted = j["cicada"]["pooling"]["items"].as_u64().unwrap();
    assert_eq!(stats["inputs"].as_u64(), Some(counted), "{stats}");
    assert_eq!(items.iter().sum::<u64>(), counted);
    assert_eq!(j["total_input_tokens"].as_u64(), Some(tokens));
    assert_eq!(j["cicada"]["client_input_tokens"].as_u64(), Some(tokens));
    (requests, items, tokens)
}

/// Drawn document counts: every request, document and input token cicada
/// counts arrived (the server's count and the client's agree), `top_n`
/// cuts the scores but not the documents, and the same seed sends the
/// same requests with 1 worker or 3.
#[test]
fn rerank_documents_arrive_as_counted_for_any_worker_count() {
    let _g = serial();
    let mut sent = Vec::new();
    for workers in ["1", "3"] {
        let mock = Mock::start(&["--ttft-ms", "3"]);
        let dir = scratch();
        let text = scenario(
            "vllm-rerank",
            &mock.url,
            "[dataset]\nkind = \"random\"\ninput_len = 10\nrange_ratio = 0.5",
            "[pooling]\nbatch_size = 2\nbatch_size_max = 9\n[sampling]\nextra_body = { top_n = 1 }",
        );
        let (r, j) = run_scenario(dir.path(), "rr", &text, workers, &[], LIMIT);
        let (_, docs, tokens) = check_against_mock(&r, &j, &mock, "/v1/rerank");
        assert_eq!(j["cicada"]["server_input_tokens"].as_u64(), Some(tokens));
        assert!(docs.iter().all(|n| (2..=9).contains(n)), "{docs:?}");
        assert!(docs.contains(&2) && docs.contains(&9), "{docs:?}");
        let b = &j["cicada"]["metrics"]["batch_size"];
        assert_eq!(
            (b["min"].as_f64(), b["max"].as_f64()),
            (Some(2.0), Some(9.0))
        );
        assert!(
            r.stdout.contains("Item throughput (items/s):"),
            "{}",
            r.stdout
        );
        assert!(!r.stdout.contains("TTFT"), "{}", r.stdout);
        let mut sorted = docs.clone();
        sorted.sort_unstable();
        sent.push((tokens, sorted));
    }
    assert_eq!(sent[0], sent[1]);
}

/// TEI's rerank from a JSONL of queries and documents: the server reports
/// no usage, so input tokens are the client's count, equal to the mock's.
#[test]
fn tei_rerank_sends_jsonl_queries_and_counts_tokens_itself() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "3"]);
    let dir = scratch();
    let lines: Vec<String> = (0..20)
        .map(|i| {
            let docs: Vec<String> = (0..=i % 4).map(|d| format!("\"doc {d} of {i}\"")).collect();
            format!(
                "{{\"query\": \"which one is {i}\", \"documents\": [{}]}}",
                docs.join(", ")
            )
        })
        .collect();
    let data = write(dir.path(), "pairs.jsonl", &lines.join("\n"));
    let dataset = format!("[dataset]\nkind = \"jsonl\"\npath = \"{}\"", data.display());
    let text = scenario("tei-rerank", &mock.url, &dataset, "");
    let (r, j) = run_scenario(dir.path(), "tei", &text, "2", &[], LIMIT);
    let (_, docs, tokens) = check_against_mock(&r, &j, &mock, "/rerank");
    assert!(
        j["cicada"]["server_input_tokens"].is_null(),
        "{}",
        j["cicada"]
    );
    assert!(docs.iter().all(|n| (1..=4).contains(n)), "{docs:?}");
    // each document (4 words) beside its query (4 words)
    assert_eq!(tokens, docs.iter().sum::<u64>() * 8);
}

/// TEI's embed: fixed batches of random texts, no usage, counted by the client.
#[test]
fn tei_embed_batches_arrive_as_counted() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "3"]);
    let dir = scratch();
    let text = scenario(
        "tei-embed",
        &mock.url,
        "[dataset]\nkind = \"random\"\ninput_len = 6",
        "[pooling]\nbatch_size = 3\n[sampling]\nextra_body = { normalize = true, truncate = true }",
    );
    let (r, j) = run_scenario(dir.path(), "embed", &text, "2", &[], LIMIT);
    let (_, inputs, tokens) = check_against_mock(&r, &j, &mock, "/embed");
    assert!(
        j["cicada"]["server_input_tokens"].is_null(),
        "{}",
        j["cicada"]
    );
    assert!(inputs.iter().all(|n| *n == 3), "{inputs:?}");
    assert_eq!(tokens, REQUESTS * 3 * 6);
}

/// vLLM's score API: random queries with drawn document counts go out as
/// `text_1` and `text_2` on `/score`; every document the result counts
/// arrived, and the server's token count is the client's.
#[test]
fn vllm_score_documents_arrive_as_counted() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "3"]);
    let dir = scratch();
    let text = scenario(
        "vllm-score",
        &mock.url,
        "[dataset]\nkind = \"random\"\ninput_len = 8",
        "[pooling]\nbatch_size = 1\nbatch_size_max = 5",
    );
    let (r, j) = run_scenario(dir.path(), "score", &text, "2", &[], LIMIT);
    let (_, docs, tokens) = check_against_mock(&r, &j, &mock, "/score");
    assert_eq!(j["cicada"]["server_input_tokens"].as_u64(), Some(tokens));
    assert!(docs.iter().all(|n| (1..=5).contains(n)), "{docs:?}");
    assert!(docs.contains(&1) && docs.contains(&5), "{docs:?}");
    // each document (8 tokens) beside its query (8 tokens)
    assert_eq!(tokens, docs.iter().sum::<u64>() * 16);
}

/// vLLM's pooling API: batches of random texts go out as `input` on
/// `/pooling`, with `[pooling]`'s encoding; every input arrived as counted.
#[test]
fn vllm_pooling_batches_arrive_as_counted() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "3"]);
    let dir = scratch();
    let text = scenario(
        "vllm-pooling",
        &mock.url,
        "[dataset]\nkind = \"random\"\ninput_len = 5",
        "[pooling]\nbatch_size = 2\nbatch_size_max = 4\nencoding_format = \"base64\"",
    );
    let (r, j) = run_scenario(dir.path(), "pool", &text, "2", &[], LIMIT);
    let (_, inputs, tokens) = check_against_mock(&r, &j, &mock, "/pooling");
    assert_eq!(j["cicada"]["server_input_tokens"].as_u64(), Some(tokens));
    assert!(inputs.iter().all(|n| (2..=4).contains(n)), "{inputs:?}");
    assert_eq!(tokens, inputs.iter().sum::<u64>() * 5);
}
