//! cicada's `openai-embeddings` against a real llama.cpp `llama-server`
//! started with `--embeddings` (mean pooling on the tiny random-weight model
//! of `scripts/llama-server.sh`): batches of token-exact random texts, every
//! request answered, and the server's own counts (its `/metrics` prompt
//! tokens, its log's tasks: one per input) equal to the result's.
//!
//! Also `vllm-rerank` and `tei-rerank` against `llama-server --reranking` on
//! the tiny random Qwen3 reranker of `scripts/make_tiny_reranker_gguf.py`.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test --workspace --test real_llamacpp_pooling`.

use std::time::Duration;

use cicada_tests::servers::LlamaServer;
use cicada_tests::*;

const SLOTS: u32 = 4;
const PROMPTS: u64 = 80;

/// A counter's value in a Prometheus text page.
fn prom(page: &str, name: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{page}"))
}

#[test]
fn embeddings_batches_match_the_servers_counts() {
    let _g = serial();
    let server = LlamaServer::start_with(SLOTS, 256, &["--embeddings", "--pooling", "mean"]);
    let (status, before) = get_text(&format!("{}/metrics", server.url));
    assert_eq!(status, 200, "{before}");
    assert_eq!(prom(&before, "llamacpp:prompt_tokens_total"), 0.0);
    let dir = scratch();
    // no readiness probe: the server's counts are the run's alone
    let text = format!(
        r#"
name = "llama-embeddings"
seed = 5
[target]
backend = "openai-embeddings"
base_url = "{url}"
model = "tiny-llama"
ready_timeout = "0s"
[tokenizer]
source = "{tok}"
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
max_concurrency = {SLOTS}
"#,
        url = server.url,
        tok = server.tokenizer.display()
    );
    let (r, j) = run_scenario(dir.path(), "emb", &text, "2", &[], Duration::from_secs(600));
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        r.stdout,
        r.stderr,
        server.log()
    );
    assert_eq!(
        j["completed"].as_u64(),
        Some(PROMPTS),
        "{}",
        j["cicada"]["outcomes"]
    );
    assert_eq!(j["failed"].as_u64(), Some(0), "{}", j["cicada"]["outcomes"]);
    let pooling = &j["cicada"]["pooling"];
    let items = pooling["items"].as_u64().unwrap();
    assert!((PROMPTS..=4 * PROMPTS).contains(&items), "{pooling}");
    // the server takes each input as one task
    assert_eq!(server.tasks_started() as u64, items, "{}", server.log());
    // its prompt tokens are the result's input tokens, each request's usage
    let (_, after) = get_text(&format!("{}/metrics", server.url));
    let served = prom(&after, "llamacpp:prompt_tokens_total") as u64;
    assert_eq!(j["total_input_tokens"].as_u64(), Some(served));
    assert_eq!(j["cicada"]["server_input_tokens"].as_u64(), Some(served));
    assert_eq!(prom(&after, "llamacpp:tokens_predicted_total"), 0.0);
    // token-exact texts (BOS included): the server counts one token more
    // per input than the client (llama-server adds one to each text it pools)
    let client = j["cicada"]["client_input_tokens"].as_u64().unwrap();
    assert_eq!(client + items, served, "{items} items");
    let duration = j["duration"].as_f64().unwrap();
    let per_s = pooling["item_throughput"].as_f64().unwrap();
    assert!((per_s * duration - items as f64).abs() < 1e-6 * items as f64);
    assert!(j["total_output_tokens"].is_null() && j["mean_ttft_ms"].is_null());
    assert_eq!(
        j["cicada"]["metrics"]["e2el"]["count"].as_u64(),
        Some(PROMPTS)
    );
}

/// One rerank run against `server`: `backend` (`vllm-rerank` or
/// `tei-rerank`, both served by llama-server's `/rerank`), token-exact
/// random queries and documents, 1 to 4 documents a request.
fn rerank_run(server: &LlamaServer, backend: &str, endpoint: &str) -> serde_json::Value {
    let dir = scratch();
    let text = format!(
        r#"
name = "llama-rerank"
seed = 9
[target]
backend = "{backend}"
base_url = "{url}"
endpoint = "{endpoint}"
model = "tiny-reranker"
ready_timeout = "0s"
[tokenizer]
source = "{tok}"
[dataset]
kind = "random"
input_len = 16
range_ratio = 0.5
[pooling]
batch_size = 1
batch_size_max = 4
[load]
num_prompts = {PROMPTS}
max_concurrency = {SLOTS}
"#,
        url = server.url,
        tok = server.tokenizer.display()
    );
    let (r, j) = run_scenario(dir.path(), "rr", &text, "2", &[], Duration::from_secs(600));
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        r.stdout,
        r.stderr,
        server.log()
    );
    assert_eq!(
        j["completed"].as_u64(),
        Some(PROMPTS),
        "{}",
        j["cicada"]["outcomes"]
    );
    assert_eq!(j["failed"].as_u64(), Some(0), "{}", j["cicada"]["outcomes"]);
    assert!(j["total_output_tokens"].is_null() && j["mean_ttft_ms"].is_null());
    j
}

/// vLLM's rerank shape, then TEI's, against llama-server `--reranking` on a
/// tiny random Qwen3 reranker (rank pooling, a `cls.output` head): one
/// server task per document, and the server's prompt tokens equal the
/// result's (vLLM's shape reports them; TEI's does not, so the client's
/// count stands, one token less per document, as for embeddings).
#[test]
fn rerank_documents_match_the_servers_counts() {
    let _g = serial();
    let server = LlamaServer::start_model("tiny-reranker.gguf", SLOTS, 256, &["--reranking"]);
    let served = || {
        let (status, page) = get_text(&format!("{}/metrics", server.url));
        assert_eq!(status, 200, "{page}");
        prom(&page, "llamacpp:prompt_tokens_total") as u64
    };
    assert_eq!(served(), 0);
    let j = rerank_run(&server, "vllm-rerank", "/v1/rerank");
    let items = j["cicada"]["pooling"]["items"].as_u64().unwrap();
    assert!(
        (PROMPTS..=4 * PROMPTS).contains(&items),
        "{}",
        j["cicada"]["pooling"]
    );
    assert_eq!(server.tasks_started() as u64, items, "{}", server.log());
    let first = served();
    assert_eq!(j["total_input_tokens"].as_u64(), Some(first));
    assert_eq!(j["cicada"]["server_input_tokens"].as_u64(), Some(first));
    let client = j["cicada"]["client_input_tokens"].as_u64().unwrap();
    // as for embeddings, the server counts one token more per document
    // than the client's token-exact texts do (its pair's BOS)
    assert_eq!(client + items, first, "{items} documents");
    // TEI's shape: the same requests (same seed), no usage in the answer
    let t = rerank_run(&server, "tei-rerank", "/rerank");
    assert_eq!(t["cicada"]["pooling"]["items"].as_u64(), Some(items));
    assert_eq!(server.tasks_started() as u64, 2 * items, "{}", server.log());
    assert!(
        t["cicada"]["server_input_tokens"].is_null(),
        "{}",
        t["cicada"]
    );
    assert_eq!(served() - first, first);
    assert_eq!(t["total_input_tokens"].as_u64(), Some(first - items));
}
