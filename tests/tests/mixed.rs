//! Mixed traffic (issue 37, item 5): `[[workloads]]` splits one run's
//! requests over weighted workloads, each with its own dataset, target
//! model/backend/endpoint, sampling and SLO. The mock's request log is the
//! ground truth: each request has its workload's shape, model and route, the
//! split follows the weights, 1 and 2 workers send the same requests, and
//! every output's per-workload figures add up to the run's. Bad workloads
//! name file, line and key and send nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);
const REQUESTS: u64 = 600;

/// 70 % short chat (a generous SLO), 20 % long prompts (an SLO no request
/// can meet), 10 % another model over the completions API (no SLO).
fn scenario(mock_url: &str) -> String {
    format!(
        r#"
name = "mixed"
seed = 7
[target]
backend = "openai-chat"
base_url = "{mock_url}"
model = "chat-model"
[dataset]
kind = "random"
input_len = 8
output_len = 4
[load]
num_prompts = {REQUESTS}
request_rate = "inf"
max_concurrency = 32

[[workloads]]
name = "chat"
weight = 7
[workloads.slo]
ttft_ms = 60000

[[workloads]]
name = "rag"
weight = 2
[workloads.dataset]
kind = "random"
input_len = 300
output_len = 12
[workloads.slo]
ttft_ms = 0.001

[[workloads]]
name = "complete"
weight = 1
[workloads.target]
backend = "openai"
model = "other-model"
[workloads.dataset]
kind = "random"
input_len = 40
output_len = 6
[workloads.sampling]
temperature = 0.5
"#
    )
}

/// One request as the mock saw it: (path, model, prompt tokens, max_tokens).
type Seen = (String, String, u64, u64);

/// Every request the mock logged, by its global index (from the request id
/// `cicada-<run>-<index>`).
fn seen(mock: &Mock) -> BTreeMap<u64, Seen> {
    mock.requests()
        .iter()
        .map(|r| {
            let id = r["request_id"].as_str().unwrap();
            let index: u64 = id.rsplit('-').next().unwrap().parse().unwrap();
            let s = (
                r["path"].as_str().unwrap().to_string(),
                r["model"].as_str().unwrap_or_default().to_string(),
                r["prompt_tokens"].as_u64().unwrap(),
                r["max_tokens"].as_u64().unwrap(),
            );
            (index, s)
        })
        .collect()
}

/// The workload a logged request belongs to, by its shape; panics on a
/// request that has no workload's shape.
fn workload_of(s: &Seen) -> &'static str {
    match (s.0.as_str(), s.1.as_str(), s.2, s.3) {
        ("/v1/chat/completions", "chat-model", 8, 4) => "chat",
        ("/v1/chat/completions", "chat-model", 300, 12) => "rag",
        ("/v1/completions", "other-model", 40, 6) => "complete",
        _ => panic!("a request of no workload's shape: {s:?}"),
    }
}

/// The result's `cicada.workloads`, by name.
fn result_workloads(j: &Value) -> BTreeMap<String, Value> {
    j["cicada"]["workloads"]
        .as_array()
        .expect("cicada.workloads")
        .iter()
        .map(|w| (w["name"].as_str().unwrap().to_string(), w.clone()))
        .collect()
}

struct Mixed {
    seen: BTreeMap<u64, Seen>,
    result: Value,
    csv: (Vec<String>, Vec<Vec<String>>),
    html: String,
    stdout: String,
}

fn run(workers: &str) -> Mixed {
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let (r, result) = run_scenario(
        dir.path(),
        "mixed",
        &scenario(&mock.url),
        workers,
        &[],
        LIMIT,
    );
    assert_ok(&r);
    let out = dir.path().join("out-mixed");
    Mixed {
        seen: seen(&mock),
        result,
        csv: read_csv(&out.join("summary.csv")),
        html: std::fs::read_to_string(out.join("report.html")).unwrap(),
        stdout: r.stdout,
    }
}

/// Requests per workload, as the mock saw them.
fn split(seen: &BTreeMap<u64, Seen>) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for s in seen.values() {
        *out.entry(workload_of(s)).or_default() += 1;
    }
    out
}

