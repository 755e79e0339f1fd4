//! Issue 26: LoRA traffic against a real llama.cpp `llama-server` serving the
//! tiny model with two tiny random-weight GGUF adapters
//! (`scripts/make_tiny_gguf_lora.py`, written by `scripts/llama-server.sh`)
//! loaded by `--lora a.gguf --lora b.gguf`. A `target.models` entry with
//! `lora_id = N` sends `"lora": [{"id": N, "scale": 1.0}]` with each of its
//! requests; an entry without one sends the first adapter at scale 0, which
//! turns every adapter off (llama-server gives the adapters a request leaves
//! out scale 0). Not one request fails, and the server's own records of its
//! tasks' adapters give the result's per-model split: each slot logs its
//! previous task's parameters, `lora` among them, as it takes the next
//! (`launching slot : {...}`, at `--verbose`), and `GET /slots` shows each
//! slot's last task.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test --workspace --test real_llamacpp_lora`.

use std::collections::BTreeMap;
use std::time::Duration;

use cicada_tests::servers::{LlamaServer, install};
use cicada_tests::*;
use serde_json::Value;

const SLOTS: u32 = 2;
const REQUESTS: u64 = 40;
const LIMIT: Duration = Duration::from_secs(600);

/// The adapter a slot's record of one task applied (the one id with a
/// scale above 0, or `base` when none has one), and that task's id; `None`
/// for a slot that has run no task yet.
fn task_adapter(slot: &Value) -> Option<(u64, String)> {
    let params = slot.get("params")?;
    let id = slot["id_task"].as_u64()?;
    let on: Vec<u64> = params["lora"]
        .as_array()
        .unwrap_or_else(|| panic!("no params.lora in {slot}"))
        .iter()
        .filter(|l| l["scale"].as_f64().unwrap_or(0.0) > 0.0)
        .filter_map(|l| l["id"].as_u64())
        .collect();
    let name = match on.as_slice() {
        [] => "base".to_string(),
        [id] => format!("adapter-{id}"),
        more => panic!("task {id} applied several adapters {more:?}"),
    };
    Some((id, name))
}

/// Which adapter each task the server ran applied, counted, by the server's
/// own records of its slots: a slot logs its previous task (`launching slot
/// : {...}` at `--verbose`, with that task's `params.lora`) as it takes the
/// next, and `GET /slots` shows each slot's last one.
fn server_split(log: &str, slots: &Value) -> BTreeMap<String, u64> {
    let mut tasks = BTreeMap::new();
    for line in log.lines() {
        let Some((_, slot)) = line.split_once("launching slot : ") else {
            continue;
        };
        let slot: Value = serde_json::from_str(slot.trim())
            .unwrap_or_else(|e| panic!("a launching slot line that is not JSON ({e}): {line}"));
        tasks.extend(task_adapter(&slot));
    }
    for slot in slots
        .as_array()
        .unwrap_or_else(|| panic!("/slots: {slots}"))
    {
        tasks.extend(task_adapter(slot));
    }
    let mut split = BTreeMap::new();
    for name in tasks.into_values() {
        *split.entry(name).or_insert(0) += 1;
    }
    split
}

/// The base model and two adapters by weight 1:2:1 over llama.cpp's native
/// `/completion`: every request answered, and each model's share of them
/// ran with its adapter, by the server's own record.
#[test]
fn base_and_two_adapters_split_as_the_server_applied_them() {
    let _g = serial();
    let dir_install = install("llama-server.sh");
    let models = dir_install.join("models");
    let [a, b] = ["lora-v1-a.gguf", "lora-v1-b.gguf"].map(|f| models.join(f));
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    let server = LlamaServer::start_with(SLOTS, 512, &["--lora", &a, "--lora", &b, "--verbose"]);
    // the server lists the adapters in --lora order: their ids are 0 and 1
    let (status, listed) = get_text(&format!("{}/lora-adapters", server.url));
    assert_eq!(status, 200, "{listed}");
    let listed: Value = serde_json::from_str(&listed).unwrap_or(Value::Null);
    assert_eq!(listed[0]["id"], 0, "{listed}");
    assert_eq!(listed[1]["id"], 1, "{listed}");
    let dir = scratch();
    // no readiness probe: the server's log holds the run's tasks alone
    let text = format!(
        r#"
name = "llama-lora"
seed = 23
[target]
backend = "llamacpp"
base_url = "{url}"
models = [{{ name = "base" }}, {{ name = "a", weight = 2, lora_id = 0 }}, {{ name = "b", lora_id = 1 }}]
ready_timeout = "0s"
[tokenizer]
source = "{tok}"
[dataset]
kind = "random"
input_len = 32
output_len = 8
range_ratio = 0.5
[sampling]
ignore_eos = true
[load]
num_prompts = {REQUESTS}
max_concurrency = {SLOTS}
"#,
        url = server.url,
        tok = server.tokenizer.display()
    );
    let (r, j) = run_scenario(dir.path(), "lora", &text, "2", &[], LIMIT);
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        r.stdout,
        r.stderr,
        server.log()
    );
    let outcomes = &j["cicada"]["outcomes"];
    assert_eq!(j["completed"].as_u64(), Some(REQUESTS), "{outcomes}");
    assert_eq!(j["failed"].as_u64(), Some(0), "{outcomes}");

    // a verbose log quotes token pieces, not always whole UTF-8 characters
    let log = std::fs::read(server.log_path()).unwrap_or_default();
    let log = String::from_utf8_lossy(&log);
    let (status, slots) = get_text(&format!("{}/slots", server.url));
    assert_eq!(status, 200, "{slots}");
    let slots: Value = serde_json::from_str(&slots).unwrap_or(Value::Null);
    let served = server_split(&log, &slots);
    let result: BTreeMap<String, u64> = j["cicada"]["models"]
        .as_array()
        .unwrap_or_else(|| panic!("no cicada.models: {}", j["cicada"]))
        .iter()
        .map(|m| {
            let name = match m["name"].as_str() {
                Some("a") => "adapter-0",
                Some("b") => "adapter-1",
                _ => "base",
            };
            (name.to_string(), m["completed"].as_u64().unwrap_or(0))
        })
        .collect();
    assert_eq!(result, served, "the result's split is the server's");
    assert_eq!(served.len(), 3, "base and both adapters ran: {served:?}");
    assert_eq!(served.values().sum::<u64>(), REQUESTS);
    // each model's tokens add up to the run's
    for key in ["total_output_tokens", "total_input_tokens", "failed"] {
        let sum: u64 = j["cicada"]["models"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| m[key].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(j[key].as_u64(), Some(sum), "{key} per model");
    }
}
