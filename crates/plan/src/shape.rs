//! The parts of a load shape a plan carries: closed-loop users' think time,
//! warm-up and cool-down, rate ramps. (`[[stages]]` and `[sweep]` are the
//! scenario's; a plan holds their windows and rates.)

use std::fmt;
use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::units::Span;

/// How long a closed-loop user waits after a response before its next request.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum ThinkTime {
    /// No wait.
    #[default]
    None,
    /// Always the same wait: `think_time = "1s"`.
    Constant(Span),
    /// Uniform between two bounds: `think_time = { uniform = ["0.5s", "2s"] }`.
    Uniform(Span, Span),
    /// Exponential with a mean: `think_time = { exponential = "1s" }`.
    Exponential(Span),
}

impl ThinkTime {
    /// Draw one wait from `u`, a uniform number in [0, 1).
    pub fn sample(&self, u: f64) -> Duration {
        match *self {
            ThinkTime::None => Duration::ZERO,
            ThinkTime::Constant(d) => d.get(),
            ThinkTime::Uniform(lo, hi) => {
                let (lo, hi) = (lo.get().as_secs_f64(), hi.get().as_secs_f64());
                Duration::from_secs_f64(lo + (hi - lo).max(0.0) * u)
            }
            ThinkTime::Exponential(mean) => Duration::from_secs_f64(
                -mean.get().as_secs_f64() * (1.0 - u).max(f64::MIN_POSITIVE).ln(),
            ),
        }
    }
}

impl Serialize for ThinkTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            ThinkTime::None => Span::secs(0).serialize(s),
            ThinkTime::Constant(d) => d.serialize(s),
            ThinkTime::Uniform(lo, hi) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("uniform", &[lo, hi])?;
                m.end()
            }
            ThinkTime::Exponential(mean) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("exponential", mean)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for ThinkTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ThinkTime;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a duration (\"1s\"), { uniform = [\"0.5s\", \"2s\"] } or { exponential = \"1s\" }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ThinkTime, E> {
                let span = Span::deserialize(de::value::StrDeserializer::<E>::new(v))?;
                Ok(if span.get().is_zero() {
                    ThinkTime::None
                } else {
                    ThinkTime::Constant(span)
                })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ThinkTime, E> {
                Ok(if v == 0 {
                    ThinkTime::None
                } else {
                    ThinkTime::Constant(Span::secs(v))
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ThinkTime, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom("think time cannot be negative"))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ThinkTime, E> {
                Duration::try_from_secs_f64(v)
                    .map(|d| {
                        if d.is_zero() {
                            ThinkTime::None
                        } else {
                            ThinkTime::Constant(Span(d))
                        }
                    })
                    .map_err(|_| E::custom(format!("invalid think time {v}")))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ThinkTime, A::Error> {
                let key: String = map
                    .next_key()?
                    .ok_or_else(|| de::Error::custom("empty think_time table"))?;
                let value = match key.as_str() {
                    "uniform" => {
                        let [lo, hi]: [Span; 2] = map.next_value()?;
                        if hi < lo {
                            return Err(de::Error::custom(
                                "uniform think time: the upper bound is below the lower",
                            ));
                        }
                        ThinkTime::Uniform(lo, hi)
                    }
                    "exponential" => ThinkTime::Exponential(map.next_value()?),
                    "constant" => ThinkTime::Constant(map.next_value()?),
                    other => {
                        return Err(de::Error::unknown_field(
                            other,
                            &["constant", "uniform", "exponential"],
                        ));
                    }
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "think_time takes one distribution, found also `{extra}`"
                    )));
                }
                Ok(value)
            }
        }
        d.deserialize_any(V)
    }
}

/// Requests sent before measuring starts; their results are kept apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Warmup {
    /// The first N requests of the global schedule: `warmup = { requests = 100 }`.
    Requests(u64),
    /// Everything scheduled in the first span: `warmup = "30s"` or `{ duration = "30s" }`.
    Duration(Span),
}

impl Warmup {
    /// Whether request `index`, due `offset` after the barrier, is a warm-up request.
    pub fn covers(&self, index: u64, offset: Duration) -> bool {
        match *self {
            Warmup::Requests(n) => index < n,
            Warmup::Duration(d) => offset < d.get(),
        }
    }
}

impl<'de> Deserialize<'de> for Warmup {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Warmup;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration (\"30s\"), { requests = N } or { duration = \"30s\" }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Warmup, E> {
                Span::deserialize(de::value::StrDeserializer::<E>::new(v)).map(Warmup::Duration)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Warmup, A::Error> {
                let key: String = map
                    .next_key()?
                    .ok_or_else(|| de::Error::custom("empty warmup table"))?;
                let value = match key.as_str() {
                    "requests" => Warmup::Requests(map.next_value()?),
                    "duration" => Warmup::Duration(map.next_value()?),
                    other => {
                        return Err(de::Error::unknown_field(other, &["requests", "duration"]));
                    }
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "warmup takes requests or duration, found also `{extra}`"
                    )));
                }
                Ok(value)
            }
        }
        d.deserialize_any(V)
    }
}

/// What happens to requests still in flight when a duration-bound run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Cooldown {
    /// Let them finish and count them.
    #[default]
    Finish,
    /// Cancel them; they are counted as `cancelled`.
    Cancel,
}

/// How the rate grows over a ramp (vLLM's `--ramp-up-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RampStrategy {
    /// `start + (end − start)·p`.
    Linear,
    /// `start·(end/start)^p`.
    Exponential,
}

