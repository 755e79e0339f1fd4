//! Checks every pooling run's result must pass (embeddings, rerank, TEI):
//! its figures agree with each other and nothing is reported as generated.

use serde_json::Value;

/// Items and input tokens per second times the duration give the totals,
/// the mean batch times the requests gives the items, the generation
/// figures are null and every request's E2EL is at least the mock's
/// answer delay `delay_ms`.
pub fn check_pooling_figures(j: &Value, delay_ms: f64) {
    let duration = j["duration"].as_f64().unwrap();
    let pooling = &j["cicada"]["pooling"];
    let items = pooling["items"].as_u64().unwrap();
    let per_s = pooling["item_throughput"].as_f64().unwrap();
    assert!(
        (per_s * duration - items as f64).abs() < 1e-6 * items as f64,
        "{pooling}"
    );
    let input = j["total_input_tokens"].as_u64().unwrap();
    let tok_s = pooling["input_token_throughput"].as_f64().unwrap();
    assert!(
        (tok_s * duration - input as f64).abs() < 1e-6 * input as f64,
        "{pooling}"
    );
    let completed = j["completed"].as_u64().unwrap();
    let mean = pooling["mean_batch_size"].as_f64().unwrap();
    assert!((mean * completed as f64 - items as f64).abs() < 1e-6 * items as f64);
    assert_eq!(j["cicada"]["counters"]["items"].as_u64(), Some(items));
    for key in [
        "total_output_tokens",
        "output_throughput",
        "mean_ttft_ms",
        "mean_tpot_ms",
    ] {
        assert!(j[key].is_null(), "{key}: {}", j[key]);
    }
    let e2el = &j["cicada"]["metrics"]["e2el"];
    assert_eq!(e2el["count"].as_u64(), Some(completed));
    assert!(e2el["min"].as_f64().unwrap() >= delay_ms, "{e2el}");
    assert!(j["cicada"]["metrics"]["ttft"].is_null());
}
