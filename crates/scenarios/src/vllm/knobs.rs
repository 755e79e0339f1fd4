//! Each group of `vllm bench serve` flags as the knobs it sets: where the
//! requests go, the workload, how fast, and what to write.

use crate::error::ScenarioError;
use crate::overlay::{Knob, Overlay};
use crate::scenario::Backend;

use super::{VllmFlags, bad};

/// `"a,b"` -> `["a", "b"]`.
fn string_list(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `"25,50,99"` -> `[25.0, 50.0, 99.0]`, naming the flag when a number is bad.
fn number_list(flag: &str, raw: &str) -> Result<Vec<f64>, ScenarioError> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<f64>()
                .map_err(|_| bad(format!("--{flag} {raw}: \"{s}\" is not a number")))
        })
        .collect()
}

/// Where the requests go: URL (or host and port), route, model, tokenizer, readiness.
pub(super) fn target(
    out: &mut Overlay,
    f: &VllmFlags,
    has_scenario: bool,
    backend: Option<Backend>,
) {
    let base_url = match (&f.base_url, &f.host, f.port) {
        (Some(url), _, _) => Some(url.clone()),
        (None, None, None) if has_scenario || backend == Some(Backend::Mock) => None,
        (None, host, port) => Some(format!(
            "http://{}:{}",
            host.as_deref().unwrap_or("127.0.0.1"),
            port.unwrap_or(8000)
        )),
    };
    if let Some(url) = base_url {
        let flag = if f.base_url.is_some() {
            "base-url"
        } else {
            "host/--port"
        };
        out.set(flag, Knob::BaseUrl(url));
    }
    out.set_some("endpoint", f.endpoint.clone().map(Knob::Endpoint));
    if f.lora_modules.is_empty() {
        out.set_some("model", f.model.clone().map(Knob::Model));
    } else {
        // vLLM's --model is then the base model: requests name the adapters
        let names = f
            .lora_modules
            .iter()
            .map(|m| m.split_once('=').map_or(m.as_str(), |(n, _)| n).trim())
            .map(str::to_string)
            .collect();
        out.set("lora-modules", Knob::Models(names));
    }
    out.set_some(
        "lora-assignment",
        f.lora_assignment
            .as_deref()
            .map(|a| Knob::ModelAssignment(a.trim().replace('-', "_"))),
    );
    out.set_some("tokenizer", f.tokenizer.clone().map(Knob::Tokenizer));
    out.set_some(
        "ready-check-timeout-sec",
        f.ready_check_timeout_sec.map(Knob::ReadyTimeoutSecs),
    );
}

/// The workload: kind, file, and the random dataset's lengths.
pub(super) fn dataset(out: &mut Overlay, f: &VllmFlags) {
    out.set_some(
        "dataset-name",
        f.dataset_name.clone().map(Knob::DatasetKind),
    );
    out.set_some(
        "dataset-path",
        f.dataset_path.clone().map(Knob::DatasetPath),
    );
    out.set_some("random-input-len", f.random_input_len.map(Knob::InputLen));
    out.set_some(
        "random-output-len",
        f.random_output_len.map(Knob::OutputLen),
    );
    out.set_some(
        "random-prefix-len",
        f.random_prefix_len.map(Knob::PrefixLen),
    );
    out.set_some(
        "random-range-ratio",
        f.random_range_ratio.map(Knob::RangeRatio),
    );
    if f.prompt_token_ids {
        out.set("prompt-token-ids", Knob::PromptTokenIds(true));
    }
    out.set_some(
        "random-mm-base-items-per-request",
        f.random_mm_base_items_per_request.map(Knob::MmBaseItems),
    );
    out.set_some(
        "random-mm-num-mm-items-range-ratio",
        f.random_mm_num_mm_items_range_ratio
            .map(Knob::MmItemsRangeRatio),
    );
}

