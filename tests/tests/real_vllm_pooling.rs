//! Issue 26: cicada's `openai-embeddings` against a real vLLM (0.32's CPU
//! build) running the tiny random-weight Llama of `scripts/vllm-server.sh`
//! as an embedding model (`--runner pooling --convert embed`: last-token
//! pooling over its hidden states). Batches of token-exact random texts,
//! every request answered, and the server's own counts equal to the
//! result's: its `/metrics` prompt tokens are the result's input tokens and
//! it finishes one request per input (vLLM splits a batched
//! `/v1/embeddings` request into one engine request per input).
//! The same server answers vLLM's `/pooling` (`vllm-pooling`, counted as
//! embeddings are) and `/score` (`vllm-score`: an embedding model scores
//! as a bi-encoder, one engine request for the query and one per document).
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test --workspace --test real_vllm_pooling`.

use std::time::Duration;

use cicada_tests::servers::VllmServer;
use cicada_tests::*;

const FLAGS: &[&str] = &["--runner", "pooling", "--convert", "embed"];
const PROMPTS: u64 = 80;
const LIMIT: Duration = Duration::from_secs(900);

/// A counter of vLLM's `/metrics`, summed over its labels.
fn prom_sum(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The server's counters this test reads: prompt tokens, finished requests,
/// generated tokens.
fn counts(url: &str) -> [f64; 3] {
    let (status, page) = get_text(&format!("{url}/metrics"));
    assert_eq!(status, 200, "{page}");
    [
        "vllm:prompt_tokens_total",
        "vllm:request_success_total",
        "vllm:generation_tokens_total",
    ]
    .map(|name| prom_sum(&page, name))
}

/// The scenario of a run of `prompts` requests with `backend` against `v`,
/// its `[dataset]` and `[pooling]` given.
fn scenario(v: &VllmServer, backend: &str, sections: &str, prompts: u64) -> String {
    // no readiness probe: the server's counts are the run's alone
    format!(
        r#"
name = "{backend}"
seed = 5
[target]
backend = "{backend}"
base_url = "{url}"
model = "{name}"
ready_timeout = "0s"
[tokenizer]
source = "{model}"
{sections}
[load]
num_prompts = {prompts}
max_concurrency = 4
"#,
        url = v.url,
        name = v.name,
        model = v.model.display()
    )
}

/// Run `text` against `v`: the result, and how much the server's prompt
/// tokens, finished requests and generated tokens grew meanwhile.
fn run_counted(v: &VllmServer, text: &str, prompts: u64) -> (serde_json::Value, [u64; 3]) {
    let before = counts(&v.url);
    let dir = scratch();
    let (r, j) = run_scenario(dir.path(), "pool", text, "2", &[], LIMIT);
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        r.stdout,
        r.stderr,
        v.log_tail()
    );
    let outcomes = &j["cicada"]["outcomes"];
    assert_eq!(j["completed"].as_u64(), Some(prompts), "{outcomes}");
    assert_eq!(j["failed"].as_u64(), Some(0), "{outcomes}");
    let after = counts(&v.url);
    let grew = [0, 1, 2].map(|i| (after[i] - before[i]) as u64);
    // its prompt tokens are the result's input tokens, each request's usage
    assert_eq!(j["total_input_tokens"].as_u64(), Some(grew[0]));
    assert_eq!(j["cicada"]["server_input_tokens"].as_u64(), Some(grew[0]));
    assert_eq!(grew[2], 0, "a pooling model generates nothing");
    let items = j["cicada"]["pooling"]["items"].as_u64().unwrap_or(0);
    let duration = j["duration"].as_f64().unwrap_or(0.0);
    let per_s = j["cicada"]["pooling"]["item_throughput"]
        .as_f64()
        .unwrap_or(0.0);
    assert!((per_s * duration - items as f64).abs() < 1e-6 * items as f64);
    assert!(j["total_output_tokens"].is_null() && j["mean_ttft_ms"].is_null());
    assert_eq!(
        j["cicada"]["metrics"]["e2el"]["count"].as_u64(),
        Some(prompts)
    );
    (j, grew)
}

/// Batches of `input` texts on `/v1/embeddings` (`openai-embeddings`) or
/// `/pooling` (`vllm-pooling`): one engine request per input, and the
/// server's tokens each text's own plus its `<s>`.
fn batches_match_the_servers_counts(backend: &str) {
    let _g = serial();
    let v = VllmServer::shared_with(FLAGS);
    let sections = "[dataset]\nkind = \"random\"\ninput_len = 24\nrange_ratio = 0.5\n\
                    [pooling]\nbatch_size = 1\nbatch_size_max = 4\nencoding_format = \"float\"";
    let text = scenario(v, backend, sections, PROMPTS);
    let (j, [tokens, finished, _]) = run_counted(v, &text, PROMPTS);
    let pooling = &j["cicada"]["pooling"];
    let items = pooling["items"].as_u64().unwrap_or(0);
    assert!((PROMPTS..=4 * PROMPTS).contains(&items), "{pooling}");
    // one engine request per input
    assert_eq!(finished, items, "the server's finished requests: {pooling}");
    // token-exact texts: the client's count is each text's own tokens
    // (METRICS.md, "Input tokens"), the server's adds the <s> its
    // tokenizer puts before each input
    let client = j["cicada"]["client_input_tokens"].as_u64().unwrap_or(0);
    assert_eq!(client + items, tokens, "{items} items");
}

#[test]
fn embeddings_batches_match_the_servers_counts() {
    batches_match_the_servers_counts("openai-embeddings");
}

#[test]
fn pooling_batches_match_the_servers_counts() {
    batches_match_the_servers_counts("vllm-pooling");
}

/// `vllm-score` on `/score`: a query and 1 to 4 documents of exactly
/// `LEN` tokens each (`<s>` included); the embedding model scores as a
/// bi-encoder, so the server runs the query once and each document once.
#[test]
fn score_documents_match_the_servers_counts() {
    const LEN: u64 = 12;
    const SCORED: u64 = 30;
    let _g = serial();
    let v = VllmServer::shared_with(FLAGS);
    let sections = format!(
        "[dataset]\nkind = \"random\"\ninput_len = {LEN}\n[pooling]\nbatch_size = 1\nbatch_size_max = 4"
    );
    let text = scenario(v, "vllm-score", &sections, SCORED);
    let (j, [tokens, finished, _]) = run_counted(v, &text, SCORED);
    let pooling = &j["cicada"]["pooling"];
    let items = pooling["items"].as_u64().unwrap_or(0);
    assert!((SCORED..=4 * SCORED).contains(&items), "{pooling}");
    let client = j["cicada"]["client_input_tokens"].as_u64().unwrap_or(0);
    let seen = format!("{pooling}, client {client}, server {tokens}");
    assert_eq!(finished, items + SCORED, "{seen}");
    // each text is LEN tokens with the <s> the server puts before it (the
    // random workload counts it toward input_len)
    assert_eq!(tokens, LEN * (items + SCORED), "{seen}");
    // the client counts as a cross-encoder reads the pairs: the query
    // beside each document, without the <s> (METRICS.md, "Rerank and TEI")
    assert_eq!(client, 2 * (LEN - 1) * items, "{seen}");
}
