//! `vllm bench serve`'s everyday flags on `cicada run`, so a user can switch
//! without writing a scenario file. The flags become a typed overlay on the
//! scenario ([`Overlay`] of [`Knob`]s): it applies over the scenario file (or
//! over the defaults when there is none), and `--set` applies over both.
//! Problems are reported against the flag the user typed.

mod knobs;

use std::path::{Path, PathBuf};

use crate::error::ScenarioError;
use crate::load::{LoadedScenario, Setting};
use crate::overlay::{self, Knob, Overlay, SloBound};
use crate::scenario::Backend;
use knobs::{dataset, load, mm_buckets, mm_limits, output, target};

/// A flag's text that cannot be read, as the error naming it.
fn bad(message: String) -> ScenarioError {
    ScenarioError::Flag(message)
}

/// The `vllm bench serve` flags `cicada run` understands.
#[derive(Debug, Clone, Default)]
pub struct VllmFlags {
    /// Serving API (vLLM's names work too: llama.cpp, tensorrt-llm, ...).
    pub backend: Option<String>,
    /// Server base URL, with any path prefix (default http://HOST:PORT).
    pub base_url: Option<String>,
    /// Server host when no --base-url is given.
    pub host: Option<String>,
    /// Server port when no --base-url is given.
    pub port: Option<u16>,
    /// Route appended to the base URL.
    pub endpoint: Option<String>,
    /// Model id (default: the first one the server lists).
    pub model: Option<String>,
    /// LoRA adapters the requests split over, as vLLM's server lists them
    /// (NAME or NAME=PATH; the names become target.models, equal weights).
    pub lora_modules: Vec<String>,
    /// How requests pick an adapter: random or round-robin.
    pub lora_assignment: Option<String>,
    /// Tokenizer: a tokenizer.json, a model directory or a cached hub id.
    pub tokenizer: Option<String>,
    /// Dataset kind.
    pub dataset_name: Option<String>,
    /// Dataset file.
    pub dataset_path: Option<PathBuf>,
    /// Requests in the run.
    pub num_prompts: Option<u64>,
    /// Mean arrival rate (req/s) or "inf".
    pub request_rate: Option<String>,
    /// Gamma shape of arrival gaps (1 = Poisson).
    pub burstiness: Option<f64>,
    /// Most requests in flight at once.
    pub max_concurrency: Option<u32>,
    /// Seed for sampling and arrivals.
    pub seed: Option<u64>,
    /// Generate past end-of-sequence up to the asked length.
    pub ignore_eos: bool,
    /// Metrics with printed percentiles, comma-separated (ttft,tpot,itl,e2el,...).
    pub percentile_metrics: Option<String>,
    /// Percentiles to print, comma-separated (e.g. 25,50,99).
    pub metric_percentiles: Option<String>,
    /// Accepted for compatibility: cicada always saves result.json.
    pub save_result: bool,
    /// Also write every request's record to requests.jsonl (output.save_detailed).
    pub save_detailed: bool,
    /// Directory for the result files (output.dir).
    pub result_dir: Option<PathBuf>,
    /// File name of the JSON result (output.result_filename).
    pub result_filename: Option<String>,
    /// random dataset: prompt length in tokens.
    pub random_input_len: Option<u32>,
    /// random dataset: output length in tokens.
    pub random_output_len: Option<u32>,
    /// random dataset: lengths vary within ± this ratio.
    pub random_range_ratio: Option<f64>,
    /// random dataset: tokens of a shared prefix.
    pub random_prefix_len: Option<u32>,
    /// random dataset: send prompts as token ids (vllm-bench's `--prompt-token-ids`).
    pub prompt_token_ids: bool,
    /// random-mm dataset: images per request, about.
    pub random_mm_base_items_per_request: Option<u32>,
    /// random-mm dataset: image counts vary within ± this ratio.
    pub random_mm_num_mm_items_range_ratio: Option<f64>,
    /// random-mm dataset: most items per request by modality, as JSON ('{"image": 3}').
    pub random_mm_limit_mm_per_prompt: Option<String>,
    /// random-mm dataset: image sizes and weights, vLLM's '{(H, W, 1): p, ...}'.
    pub random_mm_bucket_config: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Top-k sampling.
    pub top_k: Option<i64>,
    /// Extra request header KEY=VALUE (repeatable).
    pub headers: Vec<String>,
    /// Seconds to wait for the server to be ready (0 skips the check).
    pub ready_check_timeout_sec: Option<u64>,
    /// vllm-bench's multi-turn flags.
    pub multi_turn: MultiTurnFlags,
}