/// vllm-bench's `--multi-turn` and its knobs: synthetic sessions with the
/// random dataset, ShareGPT's conversations with sharegpt.
pub(super) fn multi_turn(out: &mut Overlay, f: &VllmFlags) -> Result<(), ScenarioError> {
    let m = &f.multi_turn;
    let given = m.num_turns.is_some()
        || m.min_turns.is_some()
        || m.max_turns.is_some()
        || m.concurrency.is_some()
        || m.delay_ms.is_some()
        || m.per_turn_input_len.is_some();
    if !m.enabled {
        if given {
            return Err(bad(
                "--multi-turn-* and --per-turn-input-len apply with --multi-turn".to_string(),
            ));
        }
        return Ok(());
    }
    // 0 means "not given" for vllm-bench's turn bounds and per-turn length
    let nonzero = |v: Option<u32>| v.filter(|n| *n > 0);
    match f.dataset_name.as_deref() {
        None | Some("random") => {
            out.set("multi-turn", Knob::DatasetKind("multi_turn".into()));
            out.set_some("multi-turn-num-turns", m.num_turns.map(Knob::Turns));
            out.set_some(
                "multi-turn-min-turns",
                nonzero(m.min_turns).map(Knob::MinTurns),
            );
            out.set_some(
                "multi-turn-max-turns",
                nonzero(m.max_turns).map(Knob::MaxTurns),
            );
            out.set_some(
                "per-turn-input-len",
                nonzero(m.per_turn_input_len).map(Knob::PerTurnInputLen),
            );
        }
        Some("sharegpt") => {
            out.set("multi-turn", Knob::DatasetKind("conversations".into()));
            out.set_some(
                "multi-turn-max-turns",
                nonzero(m.max_turns).map(Knob::MaxTurns),
            );
        }
        Some(other) => {
            return Err(bad(format!(
                "--multi-turn takes --dataset-name random (synthetic sessions) or sharegpt (its conversations), not {other}"
            )));
        }
    }
    out.set_some(
        "multi-turn-concurrency",
        m.concurrency.map(Knob::MaxConcurrency),
    );
    out.set_some("multi-turn-delay-ms", m.delay_ms.map(Knob::ThinkTimeMs));
    // vllm-bench names every turn's session for a router
    out.set("multi-turn", Knob::SessionHeader("X-Session-ID".into()));
    Ok(())
}

/// `--random-mm-limit-mm-per-prompt '{"image": 3, "video": 0}'`.
pub(super) fn mm_limits(text: &str) -> Result<Knob, ScenarioError> {
    let v: std::collections::BTreeMap<String, u32> = serde_json::from_str(text).map_err(|e| {
        bad(format!(
            "--random-mm-limit-mm-per-prompt {text}: not a JSON object of counts ({e})"
        ))
    })?;
    Ok(Knob::MmLimits(v.into_iter().collect()))
}

/// `--random-mm-bucket-config '{(256, 256, 1): 0.5, (720, 1280, 1): 0.5}'`
/// (vLLM's Python literal: (height, width, frames) -> probability).
pub(super) fn mm_buckets(text: &str) -> Result<Knob, ScenarioError> {
    let fail = || {
        bad(format!(
            "--random-mm-bucket-config {text}: expected {{(height, width, frames): probability, ...}}"
        ))
    };
    let body = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(fail)?;
    let mut out = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (key, after) = rest
            .strip_prefix('(')
            .and_then(|r| r.split_once(')'))
            .ok_or_else(fail)?;
        let dims: Vec<u32> = key
            .split(',')
            .map(|d| d.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| fail())?;
        let [h, w, frames] = dims[..] else {
            return Err(fail());
        };
        let after = after.trim_start().strip_prefix(':').ok_or_else(fail)?;
        let (p, next) = after.split_once(',').unwrap_or((after, ""));
        let p: f64 = p.trim().parse().map_err(|_| fail())?;
        out.push((h, w, frames, p));
        rest = next.trim();
    }
    Ok(Knob::MmBuckets(out))
}

/// How fast: count, rate, burstiness, concurrency, seed.
pub(super) fn load(out: &mut Overlay, f: &VllmFlags) {
    out.set_some("num-prompts", f.num_prompts.map(Knob::NumPrompts));
    out.set_some(
        "request-rate",
        f.request_rate.clone().map(Knob::RequestRate),
    );
    out.set_some("burstiness", f.burstiness.map(Knob::Burstiness));
    out.set_some(
        "max-concurrency",
        f.max_concurrency.map(Knob::MaxConcurrency),
    );
    out.set_some("seed", f.seed.map(Knob::Seed));
}

/// What to write and where.
pub(super) fn output(out: &mut Overlay, f: &VllmFlags) -> Result<(), ScenarioError> {
    out.set_some("result-dir", f.result_dir.clone().map(Knob::ResultDir));
    out.set_some(
        "result-filename",
        f.result_filename.clone().map(Knob::ResultFilename),
    );
    if f.save_detailed {
        out.set("save-detailed", Knob::SaveDetailed(true));
    }
    out.set_some(
        "percentile-metrics",
        f.percentile_metrics
            .as_deref()
            .map(|raw| Knob::PercentileMetrics(string_list(raw))),
    );
    if let Some(v) = &f.metric_percentiles {
        out.set(
            "metric-percentiles",
            Knob::MetricPercentiles(number_list("metric-percentiles", v)?),
        );
    }
    Ok(())
}
