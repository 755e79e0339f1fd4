//! Value checks beyond types: ranges, required keys, combinations.

use crate::scenario::{
    Backend, Dataset, MAX_MAX_EVENT_SIZE, MIN_MAX_EVENT_SIZE, Sampler, Scenario,
};
use cicada_plan::units::Rate;

const KNOWN_PERCENTILE_METRICS: [&str; 9] = [
    "ttft",
    "tpot",
    "itl",
    "icl",
    "e2el",
    "ttft_co",
    "e2el_co",
    "schedule_lag",
    "token_latency",
];

/// Every problem with a parsed scenario as (dotted key, message); empty when
/// valid. Sections are checked in the order they are usually written.
pub fn problems(s: &Scenario) -> Vec<(String, String)> {
    let mut out = target_problems(s);
    out.extend(crate::validate_models::problems(s));
    out.extend(dataset_problems(s));
    out.extend(crate::validate_pool::pool_problems(s));
    out.extend(load_problems(s));
    out.extend(crate::validate_shape::problems(s));
    out.extend(sampling_problems(s));
    out.extend(crate::validate_structured::problems(s));
    out.extend(crate::validate_pooling::problems(s));
    out.extend(slo_problems(s));
    out.extend(
        s.mock
            .problems()
            .into_iter()
            .map(|(key, msg)| (format!("mock.{key}"), msg)),
    );
    out.extend(output_problems(s));
    out.extend(s.run.problems());
    out.extend(s.hooks.problems(s.target.backend));
    out.extend(s.steady_state.problems());
    out.extend(s.saturation.problems());
    out.extend(s.abort.problems());
    out
}

/// `[target]`: where requests go and how they are trusted.
fn target_problems(s: &Scenario) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: &str, msg: String| out.push((key.to_string(), msg));
    let t = &s.target;
    if t.backend == Backend::Mock {
        if t.base_url.is_some() || !t.urls.is_empty() {
            bad(
                "target.base_url",
                "the mock backend starts its own server; remove base_url/urls or pick another backend".into(),
            );
        }
    } else if t.base_url.is_none() && t.urls.is_empty() {
        bad(
            "target.base_url",
            format!(
                "required for backend \"{}\" (or give target.urls)",
                t.backend.name()
            ),
        );
    }
    if t.base_url.is_some() && !t.urls.is_empty() {
        bad(
            "target.urls",
            "give either base_url or urls, not both".into(),
        );
    }
    for (i, url) in t.base_url.iter().chain(t.urls.iter()).enumerate() {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            let key = if t.base_url.is_some() {
                "target.base_url".to_string()
            } else {
                format!("target.urls[{i}]")
            };
            bad(
                &key,
                format!("\"{url}\" must start with http:// or https://"),
            );
        }
    }
    if let Some(ep) = &t.endpoint
        && !ep.starts_with('/')
    {
        bad("target.endpoint", format!("\"{ep}\" must start with /"));
    }
    if let Some(env) = &t.api_key_env
        && (env.is_empty() || env.contains('='))
    {
        bad(
            "target.api_key_env",
            "must be the name of an environment variable".into(),
        );
    }
    if t.timeout.get().is_zero() {
        bad("target.timeout", "must be greater than zero".into());
    }
    if !(MIN_MAX_EVENT_SIZE..=MAX_MAX_EVENT_SIZE).contains(&t.max_event_size) {
        bad(
            "target.max_event_size",
            format!(
                "must be from {MIN_MAX_EVENT_SIZE} to {MAX_MAX_EVENT_SIZE}, got {}",
                t.max_event_size
            ),
        );
    }
    if let Some(h) = &t.session_header
        && (h.is_empty() || !h.bytes().all(is_tchar))
    {
        bad(
            "target.session_header",
            format!("\"{h}\" is not an HTTP header name"),
        );
    }
    if t.tls_ca.is_some() && t.tls_insecure {
        bad(
            "target.tls_insecure",
            "give either tls_ca (trust a CA) or tls_insecure (trust anything), not both".into(),
        );
    }
    out
}

/// Most turns a `multi_turn` session may have: its pool entry holds them all.
const MAX_TURNS: u32 = 10_000;