/// A rate ramp from `start_rps` to `end_rps` over the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ramp {
    pub strategy: RampStrategy,
    pub start_rps: f64,
    pub end_rps: f64,
}

impl Ramp {
    /// The rate at progress `p` in [0, 1].
    pub fn rate_at(&self, p: f64) -> f64 {
        let p = p.clamp(0.0, 1.0);
        match self.strategy {
            RampStrategy::Linear => self.start_rps + (self.end_rps - self.start_rps) * p,
            RampStrategy::Exponential => self.start_rps * (self.end_rps / self.start_rps).powf(p),
        }
    }

    /// The time `t` (seconds) at which the expected number of arrivals of a
    /// ramp over `duration` seconds reaches `lambda`: the inverse of
    /// `Λ(t) = ∫₀ᵗ rate`. Drawing unit-mean gaps in Λ and mapping them back
    /// gives the non-homogeneous process (time-rescaling theorem).
    pub fn time_at_integral(&self, lambda: f64, duration: f64) -> f64 {
        let (s, e, d) = (
            self.start_rps,
            self.end_rps,
            duration.max(f64::MIN_POSITIVE),
        );
        match self.strategy {
            RampStrategy::Linear => {
                // Λ(t) = s·t + (e − s)·t² / (2d)
                let a = (e - s) / (2.0 * d);
                if a.abs() < 1e-12 {
                    lambda / s.max(f64::MIN_POSITIVE)
                } else {
                    (-s + (s * s + 4.0 * a * lambda).max(0.0).sqrt()) / (2.0 * a)
                }
            }
            RampStrategy::Exponential => {
                // Λ(t) = s·d/ln k · (k^(t/d) − 1), k = e/s
                let k = (e / s).ln();
                if k.abs() < 1e-12 {
                    lambda / s
                } else {
                    d / k * (1.0 + lambda * k / (s * d)).max(f64::MIN_POSITIVE).ln()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct T {
        #[serde(default)]
        think: ThinkTime,
        #[serde(default)]
        warm: Option<Warmup>,
    }

    fn parse(s: &str) -> Result<T, String> {
        toml::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn think_time_spellings() {
        assert_eq!(
            parse("think = \"2s\"").unwrap().think,
            ThinkTime::Constant(Span::secs(2))
        );
        assert_eq!(parse("think = 0").unwrap().think, ThinkTime::None);
        assert_eq!(
            parse("think = { uniform = [\"1s\", \"3s\"] }")
                .unwrap()
                .think,
            ThinkTime::Uniform(Span::secs(1), Span::secs(3))
        );
        assert_eq!(
            parse("think = { exponential = \"500ms\" }").unwrap().think,
            ThinkTime::Exponential(Span::millis(500))
        );
        assert!(
            parse("think = { gamma = \"1s\" }")
                .unwrap_err()
                .contains("gamma")
        );
        assert!(parse("think = { uniform = [\"3s\", \"1s\"] }").is_err());
        assert!(parse("think = -1").is_err());
        let u = ThinkTime::Uniform(Span::secs(1), Span::secs(3));
        assert_eq!(u.sample(0.5), Duration::from_secs(2));
        let mean: f64 = (0..10_000)
            .map(|i| {
                ThinkTime::Exponential(Span::secs(1))
                    .sample((f64::from(i) + 0.5) / 10_000.0)
                    .as_secs_f64()
            })
            .sum::<f64>()
            / 10_000.0;
        assert!((mean - 1.0).abs() < 0.01, "{mean}");
    }

    #[test]
    fn warmup_spellings() {
        assert_eq!(
            parse("warm = \"30s\"").unwrap().warm,
            Some(Warmup::Duration(Span::secs(30)))
        );
        assert_eq!(
            parse("warm = { requests = 5 }").unwrap().warm,
            Some(Warmup::Requests(5))
        );
        assert!(parse("warm = { requests = 5, duration = \"1s\" }").is_err());
        assert!(Warmup::Requests(5).covers(4, Duration::from_secs(100)));
        assert!(!Warmup::Requests(5).covers(5, Duration::ZERO));
        assert!(Warmup::Duration(Span::secs(2)).covers(99, Duration::from_millis(1999)));
    }

    #[test]
    fn ramps() {
        let lin = Ramp {
            strategy: RampStrategy::Linear,
            start_rps: 2.0,
            end_rps: 10.0,
        };
        assert_eq!(lin.rate_at(0.5), 6.0);
        let exp = Ramp {
            strategy: RampStrategy::Exponential,
            start_rps: 1.0,
            end_rps: 100.0,
        };
        assert!((exp.rate_at(0.5) - 10.0).abs() < 1e-9);
        // the integral of the whole ramp is reached at its end
        let zero = Ramp {
            strategy: RampStrategy::Linear,
            start_rps: 0.0,
            end_rps: 50.0,
        };
        assert!((zero.time_at_integral(500.0, 20.0) - 20.0).abs() < 1e-9);
        assert!((lin.time_at_integral(120.0, 20.0) - 20.0).abs() < 1e-9);
        let total = 1.0 * 20.0 / 100f64.ln() * 99.0;
        assert!((exp.time_at_integral(total, 20.0) - 20.0).abs() < 1e-9);
        let flat = Ramp {
            strategy: RampStrategy::Linear,
            start_rps: 5.0,
            end_rps: 5.0,
        };
        assert!((flat.time_at_integral(10.0, 20.0) - 2.0).abs() < 1e-9);
    }
}
