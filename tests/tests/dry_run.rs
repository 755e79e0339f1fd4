//! Issue 39, item 3: `cicada run --dry-run` builds the dataset and plans as
//! the run would and describes them, sending nothing: the mock's request
//! log stays empty, and the description's figures (requests, token totals,
//! each worker's share) are the real run's own counts of the same scenario.

use std::collections::BTreeMap;
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

fn scenario(url: &str) -> String {
    // lengths drawn ±50 %, and fewer prompts than requests: they cycle
    format!(
        "seed = 21\n[target]\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"cicada-mock\"\n\
         [sampling]\nignore_eos = true\n\
         [dataset]\nkind = \"random\"\ninput_len = 60\nrange_ratio = 0.5\noutput_len = 6\n\
         [load]\nnum_prompts = 45\npool_size = 20\nrequest_rate = 300\n"
    )
}

#[test]
fn a_dry_run_sends_nothing_and_foretells_the_runs_counts() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
    let sc = write(dir.path(), "dry.toml", &scenario(&mock.url));
    let sc = sc.to_str().unwrap();
    let dry = coord_run(&["run", sc, "--workers", "3", "--dry-run", "--json"], LIMIT);
    assert_ok(&dry);
    let d: Value = serde_json::from_str(&dry.stdout).expect("--json prints JSON");
    let text = coord_run(&["run", sc, "--workers", "3", "--dry-run"], LIMIT);
    assert_ok(&text);
    assert!(text.stdout.contains("nothing sent"), "{}", text.stdout);
    // `cicada web` takes the run's flags: its dry run is the same and starts no UI
    let web = coord_run(&["web", sc, "--workers", "3", "--dry-run", "--json"], LIMIT);
    assert_ok(&web);
    let w: Value = serde_json::from_str(&web.stdout).expect("--json prints JSON");
    assert_eq!(
        w, d,
        "cicada web --dry-run describes what cicada run --dry-run does"
    );
    assert!(mock.requests().is_empty(), "a dry run sent requests");
    assert_eq!(mock.stats()["requests"], 0, "{}", mock.stats());
    assert_eq!(d["requests"], 45);
    assert_eq!(d["pool_size"], 20);
    assert_eq!(d["samples"].as_array().unwrap().len(), 2);

    let out = dir.path().join("out");
    let r = coord_run(
        &[
            "run",
            sc,
            "--workers",
            "3",
            "--output-dir",
            out.to_str().unwrap(),
            "--save-detailed",
            "--quiet",
        ],
        LIMIT,
    );
    assert_ok(&r);
    let j = read_json(&out.join("result.json"));
    assert_eq!(j["completed"], d["requests"]);
    assert_eq!(j["total_input_tokens"], d["input_tokens"]["total"]);
    assert_eq!(j["total_output_tokens"], d["output_tokens"]["total"]);
    // each worker's share: its requests and their input tokens
    let mut shares: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for line in std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
    {
        let v: Value = serde_json::from_str(line).unwrap();
        if v.get("index").is_none() {
            continue;
        }
        let s = shares.entry(v["worker"].as_u64().unwrap()).or_default();
        s.0 += 1;
        s.1 += v["input_tokens"].as_u64().unwrap();
    }
    let foretold: BTreeMap<u64, (u64, u64)> = d["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["worker"].as_u64().unwrap(),
                (
                    w["requests"].as_u64().unwrap(),
                    w["input_tokens"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(shares, foretold);
    // the spread is over the requests the run sent
    let mut inputs: Vec<u64> = Vec::new();
    for line in std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
    {
        let v: Value = serde_json::from_str(line).unwrap();
        if let Some(n) = v.get("input_tokens").and_then(Value::as_u64) {
            inputs.push(n);
        }
    }
    assert_eq!(d["input_tokens"]["min"], *inputs.iter().min().unwrap());
    assert_eq!(d["input_tokens"]["max"], *inputs.iter().max().unwrap());
}
