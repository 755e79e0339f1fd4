//! Issue 26: cicada's `openai-embeddings` against a real vLLM (0.32's CPU
//! build) running the tiny random-weight Llama of `scripts/vllm-server.sh`
//! as an embedding model (`--runner pooling --convert embed`: last-token
//! pooling over its hidden states). Batches of token-exact random texts,
//! every request answered, and the server's own counts equal to the
//! result's: its `/metrics` prompt tokens are the result's input tokens and
//! it finishes one request per input (vLLM splits a batched
//! `/v1/embeddings` request into one engine request per input).
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

#[test]
fn embeddings_batches_match_the_servers_counts() {
    let _g = serial();
    let v = VllmServer::shared_with(FLAGS);
    let before = counts(&v.url);
    let dir = scratch();
    // no readiness probe: the server's counts are the run's alone
    let text = format!(
        r#"
name = "vllm-embeddings"
seed = 5
[target]
backend = "openai-embeddings"
base_url = "{url}"
model = "{name}"
ready_timeout = "0s"
[tokenizer]
source = "{model}"
[dataset]
kind = "random"
input_len = 24
range_ratio = 0.5
[pooling]
batch_size = 1
batch_size_max = 4
encoding_format = "float"
[load]
num_prompts = {PROMPTS}
max_concurrency = 4
"#,
        url = v.url,
        name = v.name,
        model = v.model.display()
    );
    let (r, j) = run_scenario(dir.path(), "emb", &text, "2", &[], LIMIT);
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        r.stdout,
        r.stderr,
        v.log_tail()
    );
    let outcomes = &j["cicada"]["outcomes"];
    assert_eq!(j["completed"].as_u64(), Some(PROMPTS), "{outcomes}");
    assert_eq!(j["failed"].as_u64(), Some(0), "{outcomes}");
    let pooling = &j["cicada"]["pooling"];
    let items = pooling["items"].as_u64().unwrap_or(0);
    assert!((PROMPTS..=4 * PROMPTS).contains(&items), "{pooling}");

    let after = counts(&v.url);
    let [tokens, finished, generated] = [0, 1, 2].map(|i| (after[i] - before[i]) as u64);
    // one engine request per input
    assert_eq!(finished, items, "the server's finished requests: {pooling}");
    // its prompt tokens are the result's input tokens, each request's usage
    assert_eq!(j["total_input_tokens"].as_u64(), Some(tokens));
    assert_eq!(j["cicada"]["server_input_tokens"].as_u64(), Some(tokens));
    assert_eq!(generated, 0, "a pooling model generates nothing");
    // token-exact texts: the client's count is each text's own tokens
    // (METRICS.md, "Input tokens"), the server's adds the <s> its
    // tokenizer puts before each input
    let client = j["cicada"]["client_input_tokens"].as_u64().unwrap_or(0);
    assert_eq!(client + items, tokens, "{items} items");
    let duration = j["duration"].as_f64().unwrap_or(0.0);
    let per_s = pooling["item_throughput"].as_f64().unwrap_or(0.0);
    assert!((per_s * duration - items as f64).abs() < 1e-6 * items as f64);
    assert!(j["total_output_tokens"].is_null() && j["mean_ttft_ms"].is_null());
    assert_eq!(
        j["cicada"]["metrics"]["e2el"]["count"].as_u64(),
        Some(PROMPTS)
    );
}
