//! `[hooks]`: calls the coordinator makes to the server(s) under test
//! around each step (every sweep point, every `--num-runs` run): reset the
//! prefix cache before it, start the server's profiler before it and stop it
//! after, so a step starts from a cold cache or gets its own trace.

use std::fmt;

use cicada_plan::units::Span;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::backend::Backend;

/// vLLM's route that empties its prefix cache (a development route: vLLM
/// serves it only with `VLLM_SERVER_DEV_MODE=1`).
pub const VLLM_RESET_ROUTE: &str = "/reset_prefix_cache";
/// SGLang's route that empties its radix cache.
pub const SGLANG_FLUSH_ROUTE: &str = "/flush_cache";
/// The route that starts the server's profiler (vLLM and SGLang).
pub const START_PROFILE_ROUTE: &str = "/start_profile";
/// The route that stops it and writes the trace.
pub const STOP_PROFILE_ROUTE: &str = "/stop_profile";

/// The server hooks a scenario asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksSpec {
    /// Empty the server's prefix cache before each step: `true` (the route
    /// of the target's engine), `"vllm"`, `"sglang"`, or a path.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "deserialize_reset"
    )]
    pub reset_prefix_cache: Option<CacheReset>,
    /// Start the server's profiler before each step (`POST /start_profile`)
    /// and stop it after (`POST /stop_profile`).
    pub profile: bool,
    /// Longest one hook call may take (stopping a profiler writes its
    /// trace: 20 to 100 s for vLLM's tiny test model on a busy CPU).
    pub timeout: Span,
}

impl Default for HooksSpec {
    fn default() -> Self {
        Self {
            reset_prefix_cache: None,
            profile: false,
            timeout: Span::secs(300),
        }
    }
}

/// `reset_prefix_cache = true` with a backend that names no engine whose
/// reset route cicada knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "true takes the route from target.backend, and \"{backend}\" names no engine whose cache cicada knows; write \"vllm\" (POST {VLLM_RESET_ROUTE}), \"sglang\" (POST {SGLANG_FLUSH_ROUTE}) or the route's path"
)]
pub struct NoEngine {
    /// The backend's name.
    pub backend: &'static str,
}

/// How `reset_prefix_cache` is spelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheReset {
    /// `true`: the route of the engine `target.backend` names.
    Engine,
    /// `"vllm"`: `POST /reset_prefix_cache`.
    Vllm,
    /// `"sglang"`: `POST /flush_cache`.
    Sglang,
    /// A path of the user's (`"/my/reset"`), POSTed as is.
    Path(String),
}

impl HooksSpec {
    /// Nothing asked: left out of a resolved scenario.
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    /// Any hook asked for.
    pub fn any(&self) -> bool {
        self.reset_prefix_cache.is_some() || self.profile
    }

    /// The route that resets the prefix cache of `backend`'s server, if a
    /// reset is asked; `Err` when `true` meets a backend that names no engine.
    pub fn reset_route(&self, backend: Backend) -> Option<Result<String, NoEngine>> {
        Some(match self.reset_prefix_cache.as_ref()? {
            CacheReset::Vllm => Ok(VLLM_RESET_ROUTE.to_string()),
            CacheReset::Sglang => Ok(SGLANG_FLUSH_ROUTE.to_string()),
            CacheReset::Path(p) => Ok(p.clone()),
            CacheReset::Engine => engine_route(backend).map(str::to_string).ok_or(NoEngine {
                backend: backend.name(),
            }),
        })
    }

    /// Its problems as (dotted key, message).
    pub fn problems(&self, backend: Backend) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(Err(e)) = self.reset_route(backend) {
            out.push(("hooks.reset_prefix_cache".to_string(), e.to_string()));
        }
        if self.timeout.get().is_zero() {
            out.push((
                "hooks.timeout".to_string(),
                "0: a hook call needs some time (e.g. \"5m\")".to_string(),
            ));
        }
        out
    }
}

/// The prefix-cache route of the engine a backend names (the embedded mock
/// serves vLLM's).
fn engine_route(backend: Backend) -> Option<&'static str> {
    match backend {
        Backend::Vllm
        | Backend::VllmChat
        | Backend::VllmRerank
        | Backend::VllmPooling
        | Backend::VllmScore
        | Backend::Mock => Some(VLLM_RESET_ROUTE),
        Backend::Sglang | Backend::SglangChat => Some(SGLANG_FLUSH_ROUTE),
        _ => None,
    }
}

impl Serialize for CacheReset {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CacheReset::Engine => s.serialize_bool(true),
            CacheReset::Vllm => s.serialize_str("vllm"),
            CacheReset::Sglang => s.serialize_str("sglang"),
            CacheReset::Path(p) => s.serialize_str(p),
        }
    }
}

/// `reset_prefix_cache`'s value: `false` is no reset at all.
fn reset_of<E: de::Error>(v: &str) -> Result<CacheReset, E> {
    match v {
        "vllm" => Ok(CacheReset::Vllm),
        "sglang" => Ok(CacheReset::Sglang),
        p if p.starts_with('/') && !p.chars().any(char::is_whitespace) => {
            Ok(CacheReset::Path(p.to_string()))
        }
        _ => Err(E::invalid_value(de::Unexpected::Str(v), &EXPECTED)),
    }
}

const EXPECTED: &str = "true, false, \"vllm\", \"sglang\" or a path starting with /";

/// `Option<CacheReset>` from `true | false | "vllm" | "sglang" | "/path"`.
fn deserialize_reset<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CacheReset>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = Option<CacheReset>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(EXPECTED)
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok(v.then_some(CacheReset::Engine))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            reset_of(v).map(Some)
        }
    }
    d.deserialize_any(V)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HooksSpec, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn every_spelling_reads_and_writes_back() {
        for (text, want) in [
            ("reset_prefix_cache = true", Some(CacheReset::Engine)),
            ("reset_prefix_cache = \"vllm\"", Some(CacheReset::Vllm)),
            ("reset_prefix_cache = \"sglang\"", Some(CacheReset::Sglang)),
            (
                "reset_prefix_cache = \"/admin/reset\"",
                Some(CacheReset::Path("/admin/reset".into())),
            ),
        ] {
            let h = parse(text).unwrap();
            assert_eq!(h.reset_prefix_cache, want, "{text}");
            let back = toml::to_string(&h).unwrap();
            assert_eq!(parse(&back).unwrap(), h, "{back}");
        }
        let off = parse("reset_prefix_cache = false").unwrap();
        assert!(off.is_unset());
        for bad in ["reset_prefix_cache = \"vlm\"", "reset_prefix_cache = 3"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("\"vllm\", \"sglang\" or a path"), "{bad}: {e}");
        }
    }

    #[test]
    fn true_takes_the_route_of_the_backends_engine() {
        let h = HooksSpec {
            reset_prefix_cache: Some(CacheReset::Engine),
            ..HooksSpec::default()
        };
        assert_eq!(
            h.reset_route(Backend::VllmChat),
            Some(Ok(VLLM_RESET_ROUTE.into()))
        );
        assert_eq!(
            h.reset_route(Backend::Sglang),
            Some(Ok(SGLANG_FLUSH_ROUTE.into()))
        );
        let p = h.problems(Backend::OpenaiChat);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0, "hooks.reset_prefix_cache");
        assert!(p[0].1.contains("\"openai-chat\" names no engine"), "{p:?}");
        assert!(HooksSpec::default().reset_route(Backend::Vllm).is_none());
    }
}