/// Most levels of sub-agents an `agentic` session may have.
const MAX_DEPTH: u32 = 8;

/// A session's drawn turn range (`multi_turn`, `agentic`): the fewest no
/// more than the most, and the most within [`MAX_TURNS`]; the key named is
/// the one the user wrote (`max_turns` when set).
fn turn_range_problems((lo, hi): (u32, u32), max_set: bool, bad: &mut impl FnMut(&str, String)) {
    if lo > hi && lo > 0 {
        let key = if max_set { "max_turns" } else { "min_turns" };
        bad(
            key,
            format!("the fewest turns ({lo}) exceed the most ({hi})"),
        );
    }
    if hi > MAX_TURNS {
        let key = if max_set { "max_turns" } else { "turns" };
        bad(
            key,
            format!("at most {MAX_TURNS} turns a session, got {hi}"),
        );
    }
}

/// The `agentic` knobs' problems beyond their lengths and counts.
fn agentic_problems(a: &crate::scenario::AgenticSpec, bad: &mut impl FnMut(&str, String)) {
    turn_range_problems(a.turn_range(), a.max_turns.is_some(), bad);
    for (key, p) in [
        ("fan_out_chance", a.fan_out_chance),
        ("tool_chance", a.tool_chance),
    ] {
        if !(0.0..=1.0).contains(&p) {
            bad(key, format!("must be within [0, 1], got {p}"));
        }
    }
    if a.depth > MAX_DEPTH {
        bad(
            "depth",
            format!("at most {MAX_DEPTH} levels of sub-agents, got {}", a.depth),
        );
    }
    for (key, lo, hi) in [
        ("think_time_max", a.think_time, a.think_time_max),
        ("tool_delay_max", a.tool_delay, a.tool_delay_max),
    ] {
        if let Some(max) = hi
            && max.get() < lo.get()
        {
            let base = key.trim_end_matches("_max");
            bad(key, format!("must be at least {base} ({lo})"));
        }
    }
}

/// A character of an HTTP header name (RFC 9110's `tchar`).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `[load]`'s counts, rates and intervals (load shapes: `validate_shape`).
fn load_problems(s: &Scenario) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: &str, msg: String| out.push((key.to_string(), msg));
    let l = &s.load;
    if l.num_prompts == Some(0) {
        bad("load.num_prompts", "must be at least 1".into());
    }
    if l.num_prompts.is_some() && l.duration.is_some() {
        bad(
            "load.duration",
            "give either num_prompts or duration, not both".into(),
        );
    }
    if let Some(d) = l.duration
        && d.get().is_zero()
    {
        bad("load.duration", "must be greater than zero".into());
    }
    if let Some(r) = l.request_rate.per_second()
        && !(r.is_finite() && r > 0.0)
    {
        bad(
            "load.request_rate",
            format!("must be a positive number or \"inf\", got {r}"),
        );
    }
    if l.duration.is_some()
        && l.request_rate == Rate::Infinite
        && l.max_concurrency.is_none()
        && l.ramp.is_none()
        && !crate::sharding::is_closed_loop(s)
    {
        bad(
            "load.max_concurrency",
            "a duration-bound run with request_rate = \"inf\" needs max_concurrency (otherwise it is an unbounded burst)".into(),
        );
    }
    if l.burstiness.is_nan() || l.burstiness <= 0.0 {
        bad(
            "load.burstiness",
            format!("must be greater than 0, got {}", l.burstiness),
        );
    }
    if l.max_concurrency == Some(0) {
        bad("load.max_concurrency", "must be at least 1".into());
    }
    if l.pool_size == Some(0) {
        bad("load.pool_size", "must be at least 1".into());
    }
    if l.report_interval.get().as_millis() < 100 {
        bad("load.report_interval", "must be at least 100ms".into());
    }
    out
}

