//! A typed overlay on the scenario: the keys a command line sets (`vllm bench
//! serve`'s flags, `--goodput`, the gate flags), each as a [`Knob`] holding
//! its value in the type its key holds, and blamed on the flag that set it.
//! An overlay applies over the scenario file (or the defaults when there is
//! none), through the same reading as the file itself, so a value a key
//! cannot take is reported against the flag, with the key, exactly as a bad
//! line of the file is. [`Knob::key`] is the one place a knob's key is
//! spelled, beside the model it names.

use std::path::{Path, PathBuf};

use crate::error::ScenarioError;
use crate::load::{LoadedScenario, Override, Setting, load_file_with, parse_with};
use crate::scenario::Backend;

/// A bound of `[slo]`, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloBound {
    Ttft,
    Tpot,
    E2el,
    Itl,
    /// Time to first answer token (reasoning models).
    Ttfa,
}

impl SloBound {
    /// The bound named as `--goodput` and `[slo]` spell it (`ttft`, ...).
    pub fn from_name(name: &str) -> Option<SloBound> {
        Some(match name {
            "ttft" => SloBound::Ttft,
            "tpot" => SloBound::Tpot,
            "e2el" => SloBound::E2el,
            "itl" => SloBound::Itl,
            "ttfa" => SloBound::Ttfa,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            SloBound::Ttft => "ttft",
            SloBound::Tpot => "tpot",
            SloBound::E2el => "e2el",
            SloBound::Itl => "itl",
            SloBound::Ttfa => "ttfa",
        }
    }
}

/// One scenario key a command line sets, with its value.
#[derive(Debug, Clone, PartialEq)]
pub enum Knob {
    /// `target.backend`.
    Backend(Backend),
    /// `target.base_url`.
    BaseUrl(String),
    /// `target.endpoint`.
    Endpoint(String),
    /// `target.model`.
    Model(String),
    /// `target.models`, equal weights (vLLM's `--lora-modules` names).
    Models(Vec<String>),
    /// `target.model_assignment` ("random" or "round_robin").
    ModelAssignment(String),
    /// `target.ready_timeout`, whole seconds.
    ReadyTimeoutSecs(u64),
    /// `target.headers.<name>`.
    Header(String, String),
    /// `tokenizer.source`.
    Tokenizer(String),
    /// `dataset.kind`, as typed: the scenario's reading names a kind it
    /// does not know, with the kinds it does.
    DatasetKind(String),
    /// `dataset.path`.
    DatasetPath(PathBuf),
    /// `dataset.input_len`.
    InputLen(u32),
    /// `dataset.output_len`.
    OutputLen(u32),
    /// `dataset.prefix_len`.
    PrefixLen(u32),
    /// `dataset.range_ratio`.
    RangeRatio(f64),
    /// `dataset.prompt_token_ids`.
    PromptTokenIds(bool),
    /// `load.num_prompts`.
    NumPrompts(u64),
    /// `load.request_rate`, as typed (a number or `inf` in any case): the
    /// scenario's reading says what is wrong with anything else.
    RequestRate(String),
    /// `load.burstiness`.
    Burstiness(f64),
    /// `load.max_concurrency`.
    MaxConcurrency(u32),
    /// `seed`.
    Seed(u64),
    /// `sampling.ignore_eos`.
    IgnoreEos(bool),
    /// `sampling.temperature`.
    Temperature(f64),
    /// `sampling.top_p`.
    TopP(f64),
    /// `sampling.top_k`.
    TopK(i64),
    /// `slo.<bound>_ms`.
    Slo(SloBound, f64),
    /// `slo.min_attainment`.
    MinSloAttainment(f64),
    /// `output.dir`.
    ResultDir(PathBuf),
    /// `output.result_filename`.
    ResultFilename(String),
    /// `output.save_detailed`.
    SaveDetailed(bool),
    /// `output.percentile_metrics`.
    PercentileMetrics(Vec<String>),
    /// `output.metric_percentiles`.
    MetricPercentiles(Vec<f64>),
    /// `output.max_failure_ratio`.
    MaxFailureRatio(f64),
    /// `dataset.base_items_per_request` (random-mm).
    MmBaseItems(u32),
    /// `dataset.num_mm_items_range_ratio` (random-mm).
    MmItemsRangeRatio(f64),
    /// `dataset.limit_mm_per_prompt` (random-mm), by modality.
    MmLimits(Vec<(String, u32)>),
    /// `dataset.bucket_config` (random-mm): (height, width, frames, probability).
    MmBuckets(Vec<(u32, u32, u32, f64)>),
    /// `dataset.turns` (multi_turn).
    Turns(u32),
    /// `dataset.min_turns` (multi_turn).
    MinTurns(u32),
    /// `dataset.max_turns` (multi_turn, conversations).
    MaxTurns(u32),
    /// `dataset.per_turn_input_len` (multi_turn).
    PerTurnInputLen(u32),
    /// `dataset.think_time`, ms (multi_turn, conversations).
    ThinkTimeMs(u64),
    /// `target.session_header`.
    SessionHeader(String),
}

impl Knob {
    /// The scenario key this knob sets, as the scenario file spells it.
    pub fn key(&self) -> String {
        match self {
            Knob::Backend(_) => "target.backend".into(),
            Knob::BaseUrl(_) => "target.base_url".into(),
            Knob::Endpoint(_) => "target.endpoint".into(),
            Knob::Model(_) => "target.model".into(),
            Knob::Models(_) => "target.models".into(),
            Knob::ModelAssignment(_) => "target.model_assignment".into(),
            Knob::ReadyTimeoutSecs(_) => "target.ready_timeout".into(),
            Knob::Header(name, _) => format!("target.headers.{name}"),
            Knob::Tokenizer(_) => "tokenizer.source".into(),
            Knob::DatasetKind(_) => "dataset.kind".into(),
            Knob::DatasetPath(_) => "dataset.path".into(),
            Knob::InputLen(_) => "dataset.input_len".into(),
            Knob::OutputLen(_) => "dataset.output_len".into(),
            Knob::PrefixLen(_) => "dataset.prefix_len".into(),
            Knob::RangeRatio(_) => "dataset.range_ratio".into(),
            Knob::PromptTokenIds(_) => "dataset.prompt_token_ids".into(),
            Knob::NumPrompts(_) => "load.num_prompts".into(),
            Knob::RequestRate(_) => "load.request_rate".into(),
            Knob::Burstiness(_) => "load.burstiness".into(),
            Knob::MaxConcurrency(_) => "load.max_concurrency".into(),
            Knob::Seed(_) => "seed".into(),
            Knob::IgnoreEos(_) => "sampling.ignore_eos".into(),
            Knob::Temperature(_) => "sampling.temperature".into(),
            Knob::TopP(_) => "sampling.top_p".into(),
            Knob::TopK(_) => "sampling.top_k".into(),
            Knob::Slo(bound, _) => format!("slo.{}_ms", bound.name()),
            Knob::MinSloAttainment(_) => "slo.min_attainment".into(),
            Knob::ResultDir(_) => "output.dir".into(),
            Knob::ResultFilename(_) => "output.result_filename".into(),
            Knob::SaveDetailed(_) => "output.save_detailed".into(),
            Knob::PercentileMetrics(_) => "output.percentile_metrics".into(),
            Knob::MetricPercentiles(_) => "output.metric_percentiles".into(),
            Knob::MaxFailureRatio(_) => "output.max_failure_ratio".into(),
            Knob::MmBaseItems(_) => "dataset.base_items_per_request".into(),
            Knob::MmItemsRangeRatio(_) => "dataset.num_mm_items_range_ratio".into(),
            Knob::MmLimits(_) => "dataset.limit_mm_per_prompt".into(),
            Knob::MmBuckets(_) => "dataset.bucket_config".into(),
            Knob::Turns(_) => "dataset.turns".into(),
            Knob::MinTurns(_) => "dataset.min_turns".into(),
            Knob::MaxTurns(_) => "dataset.max_turns".into(),
            Knob::PerTurnInputLen(_) => "dataset.per_turn_input_len".into(),
            Knob::ThinkTimeMs(_) => "dataset.think_time".into(),
            Knob::SessionHeader(_) => "target.session_header".into(),
        }
    }

