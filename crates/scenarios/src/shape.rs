//! The scenario's load shapes over time: `[[stages]]` and `[sweep]`. (The
//! parts a plan carries, think time, warm-up, cool-down and ramps, are the
//! plan crate's: `cicada_plan::shape`.)

use std::fmt;

use cicada_plan::units::{Rate, Span};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// One step of a `[[stages]]` load shape (Locust's LoadTestShape): run for
/// `duration` at a rate or with a number of users. Stages follow each other
/// without a pause; results are reported per stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    /// Label in results (default "stage-<n>").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How long the stage lasts.
    pub duration: Span,
    /// Open loop: arrival rate during the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<Rate>,
    /// Open loop: gamma shape of the gaps (default: `load.burstiness`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "cicada_plan::units::opt_f64_or_inf"
    )]
    pub burstiness: Option<f64>,
    /// Closed loop: users active during the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u32>,
    /// Closed loop: users started per second when the count grows (default: `load.spawn_rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_rate: Option<f64>,
}

/// How a sweep chooses its stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SweepMode {
    /// One stage per listed value.
    #[default]
    List,
    /// GuideLLM's sweep: a synchronous run, a max-throughput run, then evenly spaced rates between.
    Auto,
    /// Bisect for the highest rate whose goodput meets the `[slo]` for `fraction` of requests.
    Slo,
}

/// `[sweep]`: run the scenario several times with one load key varied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Sweep {
    pub mode: SweepMode,
    /// list: one stage per concurrency cap.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub max_concurrency: Vec<u32>,
    /// list: one stage per request rate.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request_rate: Vec<Rate>,
    /// list: one stage per user count (closed loop).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<u32>,
    /// Wait between stages (let the server settle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause: Option<Span>,
    /// auto: total stages including the synchronous and throughput ones (GuideLLM default 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub points: Option<u32>,
    /// slo: lowest rate to consider, req/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rate: Option<f64>,
    /// slo: highest rate to consider, req/s (default: measured by a max-throughput stage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<f64>,
    /// slo: stop when the bracket is this narrow, req/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<f64>,
    /// slo: share of requests that must meet every SLO (default 0.9).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
}

impl Sweep {
    /// GuideLLM's default number of sweep stages.
    pub const DEFAULT_POINTS: u32 = 10;
    /// Default SLO attainment for the capacity search.
    pub const DEFAULT_FRACTION: f64 = 0.9;

    /// Lists given (key name, number of values), for validation.
    pub fn lists(&self) -> Vec<(&'static str, usize)> {
        [
            ("max_concurrency", self.max_concurrency.len()),
            ("request_rate", self.request_rate.len()),
            ("users", self.users.len()),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

/// Accepts `sweep = "auto"` / `sweep = "slo"` as well as a `[sweep]` table.
pub(crate) fn deserialize_sweep<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Sweep>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Sweep>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a [sweep] table, or \"auto\" or \"slo\"")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            let mode = match v {
                "auto" => SweepMode::Auto,
                "slo" => SweepMode::Slo,
                other => return Err(E::unknown_variant(other, &["auto", "slo"])),
            };
            Ok(Some(Sweep {
                mode,
                ..Sweep::default()
            }))
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            Sweep::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }
    d.deserialize_any(V)
}

/// Evenly spaced rates of GuideLLM's sweep between a synchronous and a
/// throughput rate: `linspace(sync, throughput, points − 1)[1:]`.
pub fn auto_rates(sync_rate: f64, throughput_rate: f64, points: u32) -> Vec<f64> {
    let n = points.max(3) - 1;
    (1..n)
        .map(|k| sync_rate + (throughput_rate - sync_rate) * f64::from(k) / f64::from(n - 1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct T {
        #[serde(default, deserialize_with = "deserialize_sweep")]
        sweep: Option<Sweep>,
    }

    fn parse(s: &str) -> Result<T, String> {
        toml::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn sweep_spellings() {
        assert_eq!(
            parse("sweep = \"auto\"").unwrap().sweep.unwrap().mode,
            SweepMode::Auto
        );
        let s = parse("[sweep]\nmax_concurrency = [1, 4, 16]\npause = \"2s\"")
            .unwrap()
            .sweep
            .unwrap();
        assert_eq!(s.max_concurrency, vec![1, 4, 16]);
        assert_eq!(s.lists(), vec![("max_concurrency", 3)]);
        assert!(parse("sweep = \"fast\"").is_err());
        assert!(parse("[sweep]\nbogus = 1").unwrap_err().contains("bogus"));
    }

    #[test]
    fn auto_rates_space_evenly() {
        // GuideLLM: 10 points -> 8 rates from linspace(sync, thr, 9)[1:]
        let r = auto_rates(1.0, 9.0, 10);
        assert_eq!(r.len(), 8);
        assert_eq!(r[0], 2.0);
        assert_eq!(*r.last().unwrap(), 9.0);
    }
}