/// vllm-bench's multi-turn flags (`vllm-project/vllm-bench`'s README, "CLI
/// Reference", "Multi-turn conversation benchmark"): `--num-prompts` then
/// counts sessions, and every turn carries `X-Session-ID`.
#[derive(Debug, Clone, Default)]
pub struct MultiTurnFlags {
    /// `--multi-turn`: sessions instead of single requests.
    pub enabled: bool,
    /// `--multi-turn-num-turns`: turns per session.
    pub num_turns: Option<u32>,
    /// `--multi-turn-min-turns` (0: the number of turns).
    pub min_turns: Option<u32>,
    /// `--multi-turn-max-turns` (0: the number of turns; ShareGPT: uncapped).
    pub max_turns: Option<u32>,
    /// `--multi-turn-concurrency`: sessions in flight.
    pub concurrency: Option<u32>,
    /// `--multi-turn-delay-ms`: pause between turns.
    pub delay_ms: Option<u64>,
    /// `--per-turn-input-len`: tokens each later turn adds (0: the first turn's).
    pub per_turn_input_len: Option<u32>,
}

/// A backend name as `vllm bench serve` or a scenario file spells it.
fn backend_of(name: &str) -> Result<Backend, ScenarioError> {
    if let Some(b) = Backend::from_name(name) {
        return Ok(b);
    }
    Ok(match name {
        "llama.cpp" => Backend::LlamacppCompletions,
        "tensorrt-llm" => Backend::Triton,
        "vllm-chat" => Backend::VllmChat,
        "lmdeploy" | "scalellm" => Backend::Openai,
        _ => {
            let ours: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
            return Err(bad(format!(
                "--backend {name}: unknown backend; expected one of {} (or vLLM's llama.cpp, tensorrt-llm, lmdeploy, scalellm)",
                ours.join(", ")
            )));
        }
    })
}

/// A backend name's scenario spelling (for tests of vLLM's names).
#[cfg(test)]
fn backend_name(name: &str) -> Result<&'static str, ScenarioError> {
    backend_of(name).map(Backend::name)
}

/// The flags as a typed overlay on the scenario, each knob blamed on its
/// flag; applied over the scenario file (or over the defaults when there is
/// none).
pub fn overlay(f: &VllmFlags, has_scenario: bool) -> Result<Overlay, ScenarioError> {
    let mut out = Overlay::default();
    let backend = match &f.backend {
        Some(b) => Some(backend_of(b)?),
        // sessions send messages arrays (vllm-bench asks for openai-chat)
        None if !has_scenario && f.multi_turn.enabled => Some(Backend::OpenaiChat),
        // without a file, vLLM's default: OpenAI completions
        None if !has_scenario => Some(Backend::Openai),
        None => None,
    };
    out.set_some("backend", backend.map(Knob::Backend));
    target(&mut out, f, has_scenario, backend);
    dataset(&mut out, f);
    if let Some(t) = &f.random_mm_limit_mm_per_prompt {
        out.set("random-mm-limit-mm-per-prompt", mm_limits(t)?);
    }
    if let Some(t) = &f.random_mm_bucket_config {
        out.set("random-mm-bucket-config", mm_buckets(t)?);
    }
    load(&mut out, f);
    // after the load: sessions in flight win over --max-concurrency
    knobs::multi_turn(&mut out, f)?;
    output(&mut out, f)?;
    if f.ignore_eos {
        out.set("ignore-eos", Knob::IgnoreEos(true));
    }
    out.set_some("temperature", f.temperature.map(Knob::Temperature));
    out.set_some("top-p", f.top_p.map(Knob::TopP));
    out.set_some("top-k", f.top_k.map(Knob::TopK));
    for h in &f.headers {
        let (k, v) = h
            .split_once('=')
            .ok_or_else(|| bad(format!("--header {h}: expected KEY=VALUE")))?;
        let k = k.trim();
        if k.is_empty() || k.contains('.') {
            return Err(bad(format!(
                "--header {h}: the header name must be non-empty and without dots"
            )));
        }
        out.set("header", Knob::Header(k.to_string(), v.trim().to_string()));
    }
    Ok(out)
}

