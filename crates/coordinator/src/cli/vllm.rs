//! `vllm bench serve`'s everyday flags on `cicada run`, so a user can switch
//! without writing a scenario file. Each flag becomes a typed setting of a
//! scenario key: flags apply over the scenario file (or over the defaults
//! when there is none), and `--set` applies over both. Problems are reported
//! against the flag the user typed.

use std::path::{Path, PathBuf};

use cicada_scenarios::Setting;
use cicada_scenarios::scenario::Backend;
use clap::Args;

use crate::error::RunError;

/// The `vllm bench serve` flags `cicada run` understands.
#[derive(Debug, Clone, Default, Args)]
pub struct VllmFlags {
    /// Serving API (vLLM's names work too: llama.cpp, tensorrt-llm, ...).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub backend: Option<String>,
    /// Server base URL, with any path prefix (default http://HOST:PORT).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub base_url: Option<String>,
    /// Server host when no --base-url is given.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub host: Option<String>,
    /// Server port when no --base-url is given.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub port: Option<u16>,
    /// Route appended to the base URL.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub endpoint: Option<String>,
    /// Model id (default: the first one the server lists).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub model: Option<String>,
    /// Tokenizer: a tokenizer.json, a model directory or a cached hub id.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub tokenizer: Option<String>,
    /// Dataset kind.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub dataset_name: Option<String>,
    /// Dataset file.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub dataset_path: Option<PathBuf>,
    /// Requests in the run.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub num_prompts: Option<u64>,
    /// Mean arrival rate (req/s) or "inf".
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub request_rate: Option<String>,
    /// Gamma shape of arrival gaps (1 = Poisson).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub burstiness: Option<f64>,
    /// Most requests in flight at once.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub max_concurrency: Option<u32>,
    /// Seed for sampling and arrivals.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub seed: Option<u64>,
    /// Generate past end-of-sequence up to the asked length.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub ignore_eos: bool,
    /// Metrics with printed percentiles, comma-separated (ttft,tpot,itl,e2el,...).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub percentile_metrics: Option<String>,
    /// Percentiles to print, comma-separated (e.g. 25,50,99).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub metric_percentiles: Option<String>,
    /// Accepted for compatibility: cicada always saves result.json.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub save_result: bool,
    /// Also write every request's record to requests.jsonl (output.save_detailed).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub save_detailed: bool,
    /// Directory for the result files (output.dir).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub result_dir: Option<PathBuf>,
    /// File name of the JSON result (output.result_filename).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub result_filename: Option<String>,
    /// random dataset: prompt length in tokens.
    #[arg(long, alias = "input-len", help_heading = "vllm bench serve flags")]
    pub random_input_len: Option<u32>,
    /// random dataset: output length in tokens.
    #[arg(long, alias = "output-len", help_heading = "vllm bench serve flags")]
    pub random_output_len: Option<u32>,
    /// random dataset: lengths vary within ± this ratio.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub random_range_ratio: Option<f64>,
    /// random dataset: tokens of a shared prefix.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub random_prefix_len: Option<u32>,
    /// Sampling temperature.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub top_k: Option<i64>,
    /// Extra request header KEY=VALUE (repeatable).
    #[arg(
        long = "header",
        value_name = "KEY=VALUE",
        help_heading = "vllm bench serve flags"
    )]
    pub headers: Vec<String>,
    /// Seconds to wait for the server to be ready (0 skips the check).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub ready_check_timeout_sec: Option<u64>,
}

/// A backend name as `vllm bench serve` or a scenario file spells it.
fn backend_of(name: &str) -> Result<Backend, RunError> {
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
            return Err(RunError::BadInput(format!(
                "--backend {name}: unknown backend; expected one of {} (or vLLM's llama.cpp, tensorrt-llm, lmdeploy, scalellm)",
                ours.join(", ")
            )));
        }
    })
}