    /// The value as the scenario file would hold it.
    fn value(&self) -> toml::Value {
        use toml::Value as V;
        let text = |s: &str| V::String(s.to_string());
        let path = |p: &Path| V::String(p.to_string_lossy().into_owned());
        match self {
            Knob::Backend(b) => text(b.name()),
            Knob::BaseUrl(s)
            | Knob::Endpoint(s)
            | Knob::Model(s)
            | Knob::ModelAssignment(s)
            | Knob::Header(_, s)
            | Knob::Tokenizer(s)
            | Knob::DatasetKind(s)
            | Knob::SessionHeader(s)
            | Knob::ResultFilename(s) => text(s),
            Knob::ThinkTimeMs(ms) => V::String(format!("{ms}ms")),
            Knob::DatasetPath(p) | Knob::ResultDir(p) => path(p),
            Knob::ReadyTimeoutSecs(v) | Knob::NumPrompts(v) | Knob::Seed(v) => whole(*v),
            Knob::InputLen(v)
            | Knob::OutputLen(v)
            | Knob::PrefixLen(v)
            | Knob::MaxConcurrency(v)
            | Knob::Turns(v)
            | Knob::MinTurns(v)
            | Knob::MaxTurns(v)
            | Knob::PerTurnInputLen(v)
            | Knob::MmBaseItems(v) => whole(u64::from(*v)),
            Knob::RangeRatio(v)
            | Knob::Burstiness(v)
            | Knob::Temperature(v)
            | Knob::TopP(v)
            | Knob::Slo(_, v)
            | Knob::MinSloAttainment(v)
            | Knob::MaxFailureRatio(v)
            | Knob::MmItemsRangeRatio(v) => V::Float(*v),
            Knob::MmLimits(limits) => V::Table(
                limits
                    .iter()
                    .map(|(k, n)| (k.clone(), whole(u64::from(*n))))
                    .collect(),
            ),
            Knob::MmBuckets(buckets) => V::Array(
                buckets
                    .iter()
                    .map(|(h, w, frames, p)| {
                        let mut t = toml::Table::new();
                        t.insert("height".into(), whole(u64::from(*h)));
                        t.insert("width".into(), whole(u64::from(*w)));
                        t.insert("frames".into(), whole(u64::from(*frames)));
                        t.insert("probability".into(), V::Float(*p));
                        V::Table(t)
                    })
                    .collect(),
            ),
            Knob::Models(names) => V::Array(
                names
                    .iter()
                    .map(|n| {
                        let mut t = toml::Table::new();
                        t.insert("name".into(), text(n));
                        V::Table(t)
                    })
                    .collect(),
            ),
            Knob::TopK(v) => V::Integer(*v),
            Knob::IgnoreEos(b) | Knob::SaveDetailed(b) | Knob::PromptTokenIds(b) => V::Boolean(*b),
            Knob::RequestRate(raw) => rate(raw),
            Knob::PercentileMetrics(names) => V::Array(names.iter().map(|n| text(n)).collect()),
            Knob::MetricPercentiles(ps) => V::Array(ps.iter().map(|p| V::Float(*p)).collect()),
        }
    }
}

/// A whole number as the scenario file would hold it.
fn whole(v: u64) -> toml::Value {
    i64::try_from(v).map_or_else(|_| toml::Value::String(v.to_string()), toml::Value::Integer)
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

/// Knobs over a scenario, in the order they apply, each with the flag
/// (without its dashes) that set it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overlay {
    knobs: Vec<(String, Knob)>,
}

impl Overlay {
    /// Set `knob`, blamed on `--flag`.
    pub fn set(&mut self, flag: &str, knob: Knob) {
        self.knobs.push((flag.to_string(), knob));
    }