/// vLLM-style `--goodput ttft:500 tpot:50` as `[slo]` bounds.
pub fn goodput(specs: &[String]) -> Result<Overlay, ScenarioError> {
    let mut out = Overlay::default();
    for spec in specs {
        let (key, value) = spec.split_once(':').ok_or_else(|| {
            bad(format!(
                "--goodput {spec}: expected METRIC:MILLISECONDS, e.g. ttft:500"
            ))
        })?;
        let key = key.trim().to_ascii_lowercase();
        let bound = SloBound::from_name(&key).ok_or_else(|| {
            bad(format!(
                "--goodput {spec}: unknown metric \"{key}\"; expected ttft, tpot, e2el, itl or ttfa"
            ))
        })?;
        let ms: f64 = value.trim().parse().map_err(|_| {
            bad(format!(
                "--goodput {spec}: \"{value}\" is not a number of milliseconds"
            ))
        })?;
        out.set("goodput", Knob::Slo(bound, ms));
    }
    Ok(out)
}

/// The scenario of `cicada run`: an optional file, then (each over the
/// ones before) these flags, the `--set` overrides, `--goodput` and the gate
/// flags (`--max-failure-ratio`, `--min-slo-attainment`).
pub fn describe(
    file: Option<&Path>,
    flags: &VllmFlags,
    sets: &[String],
    goodput_specs: &[String],
    gates: (Option<f64>, Option<f64>),
) -> Result<LoadedScenario, ScenarioError> {
    describe_with(file, flags, sets, &[], goodput_specs, gates)
}

