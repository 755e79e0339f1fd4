//! Issue 26, pooling: `openai-embeddings` batches of inputs through real
//! `cicada run` coordinator and worker processes against `cicada mock`,
//! judged against the mock's own count of the requests and inputs that
//! arrived; the reports carry items and input throughput, and no
//! generation figures.

use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

/// The mock's answer delay, ms: every request's E2EL is at least this.
const DELAY_MS: f64 = 3.0;

fn embeddings_scenario(url: &str, dataset: &str, pooling: &str) -> String {
    format!(
        r#"
name = "embeddings"
seed = 11
[target]
backend = "openai-embeddings"
base_url = "{url}"
model = "embedder"
{dataset}
[pooling]
{pooling}
[load]
num_prompts = 60
request_rate = "inf"
max_concurrency = 6
"#
    )
}

/// What the mock logged: (requests, inputs per request, prompt tokens).
fn served(mock: &Mock) -> (usize, Vec<u64>, u64) {
    let log = mock.requests();
    assert!(
        log.iter().all(|q| q["path"] == "/v1/embeddings"),
        "{:?}",
        log.first()
    );
    let inputs: Vec<u64> = log.iter().map(|q| q["inputs"].as_u64().unwrap()).collect();
    let tokens = log
        .iter()
        .map(|q| q["prompt_tokens"].as_u64().unwrap())
        .sum();
    (log.len(), inputs, tokens)
}

/// The run's figures agree with each other (see `check_pooling_figures`).
fn check_figures(j: &Value) {
    cicada_tests::pooling::check_pooling_figures(j, DELAY_MS);
}

/// Drawn batch sizes: every request and input cicada counts arrived, and
/// the same seed sends the same batches with 1 worker or 3.
#[test]
fn embeddings_batches_arrive_as_counted_for_any_worker_count() {
    let _g = serial();
    let mut batches = Vec::new();
    for workers in ["1", "3"] {
        let mock = Mock::start(&["--ttft-ms", "3"]);
        let dir = scratch();
        let text = embeddings_scenario(
            &mock.url,
            "[dataset]\nkind = \"random\"\ninput_len = 12\nrange_ratio = 0.5",
            "batch_size = 2\nbatch_size_max = 7\nencoding_format = \"base64\"\ndimensions = 8",
        );
        let (r, j) = run_scenario(dir.path(), "emb", &text, workers, &[], LIMIT);
        assert_ok(&r);
        assert_eq!(j["completed"].as_u64(), Some(60), "{}", r.stdout);
        assert_eq!(j["failed"].as_u64(), Some(0), "{}", r.stdout);
        check_figures(&j);
        let (requests, inputs, tokens) = served(&mock);
        let stats = mock.stats();
        assert_eq!(requests, 60);
        assert_eq!(stats["requests"].as_u64(), Some(60), "{stats}");
        let items = j["cicada"]["pooling"]["items"].as_u64().unwrap();
        assert_eq!(stats["inputs"].as_u64(), Some(items), "{stats}");
        assert_eq!(inputs.iter().sum::<u64>(), items);
        assert!(inputs.iter().all(|n| (2..=7).contains(n)), "{inputs:?}");
        assert!(inputs.contains(&2) && inputs.contains(&7), "{inputs:?}");
        assert_eq!(j["total_input_tokens"].as_u64(), Some(tokens));
        assert_eq!(j["cicada"]["server_input_tokens"].as_u64(), Some(tokens));
        assert_eq!(j["cicada"]["client_input_tokens"].as_u64(), Some(tokens));
        let b = &j["cicada"]["metrics"]["batch_size"];
        assert_eq!(
            (b["min"].as_f64(), b["max"].as_f64()),
            (Some(2.0), Some(7.0))
        );
        let mut sorted = inputs.clone();
        sorted.sort_unstable();
        batches.push((items, tokens, sorted));
        // the console shows pooling figures and no generation block
        let shown = &r.stdout;
        assert!(shown.contains("Item throughput (items/s):"), "{shown}");
        assert!(shown.contains("Mean E2EL (ms):"), "{shown}");
        assert!(
            !shown.contains("TTFT") && !shown.contains("TPOT"),
            "{shown}"
        );
        // `cicada report` reads it back: no output throughput, E2EL kept
        let file = dir.path().join("out-emb/result.json");
        let report = coord_run(&["report", file.to_str().unwrap()], LIMIT);
        assert_ok(&report);
        assert!(report.stdout.contains("| 60 | 0 |"), "{}", report.stdout);
        let csv = std::fs::read_to_string(dir.path().join("out-emb/summary.csv")).unwrap();
        let (head, row) = csv.split_once('\n').unwrap();
        let col = head.split(',').position(|c| c == "total_items").unwrap();
        assert_eq!(row.split(',').nth(col), Some(items.to_string().as_str()));
    }
    assert_eq!(batches[0], batches[1]);
}

/// A JSONL source feeds the inputs, in fixed batches, as floats.
#[test]
fn jsonl_texts_feed_fixed_batches() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "3"]);
    let dir = scratch();
    let lines: Vec<String> = (0..25)
        .map(|i| format!("{{\"prompt\": \"text number {i} to embed\"}}"))
        .collect();
    let data = write(dir.path(), "texts.jsonl", &lines.join("\n"));
    let dataset = format!("[dataset]\nkind = \"jsonl\"\npath = \"{}\"", data.display());
    let text = embeddings_scenario(&mock.url, &dataset, "batch_size = 4");
    let (r, j) = run_scenario(dir.path(), "jsonl", &text, "2", &[], LIMIT);
    assert_ok(&r);
    assert_eq!(j["failed"].as_u64(), Some(0), "{}", r.stdout);
    check_figures(&j);
    let (requests, inputs, tokens) = served(&mock);
    assert_eq!(requests, 60);
    assert!(inputs.iter().all(|n| *n == 4), "{inputs:?}");
    assert_eq!(j["cicada"]["pooling"]["items"].as_u64(), Some(240));
    assert_eq!(mock.stats()["inputs"].as_u64(), Some(240));
    // five words a text
    assert_eq!(tokens, 240 * 5);
    assert_eq!(j["total_input_tokens"].as_u64(), Some(tokens));
}