/// `[sampling]`: generation parameters in range.
fn sampling_problems(s: &Scenario) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: &str, msg: String| out.push((key.to_string(), msg));
    let sm = &s.sampling;
    if let Some(t) = sm.temperature
        && !(t.is_finite() && t >= 0.0)
    {
        bad("sampling.temperature", format!("must be ≥ 0, got {t}"));
    }
    if let Some(p) = sm.top_p
        && !(p > 0.0 && p <= 1.0)
    {
        bad("sampling.top_p", format!("must be within (0, 1], got {p}"));
    }
    out.extend(api_sampling_problems(s));
    out
}

/// Sampling keys the Responses and Messages routes cannot carry: no server
/// reads `min_tokens` on either (vLLM 0.32 and llama-server drop it), nor
/// `ignore_eos` on `/v1/messages` (both drop it; Anthropic refuses unknown
/// fields), so asking for them would silently measure something else.
fn api_sampling_problems(s: &Scenario) -> Vec<(String, String)> {
    use cicada_mock::MockApi;
    let (responses, messages) = match s.target.backend {
        Backend::OpenaiResponses => (true, false),
        Backend::AnthropicMessages => (false, true),
        Backend::Mock => (
            s.mock.api == MockApi::OpenaiResponses,
            s.mock.api == MockApi::AnthropicMessages,
        ),
        _ => (false, false),
    };
    let name = match s.target.backend {
        Backend::Mock => format!(
            "mock.api \"{}\"",
            if responses {
                "openai-responses"
            } else {
                "anthropic-messages"
            }
        ),
        b => format!("backend \"{}\"", b.name()),
    };
    let mut out = Vec::new();
    if (responses || messages) && s.sampling.min_tokens.is_some() {
        out.push((
            "sampling.min_tokens".to_string(),
            format!("{name} cannot send min_tokens: no server reads it on this route (remove it)"),
        ));
    }
    if messages && s.sampling.ignore_eos == Some(true) {
        out.push((
            "sampling.ignore_eos".to_string(),
            format!(
                "{name} cannot send ignore_eos: vLLM and llama-server drop it on /v1/messages \
                 (start llama-server with --ignore-eos instead, or use openai-responses)"
            ),
        ));
    }
    out
}

/// `[slo]`: positive bounds, and an attainment gate with something to attain.
fn slo_problems(s: &Scenario) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: &str, msg: String| out.push((key.to_string(), msg));
    for (key, v) in [
        ("slo.ttft_ms", s.slo.ttft_ms),
        ("slo.tpot_ms", s.slo.tpot_ms),
        ("slo.e2el_ms", s.slo.e2el_ms),
        ("slo.itl_ms", s.slo.itl_ms),
        ("slo.ttfa_ms", s.slo.ttfa_ms),
    ] {
        if let Some(v) = v
            && !(v.is_finite() && v > 0.0)
        {
            bad(
                key,
                format!("must be a positive number of milliseconds, got {v}"),
            );
        }
    }

    if let Some(a) = s.slo.min_attainment {
        if !(a > 0.0 && a <= 1.0) {
            bad(
                "slo.min_attainment",
                format!("must be within (0, 1], got {a}"),
            );
        } else if !s.slo.is_set() {
            bad(
                "slo.min_attainment",
                "needs at least one bound (ttft_ms, tpot_ms, e2el_ms, itl_ms or ttfa_ms) to attain"
                    .into(),
            );
        } else if s
            .sweep
            .as_ref()
            .is_some_and(|sw| sw.mode == crate::shape::SweepMode::Slo)
        {
            bad(
                "slo.min_attainment",
                "an SLO search expects stages to miss the SLO; it uses sweep.fraction instead"
                    .into(),
            );
        }
    }
    out
}