/// [`describe`] with typed `extra` settings after the `--set`s (the web
/// UI's start form: values, never text to parse again).
pub fn describe_with(
    file: Option<&Path>,
    flags: &VllmFlags,
    sets: &[String],
    extra: &[Setting],
    goodput_specs: &[String],
    (max_failure_ratio, min_attainment): (Option<f64>, Option<f64>),
) -> Result<LoadedScenario, ScenarioError> {
    let mut after = goodput(goodput_specs)?;
    let before = overlay(flags, file.is_some())?;
    after.set_some(
        "max-failure-ratio",
        max_failure_ratio.map(Knob::MaxFailureRatio),
    );
    after.set_some(
        "min-slo-attainment",
        min_attainment.map(Knob::MinSloAttainment),
    );
    overlay::describe(file, &before, sets, extra, &after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_plan::units::Rate;

    fn flags() -> VllmFlags {
        VllmFlags::default()
    }

    /// The scenario of flags and `--set`s alone.
    fn load_with_flags(
        file: Option<&Path>,
        f: &VllmFlags,
        sets: &[String],
    ) -> Result<LoadedScenario, ScenarioError> {
        describe(file, f, sets, &[], (None, None))
    }

    /// vLLM's random-mm flags, its JSON and Python-literal spellings included.
    #[test]
    fn random_mm_flags_set_the_dataset_keys() {
        let f = VllmFlags {
            backend: Some("openai-chat".into()),
            port: Some(9000),
            dataset_name: Some("random-mm".into()),
            random_input_len: Some(16),
            random_mm_base_items_per_request: Some(2),
            random_mm_num_mm_items_range_ratio: Some(0.5),
            random_mm_limit_mm_per_prompt: Some(r#"{"image": 3, "video": 0}"#.into()),
            random_mm_bucket_config: Some("{(256, 256, 1): 0.5, (720, 1280, 1): 0.4}".into()),
            ..flags()
        };
        let s = load_with_flags(None, &f, &[]).unwrap().scenario;
        let crate::scenario::Dataset::RandomMm(d) = &s.dataset else {
            panic!("a random-mm dataset: {:?}", s.dataset)
        };
        assert_eq!(
            (d.input_len.fixed(), d.base_items_per_request),
            (Some(16), 2)
        );
        assert_eq!(d.num_mm_items_range_ratio, 0.5);
        assert_eq!(
            (d.limit_mm_per_prompt.image, d.limit_mm_per_prompt.video),
            (3, 0)
        );
        let sizes: Vec<(u32, u32, f64)> = d
            .bucket_config
            .iter()
            .map(|b| (b.height, b.width, b.probability))
            .collect();
        assert_eq!(sizes, [(256, 256, 0.5), (720, 1280, 0.4)]);
        for bad in ["(256, 256, 1): 0.5", "{(256, 256): 0.5}", "{(1, 2, 3) 0.5}"] {
            let f = VllmFlags {
                random_mm_bucket_config: Some(bad.into()),
                ..flags()
            };
            assert!(overlay(&f, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn everyday_flags_make_a_scenario_without_a_file() {
        let f = VllmFlags {
            backend: Some("openai-chat".into()),
            port: Some(9000),
            model: Some("true".into()),
            dataset_name: Some("random".into()),
            num_prompts: Some(32),
            request_rate: Some("inf".into()),
            burstiness: Some(0.5),
            max_concurrency: Some(8),
            seed: Some(3),
            ignore_eos: true,
            save_detailed: true,
            percentile_metrics: Some("ttft, e2el".into()),
            metric_percentiles: Some("25,50,99.9".into()),
            result_dir: Some("out dir".into()),
            result_filename: Some("r.json".into()),
            random_input_len: Some(16),
            random_output_len: Some(4),
            headers: vec!["X-Team=perf".into()],
            ready_check_timeout_sec: Some(0),
            ..flags()
        };
        let s = load_with_flags(None, &f, &["load.burstiness=2".into()])
            .unwrap()
            .scenario;
        assert_eq!(s.target.backend, Backend::OpenaiChat);
        assert_eq!(s.target.base_url.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(
            s.target.model.as_deref(),
            Some("true"),
            "strings stay strings"
        );
        assert_eq!(s.load.num_prompts, Some(32));
        assert_eq!(s.load.request_rate, Rate::Infinite);
        assert_eq!(s.load.burstiness, 2.0, "--set wins over flags");
        assert_eq!(s.load.max_concurrency, Some(8));
        assert_eq!(s.seed, 3);
        assert_eq!(s.sampling.ignore_eos, Some(true));
        assert!(s.output.save_detailed);
        assert_eq!(s.output.percentile_metrics, vec!["ttft", "e2el"]);
        assert_eq!(s.output.metric_percentiles, vec![25.0, 50.0, 99.9]);
        assert_eq!(s.output.dir, PathBuf::from("out dir"));
        assert_eq!(s.output.result_filename, "r.json");
        let crate::scenario::Dataset::Random(d) = &s.dataset else {
            panic!("a random dataset: {:?}", s.dataset)
        };
        assert_eq!(
            (d.input_len.fixed(), d.output_len.fixed()),
            (Some(16), Some(4))
        );
        assert_eq!(s.target.headers["X-Team"], "perf");
        assert!(s.target.ready_timeout.get().is_zero());
    }

    /// vllm-bench's multi-turn flags: synthetic sessions with the random
    /// dataset (0 leaves a bound to the number of turns), ShareGPT's
    /// conversations with sharegpt, X-Session-ID on every turn.
    #[test]
    fn multi_turn_flags_set_the_session_keys() {
        let f = VllmFlags {
            port: Some(9000),
            random_input_len: Some(64),
            random_output_len: Some(8),
            max_concurrency: Some(99),
            multi_turn: MultiTurnFlags {
                enabled: true,
                num_turns: Some(5),
                min_turns: Some(2),
                max_turns: Some(0),
                concurrency: Some(4),
                delay_ms: Some(250),
                per_turn_input_len: Some(16),
            },
            ..flags()
        };
        let s = load_with_flags(None, &f, &[]).unwrap().scenario;
        assert_eq!(
            s.target.backend,
            Backend::OpenaiChat,
            "sessions send messages"
        );
        assert_eq!(s.target.session_header.as_deref(), Some("X-Session-ID"));
        assert_eq!(s.load.max_concurrency, Some(4), "sessions in flight win");
        let crate::scenario::Dataset::MultiTurn(d) = &s.dataset else {
            panic!("a multi_turn dataset: {:?}", s.dataset)
        };
        assert_eq!((d.turns, d.min_turns, d.max_turns), (5, Some(2), None));
        assert_eq!(d.turn_range(), (2, 5));
        assert_eq!(d.input_len.fixed(), Some(64));
        assert_eq!(
            d.per_turn_input_len.as_ref().and_then(|l| l.fixed()),
            Some(16)
        );
        assert_eq!(d.output_len.fixed(), Some(8));
        assert_eq!(d.think_time.get().as_millis(), 250);
        let share = VllmFlags {
            backend: Some("openai-chat".into()),
            dataset_name: Some("sharegpt".into()),
            dataset_path: Some("c.json".into()),
            multi_turn: MultiTurnFlags {
                enabled: true,
                max_turns: Some(3),
                ..MultiTurnFlags::default()
            },
            ..flags()
        };
        let s = load_with_flags(None, &share, &[]).unwrap().scenario;
        let crate::scenario::Dataset::Conversations(c) = &s.dataset else {
            panic!("conversations: {:?}", s.dataset)
        };
        assert_eq!(c.max_turns, Some(3));
        // the knobs without --multi-turn, or with another dataset, are refused
        let stray = VllmFlags {
            multi_turn: MultiTurnFlags {
                num_turns: Some(2),
                ..MultiTurnFlags::default()
            },
            ..flags()
        };
        let e = load_with_flags(None, &stray, &[])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("apply with --multi-turn"), "{e}");
        let sonnet = VllmFlags {
            dataset_name: Some("sonnet".into()),
            multi_turn: MultiTurnFlags {
                enabled: true,
                ..MultiTurnFlags::default()
            },
            ..flags()
        };
        let e = load_with_flags(None, &sonnet, &[])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not sonnet"), "{e}");
    }

    #[test]
    fn defaults_follow_vllm_and_names_map() {
        let s = load_with_flags(None, &flags(), &[]).unwrap().scenario;
        assert_eq!(s.target.backend, Backend::Openai);
        assert_eq!(s.target.base_url.as_deref(), Some("http://127.0.0.1:8000"));
        let mock = VllmFlags {
            backend: Some("mock".into()),
            ..flags()
        };
        let s = load_with_flags(None, &mock, &[]).unwrap().scenario;
        assert!(s.target.base_url.is_none());
        for (vllm, ours) in [
            ("llama.cpp", Backend::LlamacppCompletions),
            ("tensorrt-llm", Backend::Triton),
            ("tgi", Backend::Tgi),
            // vLLM's bench name for the Responses API is ours too
            ("openai-responses", Backend::OpenaiResponses),
        ] {
            assert_eq!(backend_name(vllm).unwrap(), ours.name());
        }
        let e = backend_name("nope").err().unwrap().to_string();
        assert!(e.contains("openai-chat"), "{e}");
    }

    #[test]
    fn problems_name_the_flag() {
        let f = VllmFlags {
            request_rate: Some("-2".into()),
            ..flags()
        };
        let e = load_with_flags(None, &f, &[]).err().unwrap().to_string();
        assert!(
            e.starts_with("command line (--request-rate): `load.request_rate`"),
            "{e}"
        );
        let f = VllmFlags {
            metric_percentiles: Some("50,x".into()),
            ..flags()
        };
        assert!(load_with_flags(None, &f, &[]).is_err());
        let f = VllmFlags {
            headers: vec!["nokey".into()],
            ..flags()
        };
        assert!(load_with_flags(None, &f, &[]).is_err());
    }

    #[test]
    fn goodput_flags_become_slo_bounds() {
        let o = goodput(&["ttft:500".into(), "TPOT:50".into()]).unwrap();
        let knobs: Vec<(&str, &Knob)> = o.knobs().collect();
        assert_eq!(
            knobs,
            [
                ("goodput", &Knob::Slo(SloBound::Ttft, 500.0)),
                ("goodput", &Knob::Slo(SloBound::Tpot, 50.0))
            ]
        );
        assert!(goodput(&["ttft=5".into()]).is_err());
        assert!(goodput(&["foo:5".into()]).is_err());
        assert!(goodput(&["ttft:fast".into()]).is_err());
    }
}
