//! Value types with friendly TOML spellings: durations ("20m"), rates (10,
//! "inf") and sizes ("16MiB", defined with the metrics).

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as a human string ("500ms", "20m", "1h 30m") or a number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(pub Duration);

impl Span {
    /// Whole seconds.
    pub const fn secs(s: u64) -> Self {
        Span(Duration::from_secs(s))
    }

    /// Milliseconds.
    pub const fn millis(ms: u64) -> Self {
        Span(Duration::from_millis(ms))
    }

    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Span;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"500ms\", \"30s\", \"20m\" or a number of seconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Span, E> {
                parse_duration(v).map(Span).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Span, E> {
                Ok(Span(Duration::from_secs(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Span, E> {
                u64::try_from(v)
                    .map(|s| Span(Duration::from_secs(s)))
                    .map_err(|_| E::custom(format!("a duration cannot be negative, got {v}")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Span, E> {
                Duration::try_from_secs_f64(v).map(Span).map_err(|_| {
                    E::custom(format!(
                        "a duration is a number of seconds from 0 to about 1.8e19, got {v:?}"
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// Read a duration as cicada spells one everywhere (scenario files, `--set`
/// and every command-line flag), so one grammar serves them all: a number of
/// seconds ("30", "0.5") or a human string ("500ms", "30s", "20m", "1h 30m");
/// never negative.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("a duration cannot be negative, got \"{text}\""));
    }
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| {
            format!("a duration is a number of seconds from 0 to about 1.8e19, got \"{text}\"")
        });
    }
    humantime::parse_duration(t).map_err(|e| {
        format!(
            "invalid duration \"{text}\" ({e}); write it like \"500ms\", \"30s\", \"20m\" or \"1h 30m\""
        )
    })
}

/// A request rate in requests per second, or unbounded (`"inf"`: everything at t0).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Rate {
    /// Requests per second (> 0).
    Finite(f64),
    /// No pacing: every request is due at the start.
    #[default]
    Infinite,
}

impl Rate {
    /// Requests per second, `None` when unbounded.
    pub fn per_second(self) -> Option<f64> {
        match self {
            Rate::Finite(r) => Some(r),
            Rate::Infinite => None,
        }
    }

    /// Build from a float where `inf` means unbounded.
    pub fn from_f64(v: f64) -> Self {
        if v.is_infinite() && v > 0.0 {
            Rate::Infinite
        } else {
            Rate::Finite(v)
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::Finite(r) => write!(f, "{r}"),
            Rate::Infinite => f.write_str("inf"),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rate::Finite(r) => s.serialize_f64(*r),
            Rate::Infinite => s.serialize_str("inf"),
        }
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of requests per second or \"inf\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
                match v.trim().to_ascii_lowercase().as_str() {
                    "inf" | "infinity" | "+inf" => Ok(Rate::Infinite),
                    other => other.parse::<f64>().map(Rate::from_f64).map_err(|_| {
                        E::custom(format!(
                            "invalid rate \"{v}\": expected a number or \"inf\""
                        ))
                    }),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Rate, E> {
                Ok(Rate::Finite(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Rate, E> {
                Ok(Rate::Finite(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Rate, E> {
                Ok(Rate::from_f64(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// A size in bytes (`"16MiB"`); shared with the client, which quotes its limits in it.
pub use cicada_metrics::ByteSize;

/// Serde for an `f64` that may be infinite: JSON has no infinity, so it is
/// written as the string "inf" (and read back from it, or from TOML's `inf`).
pub mod f64_or_inf {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Write `inf` as the string "inf".
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_infinite() && *v > 0.0 {
            s.serialize_str("inf")
        } else {
            s.serialize_f64(*v)
        }
    }

    /// Read a number or "inf".
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Num(v) => Ok(v),
            Raw::Text(t) if matches!(t.trim(), "inf" | "infinity" | "+inf") => Ok(f64::INFINITY),
            Raw::Text(t) => Err(serde::de::Error::custom(format!(
                "expected a number or \"inf\", got \"{t}\""
            ))),
        }
    }
}

/// [`f64_or_inf`] for optional values.
pub mod opt_f64_or_inf {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Write `Some(inf)` as "inf".
    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(x) => super::f64_or_inf::serialize(x, s),
            None => s.serialize_none(),
        }
    }

    /// Read a number, "inf", or nothing.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "super::f64_or_inf")] f64);
        Option::<Wrap>::deserialize(d).map(|o| o.map(|w| w.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files and flags read durations alike (the worker's `--dial-timeout`,
    /// `cicada run --wait-workers`, a scenario's `load.duration`).
    #[test]
    fn one_duration_grammar() {
        let ok = |t: &str| parse_duration(t).unwrap();
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok(" 1h 30m "), Duration::from_secs(5400));
        assert_eq!(ok("3"), Duration::from_secs(3));
        assert_eq!(ok("0.25"), Duration::from_millis(250));
        for bad in ["twenty minutes", "3 fortnights", "-5s", "-1", "inf", ""] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        let span: Span = serde_json::from_str("\"1h 30m\"").unwrap();
        assert_eq!(span.get(), Duration::from_secs(5400));
    }

    #[derive(Deserialize, Serialize)]
    struct T {
        d: Span,
        r: Rate,
    }

    #[test]
    fn spellings() {
        let t: T = toml::from_str("d = \"20m\"\nr = \"inf\"").unwrap();
        assert_eq!(t.d.get(), Duration::from_secs(1200));
        assert_eq!(t.r, Rate::Infinite);
        let t: T = toml::from_str("d = 3\nr = 2.5").unwrap();
        assert_eq!(t.d.get(), Duration::from_secs(3));
        assert_eq!(t.r, Rate::Finite(2.5));
        let t: T = toml::from_str("d = \"250ms\"\nr = inf").unwrap();
        assert_eq!(t.d.get(), Duration::from_millis(250));
        assert_eq!(t.r, Rate::Infinite);
        assert!(toml::from_str::<T>("d = \"soon\"\nr = 1").is_err());
        assert!(toml::from_str::<T>("d = 1\nr = \"fast\"").is_err());
        let back = toml::to_string(&T {
            d: Span::millis(1500),
            r: Rate::Infinite,
        })
        .unwrap();
        assert!(
            back.contains("\"1s 500ms\"") && back.contains("\"inf\""),
            "{back}"
        );
    }

    #[test]
    fn sizes_read_with_or_without_units_and_print_exactly() {
        #[derive(Deserialize)]
        struct S {
            s: ByteSize,
        }
        let read = |t: &str| toml::from_str::<S>(t).map(|s| s.s.get());
        assert_eq!(read("s = \"16MiB\""), Ok(16 << 20));
        assert_eq!(read("s = \"16 mib\""), Ok(16 << 20));
        assert_eq!(read("s = \"1.5GB\""), Ok(1_500_000_000));
        assert_eq!(read("s = 4096"), Ok(4096));
        assert_eq!(read("s = \"4096\""), Ok(4096));
        assert!(read("s = \"lots\"").is_err());
        assert!(read("s = \"16 parsecs\"").is_err());
        assert!(read("s = -1").is_err());
        assert_eq!(ByteSize::mib(16).to_string(), "16MiB");
        assert_eq!(ByteSize(1536).to_string(), "1536B");
        assert_eq!(ByteSize(3 << 10).to_string(), "3KiB");
        assert_eq!(ByteSize(1_000_000).to_string(), "1MB");
        assert_eq!(ByteSize(1023).to_string(), "1023B");
        assert_eq!(ByteSize(0).to_string(), "0B");
        assert_eq!(
            ByteSize::parse(&ByteSize(1536).to_string()),
            Ok(ByteSize(1536))
        );
    }
}