    /// Set `knob` when there is one.
    pub fn set_some(&mut self, flag: &str, knob: Option<Knob>) {
        if let Some(k) = knob {
            self.set(flag, k);
        }
    }

    /// The knobs, in order.
    pub fn knobs(&self) -> impl Iterator<Item = (&str, &Knob)> {
        self.knobs.iter().map(|(f, k)| (f.as_str(), k))
    }

    /// Each knob as a setting of its key, blamed on its flag.
    fn settings(&self) -> impl Iterator<Item = Setting> + '_ {
        self.knobs.iter().map(|(flag, knob)| Setting {
            key: knob.key(),
            value: knob.value(),
            source: format!("--{flag}"),
            origin: format!("command line (--{flag})"),
        })
    }
}

/// The scenario a command line describes: the file (or the defaults), then
/// `flags` over it, the `--set` overrides over both, then `extra` (typed
/// settings from elsewhere: the web UI's start form), then `after` (flags
/// that win over `--set`: `--goodput` and the gates).
pub fn describe(
    file: Option<&Path>,
    flags: &Overlay,
    sets: &[String],
    extra: &[Setting],
    after: &Overlay,
) -> Result<LoadedScenario, ScenarioError> {
    let mut settings: Vec<Setting> = flags.settings().collect();
    for s in sets {
        settings.push(s.parse::<Override>()?.setting());
    }
    settings.extend(extra.iter().cloned());
    settings.extend(after.settings());
    match file {
        Some(path) => load_file_with(path, &settings),
        None => Ok(LoadedScenario {
            scenario: parse_with("", "command line", &settings)?,
            origin: "command line".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every knob's key is a key of the model, and the value lands there:
    /// the scenario read back holds it.
    #[test]
    fn every_knob_sets_its_own_key() {
        let knobs = [
            Knob::Backend(Backend::Vllm),
            Knob::BaseUrl("http://h:1".into()),
            Knob::Endpoint("/x".into()),
            Knob::Model("m".into()),
            Knob::ReadyTimeoutSecs(7),
            Knob::Header("X-A".into(), "b".into()),
            Knob::Tokenizer("org/t".into()),
            Knob::DatasetKind("random".into()),
            Knob::InputLen(11),
            Knob::OutputLen(12),
            Knob::PrefixLen(13),
            Knob::RangeRatio(0.25),
            Knob::PromptTokenIds(true),
            Knob::NumPrompts(14),
            Knob::RequestRate("INF".into()),
            Knob::Burstiness(0.5),
            Knob::MaxConcurrency(15),
            Knob::Seed(16),
            Knob::IgnoreEos(true),
            Knob::Temperature(0.75),
            Knob::TopP(0.5),
            Knob::TopK(-1),
            Knob::Slo(SloBound::Itl, 17.0),
            Knob::Slo(SloBound::Ttfa, 18.0),
            Knob::MinSloAttainment(0.5),
            Knob::ResultDir("d".into()),
            Knob::ResultFilename("r.json".into()),
            Knob::SaveDetailed(true),
            Knob::PercentileMetrics(vec!["ttft".into()]),
            Knob::MetricPercentiles(vec![50.0]),
            Knob::MaxFailureRatio(0.25),
        ];
        let mut o = Overlay::default();
        for k in knobs.iter().cloned() {
            o.set("flag", k);
        }
        let s = describe(None, &o, &[], &[], &Overlay::default())
            .unwrap()
            .scenario;
        let doc = serde_json::to_value(&s).unwrap();
        for k in &knobs {
            let mut at = &doc;
            for part in k.key().split('.') {
                at = &at[part];
            }
            assert!(!at.is_null(), "{} is not set by {k:?}: {doc}", k.key());
        }
        assert_eq!(s.target.ready_timeout.get().as_secs(), 7);
        assert_eq!(s.slo.itl_ms, Some(17.0));
        assert_eq!(s.slo.ttfa_ms, Some(18.0));
        assert_eq!(s.load.max_concurrency, Some(15));
    }

    #[test]
    fn a_knob_a_key_cannot_take_is_blamed_on_its_flag() {
        let mut o = Overlay::default();
        o.set("request-rate", Knob::RequestRate("fast".into()));
        let e = describe(None, &o, &[], &[], &Overlay::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("command line (--request-rate): `load.request_rate`: invalid rate"),
            "{e}"
        );
    }
}