/// `[output]` and the run's name.
fn output_problems(s: &Scenario) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: &str, msg: String| out.push((key.to_string(), msg));
    for (i, m) in s.output.percentile_metrics.iter().enumerate() {
        if !KNOWN_PERCENTILE_METRICS.contains(&m.as_str()) {
            bad(
                &format!("output.percentile_metrics[{i}]"),
                format!(
                    "unknown metric \"{m}\"; expected one of {}",
                    KNOWN_PERCENTILE_METRICS.join(", ")
                ),
            );
        }
    }
    for (i, p) in s.output.metric_percentiles.iter().enumerate() {
        if !(*p > 0.0 && *p <= 100.0) {
            bad(
                &format!("output.metric_percentiles[{i}]"),
                format!("must be within (0, 100], got {p}"),
            );
        }
    }
    if let Some(r) = s.output.max_failure_ratio
        && !(0.0..=1.0).contains(&r)
    {
        bad(
            "output.max_failure_ratio",
            format!("must be within [0, 1], got {r}"),
        );
    }
    let f = &s.output.result_filename;
    if f.trim().is_empty() || f.contains(['/', '\\']) || f == "." || f == ".." {
        bad(
            "output.result_filename",
            format!("\"{f}\" must be a file name (the file goes in output.dir)"),
        );
    }
    if s.name.trim().is_empty() {
        bad("name", "must not be empty".into());
    }
    out
}

/// Problems with `[dataset]` its types cannot catch: a tokenizer the kind
/// needs, out-of-range values, and a backend the workload cannot use.
fn dataset_problems(s: &Scenario) -> Vec<(String, String)> {
    let d = &s.dataset;
    let kind = d.kind().name();
    let mut out = Vec::new();
    let mut bad = |key: &str, msg: String| out.push((format!("dataset.{key}"), msg));
    if d.kind().needs_tokenizer() && s.tokenizer.is_none() {
        bad(
            "kind",
            format!(
                "kind \"{kind}\" counts tokens and needs a tokenizer: add [tokenizer] source = \"<tokenizer.json, model dir or hub id>\""
            ),
        );
    }
    if d.sampler() == Sampler::Vllm && s.tokenizer.is_none() && !d.kind().needs_tokenizer() {
        bad(
            "sampler",
            "vLLM's sample is drawn from the tokenizer's vocabulary and needs a tokenizer: add [tokenizer] source = \"<tokenizer.json, model dir or hub id>\" (vLLM's client uses the model's)".into(),
        );
    }
    for (key, v) in d.counts() {
        if v == Some(0) {
            bad(key, "must be at least 1".into());
        }
    }
    out.extend(crate::validate_lengths::length_problems(d));
    let mut bad = |key: &str, msg: String| out.push((format!("dataset.{key}"), msg));
    match d {
        Dataset::Random(r) if !(0.0..1.0).contains(&r.range_ratio) => bad(
            "range_ratio",
            format!("must be within [0, 1), got {}", r.range_ratio),
        ),
        Dataset::MultiTurn(m) => {
            turn_range_problems(m.turn_range(), m.max_turns.is_some(), &mut bad);
            if let Some(max) = m.think_time_max
                && max.get() < m.think_time.get()
            {
                bad(
                    "think_time_max",
                    format!("must be at least think_time ({})", m.think_time),
                );
            }
        }
        Dataset::Agentic(a) => agentic_problems(a, &mut bad),
        Dataset::Trace(t) if !(t.speed.is_finite() && t.speed > 0.0) => bad(
            "speed",
            format!("must be a positive number, got {}", t.speed),
        ),
        _ => {}
    }
    if d.kind().sessions() && !s.target.backend.sends_messages(s.mock.api) {
        let (key, name) = if s.target.backend == Backend::Mock {
            ("mock.api", format!("mock.api {:?}", s.mock.api))
        } else {
            ("target.backend", format!("\"{}\"", s.target.backend.name()))
        };
        out.push((
            key.to_string(),
            format!(
                "the {kind} workload sends messages arrays; {name} takes no chat messages (use a -chat backend)"
            ),
        ));
    }
    out.extend(token_id_problems(s));
    out.extend(crate::validate_media::media_problems(s));
    let mut bad = |key: &str, msg: String| out.push((format!("dataset.{key}"), msg));
    match d {
        Dataset::Prefix(p) if p.prefix_len + p.suffix_len == 0 => {
            bad(
                "suffix_len",
                "prefix_len + suffix_len must be at least 1".into(),
            );
        }
        Dataset::Sonnet(p) if p.prefix_len > p.input_len => {
            bad(
                "prefix_len",
                format!(
                    "must not exceed input_len ({}), got {}",
                    p.input_len, p.prefix_len
                ),
            );
        }
        _ => {}
    }
    out
}