/// A backend name's scenario spelling (for tests of vLLM's names).
#[cfg(test)]
fn backend_name(name: &str) -> Result<&'static str, RunError> {
    backend_of(name).map(Backend::name)
}

/// `"a,b"` -> `["a", "b"]`.
fn string_list(raw: &str) -> toml::Value {
    toml::Value::Array(
        raw.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| toml::Value::String(s.to_string()))
            .collect(),
    )
}

/// `"25,50,99"` -> `[25.0, 50.0, 99.0]`, naming the flag when a number is bad.
fn number_list(flag: &str, raw: &str) -> Result<toml::Value, RunError> {
    let items = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<f64>()
                .map(toml::Value::Float)
                .map_err(|_| RunError::BadInput(format!("--{flag} {raw}: \"{s}\" is not a number")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(toml::Value::Array(items))
}

/// `--request-rate`: a number, or `inf` in any case (vLLM's spelling).
fn rate(raw: &str) -> toml::Value {
    let raw = raw.trim();
    if raw.eq_ignore_ascii_case("inf") {
        toml::Value::String("inf".into())
    } else if let Ok(n) = raw.parse::<i64>() {
        toml::Value::Integer(n)
    } else if let Ok(v) = raw.parse::<f64>() {
        toml::Value::Float(v)
    } else {
        // not a rate: the scenario's reading says why, naming the flag
        toml::Value::String(raw.to_string())
    }
}

/// A whole number as the scenario file would hold it.
fn whole(v: impl Into<u64>) -> toml::Value {
    let v: u64 = v.into();
    i64::try_from(v).map_or_else(|_| toml::Value::String(v.to_string()), toml::Value::Integer)
}

fn text(s: &str) -> toml::Value {
    toml::Value::String(s.to_string())
}

fn path(p: &Path) -> toml::Value {
    toml::Value::String(p.to_string_lossy().into_owned())
}

/// The flags as settings of scenario keys, each with its typed value and
/// blamed on its flag; applied over the scenario file (or over the defaults
/// when there is none).
pub fn settings(f: &VllmFlags, has_scenario: bool) -> Result<Vec<Setting>, RunError> {
    let mut out = Patch::default();
    let backend = match &f.backend {
        Some(b) => Some(backend_of(b)?),
        // without a file, vLLM's default: OpenAI completions
        None if !has_scenario => Some(Backend::Openai),
        None => None,
    };
    if let Some(b) = backend {
        out.set("backend", "target.backend", text(b.name()));
    }
    target(&mut out, f, has_scenario, backend);
    dataset(&mut out, f);
    load(&mut out, f);
    output(&mut out, f)?;
    if f.ignore_eos {
        out.set(
            "ignore-eos",
            "sampling.ignore_eos",
            toml::Value::Boolean(true),
        );
    }
    for (flag, key, v) in [
        ("temperature", "sampling.temperature", f.temperature),
        ("top-p", "sampling.top_p", f.top_p),
    ] {
        out.set_some(flag, key, v.map(toml::Value::Float));
    }
    out.set_some("top-k", "sampling.top_k", f.top_k.map(toml::Value::Integer));
    for h in &f.headers {
        let (k, v) = h
            .split_once('=')
            .ok_or_else(|| RunError::BadInput(format!("--header {h}: expected KEY=VALUE")))?;
        let k = k.trim();
        if k.is_empty() || k.contains('.') {
            return Err(RunError::BadInput(format!(
                "--header {h}: the header name must be non-empty and without dots"
            )));
        }
        out.set("header", &format!("target.headers.{k}"), text(v.trim()));
    }
    Ok(out.0)
}

/// Settings being gathered, each blamed on its flag.
#[derive(Default)]
struct Patch(Vec<Setting>);

impl Patch {
    fn set(&mut self, flag: &str, key: &str, value: toml::Value) {
        self.0.push(Setting {
            key: key.to_string(),
            source: format!("--{flag}"),
            origin: format!("command line (--{flag})"),
            value,
        });
    }

    fn set_some(&mut self, flag: &str, key: &str, value: Option<toml::Value>) {
        if let Some(v) = value {
            self.set(flag, key, v);
        }
    }
}

/// Where the requests go: URL (or host and port), route, model, tokenizer, readiness.
fn target(out: &mut Patch, f: &VllmFlags, has_scenario: bool, backend: Option<Backend>) {
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
        out.set(flag, "target.base_url", text(&url));
    }
    for (flag, key, v) in [
        ("endpoint", "target.endpoint", &f.endpoint),
        ("model", "target.model", &f.model),
        ("tokenizer", "tokenizer.source", &f.tokenizer),
    ] {
        out.set_some(flag, key, v.as_deref().map(text));
    }
    out.set_some(
        "ready-check-timeout-sec",
        "target.ready_timeout",
        f.ready_check_timeout_sec.map(whole),
    );
}

/// The workload: kind, file, and the random dataset's lengths.
fn dataset(out: &mut Patch, f: &VllmFlags) {
    out.set_some(
        "dataset-name",
        "dataset.kind",
        f.dataset_name.as_deref().map(text),
    );
    out.set_some(
        "dataset-path",
        "dataset.path",
        f.dataset_path.as_deref().map(path),
    );
    for (flag, key, v) in [
        ("random-input-len", "dataset.input_len", f.random_input_len),
        (
            "random-output-len",
            "dataset.output_len",
            f.random_output_len,
        ),
        (
            "random-prefix-len",
            "dataset.prefix_len",
            f.random_prefix_len,
        ),
    ] {
        out.set_some(flag, key, v.map(whole));
    }
    out.set_some(
        "random-range-ratio",
        "dataset.range_ratio",
        f.random_range_ratio.map(toml::Value::Float),
    );
}

/// How fast: count, rate, burstiness, concurrency, seed.
fn load(out: &mut Patch, f: &VllmFlags) {
    out.set_some("num-prompts", "load.num_prompts", f.num_prompts.map(whole));
    out.set_some(
        "request-rate",
        "load.request_rate",
        f.request_rate.as_deref().map(rate),
    );
    out.set_some(
        "burstiness",
        "load.burstiness",
        f.burstiness.map(toml::Value::Float),
    );
    out.set_some(
        "max-concurrency",
        "load.max_concurrency",
        f.max_concurrency.map(whole),
    );
    out.set_some("seed", "seed", f.seed.map(whole));
}

/// What to write and where.
fn output(out: &mut Patch, f: &VllmFlags) -> Result<(), RunError> {
    out.set_some(
        "result-dir",
        "output.dir",
        f.result_dir.as_deref().map(path),
    );
    out.set_some(
        "result-filename",
        "output.result_filename",
        f.result_filename.as_deref().map(text),
    );
    if f.save_detailed {
        out.set(
            "save-detailed",
            "output.save_detailed",
            toml::Value::Boolean(true),
        );
    }
    out.set_some(
        "percentile-metrics",
        "output.percentile_metrics",
        f.percentile_metrics.as_deref().map(string_list),
    );
    if let Some(v) = &f.metric_percentiles {
        out.set(
            "metric-percentiles",
            "output.metric_percentiles",
            number_list("metric-percentiles", v)?,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_scenarios::units::Rate;

    fn flags() -> VllmFlags {
        VllmFlags::default()
    }

    /// The scenario of flags and `--set`s alone.
    fn load_with_flags(
        file: Option<&Path>,
        f: &VllmFlags,
        sets: &[String],
    ) -> Result<cicada_scenarios::LoadedScenario, RunError> {
        crate::cli::scenario::describe(file, f, sets, &[], (None, None))
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
        let cicada_scenarios::scenario::Dataset::Random(d) = &s.dataset else {
            panic!("a random dataset: {:?}", s.dataset)
        };
        assert_eq!((d.input_len, d.output_len), (16, 4));
        assert_eq!(s.target.headers["X-Team"], "perf");
        assert!(s.target.ready_timeout.get().is_zero());
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
}
