//! Issue 26: multi-model (LoRA) traffic. `target.models` splits requests over
//! model names by a seeded, worker-count-independent choice, and every figure
//! is also reported per model. The built-in mock records which model each
//! request named: its counts are the ground truth.

use std::collections::BTreeMap;
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);
const REQUESTS: u64 = 600;

fn scenario(mock_url: &str, models: &str, extra: &str) -> String {
    format!(
        r#"
name = "models"
seed = 11
[target]
backend = "openai-chat"
base_url = "{mock_url}"
models = [{models}]
{extra}
[dataset]
kind = "random"
input_len = 16
output_len = 4
range_ratio = 0.5
[load]
num_prompts = {REQUESTS}
request_rate = "inf"
max_concurrency = 32
"#
    )
}

/// The mock's requests per model.
fn mock_split(mock: &Mock) -> BTreeMap<String, u64> {
    mock.stats()["models"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

/// The result's `cicada.models`, by name.
fn result_models(j: &Value) -> BTreeMap<String, Value> {
    j["cicada"]["models"]
        .as_array()
        .expect("cicada.models")
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_string(), m.clone()))
        .collect()
}

/// Run the scenario against a fresh mock with `workers` workers: the mock's
/// split, the result, and the output directory's summary.csv rows.
fn run(
    models: &str,
    extra: &str,
    workers: &str,
    mock_args: &[&str],
) -> (BTreeMap<String, u64>, Value, Vec<Vec<String>>) {
    let mock = Mock::start(mock_args);
    let dir = scratch();
    let (r, j) = run_scenario(
        dir.path(),
        "m",
        &scenario(&mock.url, models, extra),
        workers,
        &[],
        LIMIT,
    );
    assert_ok(&r);
    let (_, rows) = read_csv(&dir.path().join("out-m").join("summary.csv"));
    (mock_split(&mock), j, rows)
}

/// Per-model figures add up to the run's, and each model's count is what
/// the mock saw named.
fn check_sums(split: &BTreeMap<String, u64>, j: &Value) {
    let models = result_models(j);
    let sent: BTreeMap<String, u64> = models
        .iter()
        .map(|(k, m)| (k.clone(), m["sent"].as_u64().unwrap()))
        .collect();
    assert_eq!(&sent, split, "the result's per-model counts are the mock's");
    for key in ["completed", "total_input_tokens", "total_output_tokens"] {
        let sum: u64 = models.values().map(|m| m[key].as_u64().unwrap()).sum();
        assert_eq!(
            Some(sum),
            j[key].as_u64(),
            "{key} per model sums to the total"
        );
    }
    let failed: u64 = models.values().map(|m| m["failed"].as_u64().unwrap()).sum();
    assert_eq!(Some(failed), j["failed"].as_u64(), "failures per model");
    let sent_total: u64 = sent.values().sum();
    assert_eq!(Some(sent_total), j["cicada"]["sent"].as_u64());
    let ttft: u64 = models
        .values()
        .map(|m| m["metrics"]["ttft"]["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        Some(ttft),
        j["cicada"]["metrics"]["ttft"]["count"].as_u64(),
        "every successful request's TTFT is in exactly one model's histogram"
    );
}

#[test]
fn random_split_follows_the_weights_for_any_worker_count() {
    let _g = serial();
    let models = r#"{ name = "base" , weight = 3 }, { name = "lora-sql" }"#;
    // faults make some requests fail, so failures must split too
    let faults = [
        "--ttft-ms",
        "2",
        "--itl-ms",
        "1",
        "--fault-http-500",
        "0.05",
    ];
    let (one, j1, rows) = run(models, "", "1", &faults);
    let (four, j4, _) = run(models, "", "4", &faults);
    assert_eq!(one, four, "the same split for 1 and 4 workers");
    assert_eq!(one.values().sum::<u64>(), REQUESTS);
    // binomial: base ~ Bin(n, 3/4); 5 standard deviations either side
    let p = 0.75;
    let n = REQUESTS as f64;
    let bound = 5.0 * (n * p * (1.0 - p)).sqrt();
    let base = one["base"] as f64;
    assert!(
        (base - n * p).abs() <= bound,
        "base got {base} of {n}, expected {} ± {bound:.1}",
        n * p
    );
    check_sums(&one, &j1);
    check_sums(&four, &j4);
    assert!(j1["failed"].as_u64().unwrap() > 0, "faults were injected");
    // summary.csv: a model:<name> row per model, after the run's own
    let labels: Vec<&str> = rows
        .iter()
        .flat_map(|r| r.iter().filter(|c| c.starts_with("model:")))
        .map(String::as_str)
        .collect();
    assert_eq!(
        labels,
        ["model:base", "model:lora-sql"],
        "one row per model"
    );
}

#[test]
fn round_robin_gives_exact_shares_for_any_worker_count() {
    let _g = serial();
    let models = r#"{ name = "a" }, { name = "b" }, { name = "c" }, { name = "d" }"#;
    let args = ["--ttft-ms", "2", "--itl-ms", "1"];
    let extra = "model_assignment = \"round_robin\"";
    let (one, j1, _) = run(models, extra, "1", &args);
    let (four, j4, _) = run(models, extra, "4", &args);
    let exact: BTreeMap<String, u64> = ["a", "b", "c", "d"]
        .iter()
        .map(|m| (m.to_string(), REQUESTS / 4))
        .collect();
    assert_eq!(one, exact);
    assert_eq!(four, exact);
    check_sums(&one, &j1);
    check_sums(&four, &j4);
}

#[test]
fn a_conversation_stays_on_one_model() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let mut file = String::new();
    for c in 0..12 {
        let msgs: Vec<Value> = (0..3)
            .flat_map(|t| {
                [
                    serde_json::json!({"role": "user", "content": format!("conversation {c} turn {t}")}),
                    serde_json::json!({"role": "assistant", "content": "one two three"}),
                ]
            })
            .collect();
        file.push_str(&format!("{}\n", serde_json::json!({ "messages": msgs })));
    }
    let path = write(dir.path(), "conv.jsonl", &file);
    let text = format!(
        "seed = 3\n[target]\nbackend = \"openai-chat\"\nbase_url = \"{}\"\nmodels = [{{ name = \"x\" }}, {{ name = \"y\" }}]\n[dataset]\nkind = \"conversations\"\npath = \"{}\"\nshuffle = false\nthink_time = \"5ms\"\n[load]\nnum_prompts = 12\nrequest_rate = 100\n",
        mock.url,
        path.display()
    );
    let (r, j) = run_scenario(dir.path(), "conv", &text, "3", &[], LIMIT);
    assert_ok(&r);
    let log = mock.requests();
    assert_eq!(log.len(), 36);
    let mut by_conversation: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in &log {
        let id = e["request_id"].as_str().unwrap();
        let conv = id.split("-t").next().unwrap().to_string();
        by_conversation
            .entry(conv)
            .or_default()
            .push(e["model"].as_str().unwrap().to_string());
    }
    assert_eq!(by_conversation.len(), 12);
    for (c, models) in &by_conversation {
        assert!(
            models.iter().all(|m| m == &models[0]),
            "{c} changed model: {models:?}"
        );
    }
    check_sums(&mock_split(&mock), &j);
}