/// `dataset.prompt_token_ids`: ids come from a tokenizer's vocabulary, from
/// cicada's sampler, and go only to an API whose `prompt` takes ids.
fn token_id_problems(s: &Scenario) -> Vec<(String, String)> {
    let Dataset::Random(r) = &s.dataset else {
        return Vec::new();
    };
    if !r.prompt_token_ids {
        return Vec::new();
    }
    let key = "dataset.prompt_token_ids".to_string();
    let mut out = Vec::new();
    if s.tokenizer.is_none() {
        out.push((
            key.clone(),
            "token ids are drawn from a tokenizer's vocabulary: add [tokenizer] source = \"<tokenizer.json, model dir or hub id>\" (the served model's)".into(),
        ));
    }
    if r.sampler == Sampler::Vllm {
        out.push((
            key.clone(),
            "applies to cicada's sampler; sampler = \"vllm\" makes vLLM's text prompts".into(),
        ));
    }
    if !s.target.backend.takes_token_ids(s.mock.api) {
        let name = if s.target.backend == Backend::Mock {
            format!("mock.api {:?}", s.mock.api)
        } else {
            format!("target.backend \"{}\"", s.target.backend.name())
        };
        out.push((
            key,
            format!(
                "token ids go in a completions prompt; {name} sends no such prompt (chat, Responses and Messages APIs take text): use a completions backend (vllm, sglang, openai, llamacpp-completions) or drop the key"
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(text: &str) -> Vec<(String, String)> {
        let s: Scenario = toml::from_str(text).unwrap();
        problems(&s)
    }

    #[test]
    fn responses_and_messages_refuse_what_their_routes_drop() {
        let base = "[target]\nbase_url = \"http://h\"\n";
        let p = with(&format!(
            "{base}backend = \"anthropic-messages\"\n[sampling]\nignore_eos = true\nmin_tokens = 2\n"
        ));
        let keys: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["sampling.min_tokens", "sampling.ignore_eos"],
            "{p:?}"
        );
        assert!(
            p.iter()
                .all(|(_, m)| m.contains("backend \"anthropic-messages\"")),
            "{p:?}"
        );
        // vLLM and llama-server read ignore_eos on /v1/responses, min_tokens nowhere
        let p = with(&format!(
            "{base}backend = \"openai-responses\"\n[sampling]\nignore_eos = true\nmin_tokens = 2\n"
        ));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "sampling.min_tokens");
        assert!(p[0].1.contains("backend \"openai-responses\""), "{p:?}");
        let p = with(
            "[target]\nbackend = \"mock\"\n[mock]\napi = \"anthropic-messages\"\n[sampling]\nignore_eos = true\n",
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].1.contains("mock.api \"anthropic-messages\""), "{p:?}");
        assert!(with(&format!("{base}backend = \"anthropic-messages\"\n")).is_empty());
        assert!(
            with(&format!(
                "{base}backend = \"vllm\"\n[sampling]\nmin_tokens = 2\n"
            ))
            .is_empty()
        );
    }

    #[test]
    fn dataset_kinds_needing_a_tokenizer_say_so() {
        let p = with(
            "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"sharegpt\"\npath = \"x.json\"\n",
        );
        assert_eq!(p[0].0, "dataset.kind");
        assert!(p[0].1.contains("[tokenizer]"), "{p:?}");
        let p = with(
            "[target]\nbackend = \"mock\"\n[tokenizer]\nsource = \"t\"\n[dataset]\nkind = \"sharegpt\"\npath = \"x.json\"\noutput_len = 64\n",
        );
        assert!(p.is_empty(), "{p:?}");
    }

    /// Token ids need a tokenizer and a completions API; a chat backend is
    /// refused naming the key.
    #[test]
    fn token_ids_need_a_tokenizer_and_a_completions_api() {
        let ids = "[dataset]\nkind = \"random\"\nprompt_token_ids = true\n";
        let tok = "[tokenizer]\nsource = \"t\"\n";
        let ok = with(&format!(
            "[target]\nbackend = \"vllm\"\nbase_url = \"http://h\"\n{tok}{ids}"
        ));
        assert!(ok.is_empty(), "{ok:?}");
        let mock = with(&format!(
            "[target]\nbackend = \"mock\"\n[mock]\napi = \"openai\"\n{tok}{ids}"
        ));
        assert!(mock.is_empty(), "{mock:?}");
        let p = with(&format!(
            "[target]\nbackend = \"vllm-chat\"\nbase_url = \"http://h\"\n{tok}{ids}"
        ));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "dataset.prompt_token_ids");
        assert!(p[0].1.contains("target.backend \"vllm-chat\""), "{p:?}");
        let p = with(&format!("[target]\nbackend = \"mock\"\n{tok}{ids}"));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].1.contains("mock.api"), "{p:?}");
        let p = with(&format!(
            "[target]\nbackend = \"mock\"\n[mock]\napi = \"openai\"\n{ids}"
        ));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "dataset.prompt_token_ids");
        assert!(p[0].1.contains("[tokenizer]"), "{p:?}");
    }

    #[test]
    fn run_gates_are_checked() {
        let keys = |text: &str| -> Vec<String> { with(text).into_iter().map(|(k, _)| k).collect() };
        let base = "[target]\nbackend = \"mock\"\n";
        assert!(keys(&format!("{base}[output]\nmax_failure_ratio = 0.01\n")).is_empty());
        assert_eq!(
            keys(&format!("{base}[output]\nmax_failure_ratio = 1.5\n")),
            ["output.max_failure_ratio"]
        );
        assert!(
            keys(&format!(
                "{base}[slo]\nttft_ms = 500\nmin_attainment = 0.9\n"
            ))
            .is_empty()
        );
        assert_eq!(
            keys(&format!("{base}[slo]\nmin_attainment = 0.9\n")),
            ["slo.min_attainment"]
        );
        assert_eq!(
            keys(&format!("{base}[slo]\nttft_ms = 5\nmin_attainment = 0\n")),
            ["slo.min_attainment"]
        );
        let search = with(&format!(
            "{base}[slo]\nttft_ms = 5\nmin_attainment = 0.9\n[sweep]\nmode = \"slo\"\n"
        ));
        assert!(
            search
                .iter()
                .any(|(k, m)| k == "slo.min_attainment" && m.contains("sweep.fraction")),
            "{search:?}"
        );
    }

    #[test]
    fn dataset_values_are_checked() {
        let p = with(
            "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"trace\"\npath = \"t\"\nspeed = 0\nblock_size = 0\n",
        );
        let keys: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["dataset.block_size", "dataset.speed"], "{p:?}");
        let p = with(
            "[target]\nbackend = \"mock\"\n[tokenizer]\nsource = \"t\"\n[dataset]\nkind = \"sonnet\"\npath = \"s\"\ninput_len = 100\nprefix_len = 200\n",
        );
        assert_eq!(p[0].0, "dataset.prefix_len", "{p:?}");
        let p = with("[target]\nbackend = \"mock\"\n[dataset]\nrange_ratio = 1.0\n");
        assert_eq!(p[0].0, "dataset.range_ratio", "{p:?}");
        let p = with(
            "[target]\nbackend = \"vllm\"\nbase_url = \"http://x\"\n[dataset]\nkind = \"conversations\"\npath = \"c.jsonl\"\n",
        );
        assert_eq!(p[0].0, "target.backend", "{p:?}");
        let p = with(
            "[target]\nbackend = \"tgi\"\nbase_url = \"http://x\"\n[dataset]\nkind = \"conversations\"\npath = \"c.jsonl\"\n",
        );
        assert_eq!(p[0].0, "target.backend", "{p:?}");
        let p = with(
            "[target]\nbackend = \"mock\"\n[mock]\napi = \"triton\"\n[dataset]\nkind = \"conversations\"\npath = \"c.jsonl\"\n",
        );
        assert_eq!(p[0].0, "mock.api", "{p:?}");
        let p = with(
            "[target]\nbackend = \"llamacpp-chat\"\nbase_url = \"http://x\"\n[dataset]\nkind = \"conversations\"\npath = \"c.jsonl\"\n",
        );
        assert!(p.is_empty(), "{p:?}");
    }
}