/// result.json's per-workload figures are the mock's counts and add up to
/// the run's; each workload's goodput is judged against its own SLO.
fn check_result(m: &Mixed) {
    let j = &m.result;
    let w = result_workloads(j);
    let names: Vec<&str> = w.keys().map(String::as_str).collect();
    assert_eq!(names, ["chat", "complete", "rag"]);
    for (name, n) in split(&m.seen) {
        assert_eq!(
            w[name]["sent"].as_u64(),
            Some(n),
            "{name}: the mock's count"
        );
        assert_eq!(w[name]["completed"].as_u64(), Some(n), "{name}");
    }
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
    ] {
        let sum: u64 = w.values().map(|x| x[key].as_u64().unwrap()).sum();
        assert_eq!(
            Some(sum),
            j[key].as_u64(),
            "{key} per workload sums to the total"
        );
    }
    let sent: u64 = w.values().map(|x| x["sent"].as_u64().unwrap()).sum();
    assert_eq!(Some(sent), j["cicada"]["sent"].as_u64());
    for metric in ["ttft", "itl", "e2el"] {
        let n: u64 = w
            .values()
            .map(|x| x["metrics"][metric]["count"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(
            Some(n),
            j["cicada"]["metrics"][metric]["count"].as_u64(),
            "every {metric} sample is in exactly one workload's"
        );
    }
    // each workload's own lengths: its mean input tokens are its dataset's
    let per_request = |name: &str| {
        w[name]["total_input_tokens"].as_u64().unwrap() as f64
            / w[name]["completed"].as_u64().unwrap() as f64
    };
    assert_eq!(per_request("rag"), 300.0);
    assert_eq!(per_request("complete"), 40.0);
    // goodput against each workload's own SLO: all of chat's, none of rag's,
    // none reported for the workload without an SLO
    let chat = &w["chat"];
    let goodput = chat["request_goodput"].as_f64().unwrap();
    let throughput = chat["request_throughput"].as_f64().unwrap();
    assert!((goodput - throughput).abs() < 1e-9, "{chat}");
    assert_eq!(w["rag"]["request_goodput"].as_f64(), Some(0.0));
    assert!(w["complete"]["request_goodput"].is_null());
    let run_goodput = j["request_goodput"].as_f64().unwrap();
    assert!((run_goodput - goodput).abs() < 1e-9, "the run's is the sum");
}

/// summary.csv: a `workload:<name>` row per workload, whose counts add up
/// to the run's row.
fn check_csv(m: &Mixed) {
    let (header, rows) = &m.csv;
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (target, completed, input) = (col("target"), col("completed"), col("total_input_tokens"));
    let labels: Vec<&str> = rows.iter().map(|r| r[target].as_str()).collect();
    assert_eq!(
        labels,
        ["all", "workload:chat", "workload:rag", "workload:complete"]
    );
    for c in [completed, input] {
        let n = |r: &Vec<String>| r[c].parse::<u64>().unwrap();
        let sum: u64 = rows[1..].iter().map(n).sum();
        assert_eq!(sum, n(&rows[0]), "summary.csv column {}", header[c]);
    }
}

#[test]
fn a_weighted_mix_sends_each_workload_its_own_requests_for_any_worker_count() {
    let _g = serial();
    let one = run("1");
    let two = run("2");
    assert_eq!(one.seen.len() as u64, REQUESTS);
    assert_eq!(
        one.seen, two.seen,
        "1 and 2 workers send the same requests, each index the same"
    );
    // the split follows the weights: binomial, 5 standard deviations
    let n = REQUESTS as f64;
    let got = split(&one.seen);
    for (name, p) in [("chat", 0.7), ("rag", 0.2), ("complete", 0.1)] {
        let k = got[name] as f64;
        let bound = 5.0 * (n * p * (1.0 - p)).sqrt();
        assert!(
            (k - n * p).abs() <= bound,
            "{name}: {k} of {n}, expected {} ± {bound:.1}",
            n * p
        );
    }
    for m in [&one, &two] {
        check_result(m);
        check_csv(m);
        assert!(m.stdout.contains("Per workload (3)"), "{}", m.stdout);
        assert!(m.html.contains("<h2>Per workload</h2>"));
        for name in ["chat", "rag", "complete"] {
            assert!(m.html.contains(&format!("<td class=\"l\">{name}</td>")));
        }
    }
}

#[test]
fn bad_workloads_name_file_line_and_key_and_send_nothing() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
    let dir = scratch();
    let good = scenario(&mock.url);
    let cases = [
        (
            good.replace("name = \"rag\"", "name = \"chat\""),
            ":24: `workloads[1].name`: duplicate workload name \"chat\" (also workloads[0])",
        ),
        (
            good.replace("weight = 2", "weight = 0"),
            ":25: `workloads[1].weight`: must be above 0, got 0",
        ),
        (
            good.replace("weight = 1\n", "weight = -1\n"),
            ":35: `workloads[2].weight`: must be above 0, got -1",
        ),
        (
            good.replace("model = \"other-model\"", "modle = \"other-model\""),
            ":38: `workloads[2].target.modle`: unknown key",
        ),
        (
            good.replace("input_len = 300", "input_len = 0"),
            ":28: `workloads[1].dataset.input_len`:",
        ),
        (
            good.replace("temperature = 0.5", "temperature = 0.5\nbest_of = 2"),
            ":45: `workloads[2].sampling.best_of`: unknown key",
        ),
    ];
    for (i, (text, expect)) in cases.iter().enumerate() {
        let name = format!("bad{i}");
        let (run, result) = run_scenario(dir.path(), &name, text, "2", &[], LIMIT);
        assert_ne!(run.code, Some(0), "{expect}: the run did not fail");
        assert!(result.is_null(), "{expect}: a result was written");
        let file = dir.path().join(format!("{name}.toml"));
        let want = format!("{}{expect}", file.display());
        assert!(run.stderr.contains(&want), "want {want}\n{}", run.stderr);
    }
    assert_eq!(
        mock.stats()["requests"].as_u64(),
        Some(0),
        "a request was sent"
    );
}
