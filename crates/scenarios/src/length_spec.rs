//! `input_len` and `output_len` of the synthetic workloads: a whole number
//! (that length, or uniform within `range_ratio` of it, as always), or a
//! table drawing each request's length from a distribution, clipped to
//! `min`/`max`:
//!
//! ```toml
//! [dataset.input_len]
//! dist = "lognormal"
//! mean = 1000
//! sigma = 0.5
//! min = 16
//! max = 8192
//! ```
//!
//! or a weighted mix of such tables (`[[dataset.output_len.mix]]`, each with
//! a `weight`). The table is read here by hand, so a wrong key names itself
//! (`input_len.sigma`) and its line; values are checked by [`Length::problems`].

use std::fmt;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A token length of a synthetic workload: one number, or a distribution.
#[derive(Debug, Clone, PartialEq)]
pub enum Length {
    /// `input_len = 1000`: that length (uniform within `range_ratio` of it).
    Fixed(u32),
    /// `[dataset.input_len]`: drawn per request.
    Drawn(LengthDist),
}

impl From<u32> for Length {
    fn from(n: u32) -> Self {
        Length::Fixed(n)
    }
}

/// A distribution of lengths, clipped to `[min, max]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LengthDist {
    /// What is drawn before clipping.
    pub shape: Shape,
    /// Shorter draws are raised to it (default 1).
    pub min: Option<i64>,
    /// Longer draws are lowered to it (default none).
    pub max: Option<i64>,
}

/// The distributions a length is drawn from (`dist`), or a mix of them.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// Every whole length from `min` to `max`, equally likely.
    Uniform,
    /// Gaussian (GuideLLM's `stdev`, AIPerf's `stddev`), rounded.
    Normal { mean: f64, stdev: f64 },
    /// Log-normal with this mean (of the lengths, not their log) and `sigma`
    /// (the standard deviation of their log), rounded.
    Lognormal { mean: f64, sigma: f64 },
    /// `min + k - 1` with probability proportional to `k^-exponent`, up to `max`.
    Zipf { exponent: f64 },
    /// Always `value`.
    Constant { value: i64 },
    /// One of the components, picked by weight per request.
    Mix(Vec<Weighted>),
}

/// A component of a mix and its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighted {
    /// Relative weight (the weights are normalised to sum to 1).
    pub weight: f64,
    /// The component, with its own clipping.
    pub dist: LengthDist,
}

/// The values of `dist`, for messages.
pub const DISTS: [&str; 5] = ["uniform", "normal", "lognormal", "zipf", "constant"];

impl Shape {
    /// The name as written in `dist` (`mix` for a mix).
    pub fn name(&self) -> &'static str {
        match self {
            Shape::Uniform => "uniform",
            Shape::Normal { .. } => "normal",
            Shape::Lognormal { .. } => "lognormal",
            Shape::Zipf { .. } => "zipf",
            Shape::Constant { .. } => "constant",
            Shape::Mix(_) => "mix",
        }
    }
}

impl Length {
    /// The one length of a plain number; `None` for a distribution.
    pub fn fixed(&self) -> Option<u32> {
        match self {
            Length::Fixed(n) => Some(*n),
            Length::Drawn(_) => None,
        }
    }

    /// A length no draw is likely to pass (for sizing a pool): the top of a
    /// plain length's range, a distribution's `max`, or far in its tail.
    pub fn longest(&self, range_ratio: f64) -> f64 {
        match self {
            Length::Fixed(n) => f64::from(*n) * (1.0 + range_ratio),
            Length::Drawn(d) => d.longest(),
        }
    }

    /// Problems with the values, as (dotted key under `key`, message).
    pub fn problems(&self, key: &str) -> Vec<(String, String)> {
        match self {
            Length::Fixed(0) => vec![(key.to_string(), "must be at least 1".to_string())],
            Length::Fixed(_) => Vec::new(),
            Length::Drawn(d) => {
                let mut out = Vec::new();
                d.problems(key, &mut out);
                out
            }
        }
    }
}

impl LengthDist {
    fn longest(&self) -> f64 {
        let tail = match &self.shape {
            Shape::Uniform | Shape::Zipf { .. } => f64::INFINITY,
            Shape::Normal { mean, stdev } => mean + 6.0 * stdev,
            Shape::Lognormal { mean, sigma } => {
                (mean.max(1.0).ln() - sigma * sigma / 2.0 + 6.0 * sigma).exp()
            }
            Shape::Constant { value } => *value as f64,
            Shape::Mix(parts) => parts.iter().map(|p| p.dist.longest()).fold(0.0, f64::max),
        };
        let tail = tail.max(self.min.unwrap_or(1) as f64);
        match self.max {
            Some(max) => tail.min(max as f64),
            None => tail,
        }
    }

    fn problems(&self, key: &str, out: &mut Vec<(String, String)>) {
        let mut bad = |k: &str, m: String| out.push((format!("{key}.{k}"), m));
        for (k, v) in [("min", self.min), ("max", self.max)] {
            match v {
                Some(v) if v < 1 => bad(k, format!("must be at least 1, got {v}")),
                Some(v) if v > i64::from(u32::MAX) => {
                    bad(k, format!("must be at most {}, got {v}", u32::MAX));
                }
                _ => {}
            }
        }
        if let (Some(lo), Some(hi)) = (self.min, self.max)
            && lo > hi
        {
            bad("min", format!("must not exceed max ({hi}), got {lo}"));
        }
        let finite = |v: f64| v.is_finite();
        match &self.shape {
            Shape::Uniform => {}
            Shape::Normal { mean, stdev } => {
                if !(finite(*mean) && *mean > 0.0) {
                    bad("mean", format!("must be a positive number, got {mean}"));
                }
                if !(finite(*stdev) && *stdev >= 0.0) {
                    bad("stdev", format!("must be ≥ 0, got {stdev}"));
                }
            }
            Shape::Lognormal { mean, sigma } => {
                if !(finite(*mean) && *mean > 0.0) {
                    bad("mean", format!("must be a positive number, got {mean}"));
                }
                if !(finite(*sigma) && *sigma >= 0.0) {
                    bad("sigma", format!("must be ≥ 0, got {sigma}"));
                }
            }
            Shape::Zipf { exponent } => {
                if !(finite(*exponent) && *exponent >= 0.0) {
                    bad("exponent", format!("must be ≥ 0, got {exponent}"));
                }
            }
            Shape::Constant { value } => {
                if *value < 1 || *value > i64::from(u32::MAX) {
                    bad(
                        "value",
                        format!("must be from 1 to {}, got {value}", u32::MAX),
                    );
                }
            }
            Shape::Mix(parts) => {
                for (i, p) in parts.iter().enumerate() {
                    let at = format!("{key}.mix[{i}]");
                    if !(finite(p.weight) && p.weight >= 0.0) {
                        out.push((
                            format!("{at}.weight"),
                            format!("must be ≥ 0, got {}", p.weight),
                        ));
                    }
                    p.dist.problems(&at, out);
                }
                let sum: f64 = parts.iter().map(|p| p.weight).sum();
                if parts
                    .iter()
                    .all(|p| p.weight.is_finite() && p.weight >= 0.0)
                {
                    let why = if sum <= 0.0 {
                        "the weights sum to zero: give at least one component a weight above 0"
                    } else if !sum.is_finite() {
                        "the weights' sum is too large to be a number: scale them down"
                    } else {
                        ""
                    };
                    if !why.is_empty() {
                        out.push((format!("{key}.mix"), why.to_string()));
                    }
                }
            }
        }
    }
}

impl fmt::Display for Length {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Length::Fixed(n) => write!(f, "{n}"),
            Length::Drawn(d) => write!(f, "{d}"),
        }
    }
}

impl fmt::Display for LengthDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.shape {
            Shape::Uniform => write!(f, "uniform")?,
            Shape::Normal { mean, stdev } => write!(f, "normal(mean {mean}, stdev {stdev})")?,
            Shape::Lognormal { mean, sigma } => {
                write!(f, "lognormal(mean {mean}, sigma {sigma})")?;
            }
            Shape::Zipf { exponent } => write!(f, "zipf(exponent {exponent})")?,
            Shape::Constant { value } => write!(f, "constant {value}")?,
            Shape::Mix(parts) => {
                let total: f64 = parts.iter().map(|p| p.weight).sum();
                let parts: Vec<String> = parts
                    .iter()
                    .map(|p| format!("{:.0}% {}", 100.0 * p.weight / total, p.dist))
                    .collect();
                write!(f, "mix[{}]", parts.join(", "))?;
            }
        }
        match (self.min, self.max) {
            (None, None) => Ok(()),
            (lo, Some(hi)) => write!(f, " in [{}, {hi}]", lo.unwrap_or(1)),
            (Some(lo), None) => write!(f, " from {lo}"),
        }
    }
}

/// A problem inside the length's table, as `at `key`: message`, which the
/// dataset's reader prefixes with the length's own key.
#[derive(Debug, Error)]
#[error("{0}")]
pub(crate) struct LengthSpecError(String);

fn at(key: &str, message: impl fmt::Display) -> LengthSpecError {
    LengthSpecError(format!("at `{key}`: {message}"))
}

/// What a TOML value is, in TOML's words (`a string`).
fn a(v: &toml::Value) -> String {
    let t = v.type_str();
    let article = if t.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {t}")
}

/// Reads one length table: its keys, checked against what its `dist` takes.
struct Reader<'t> {
    table: &'t toml::Table,
    /// Where this table sits below the length's key (`""`, `mix[1].`).
    prefix: String,
}

impl Reader<'_> {
    fn key(&self, k: &str) -> String {
        format!("{}{k}", self.prefix)
    }

    fn number(&self, k: &str) -> Result<Option<f64>, LengthSpecError> {
        match self.table.get(k) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) => Ok(Some(*n as f64)),
            Some(toml::Value::Float(x)) => Ok(Some(*x)),
            Some(v) => Err(at(
                &self.key(k),
                format!("invalid type: {}, expected a number", a(v)),
            )),
        }
    }

    fn whole(&self, k: &str) -> Result<Option<i64>, LengthSpecError> {
        match self.table.get(k) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) => Ok(Some(*n)),
            Some(v) => Err(at(
                &self.key(k),
                format!("invalid type: {}, expected a whole number", a(v)),
            )),
        }
    }

    fn required<T>(
        &self,
        k: &str,
        v: Option<T>,
        dist: &str,
        why: &str,
    ) -> Result<T, LengthSpecError> {
        v.ok_or_else(|| at(&self.key(k), format!("required for dist \"{dist}\"{why}")))
    }

    /// Refuse keys outside `allowed`, naming the ones that are.
    fn only(&self, allowed: &[&str], what: &str) -> Result<(), LengthSpecError> {
        match self.table.keys().find(|k| !allowed.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) => {
                let expected: Vec<String> = allowed.iter().map(|k| format!("`{k}`")).collect();
                Err(at(
                    &self.key(k),
                    format!(
                        "unknown key for {what}; expected one of {}",
                        expected.join(", ")
                    ),
                ))
            }
        }
    }

    /// A `mix` of components, each a weighted table.
    fn mix(
        &self,
        mix: &toml::Value,
        min: Option<i64>,
        max: Option<i64>,
    ) -> Result<LengthDist, LengthSpecError> {
        self.only(&["mix", "min", "max"], "a mix")?;
        let toml::Value::Array(items) = mix else {
            return Err(at(
                "mix",
                format!(
                    "must be an array of tables (`[[...mix]]`, each with a `weight`), got {}",
                    a(mix)
                ),
            ));
        };
        if items.is_empty() {
            return Err(at("mix", "needs at least one component"));
        }
        let mut parts = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let key = format!("mix[{i}]");
            let toml::Value::Table(t) = item else {
                return Err(at(&key, format!("must be a table, got {}", a(item))));
            };
            let r = Reader {
                table: t,
                prefix: format!("{key}."),
            };
            let weight = r.number("weight")?;
            let weight = weight.ok_or_else(|| at(&r.key("weight"), "required in a mix"))?;
            parts.push(Weighted {
                weight,
                dist: r.dist(true)?,
            });
        }
        Ok(LengthDist {
            shape: Shape::Mix(parts),
            min,
            max,
        })
    }

    fn dist(&self, in_mix: bool) -> Result<LengthDist, LengthSpecError> {
        let (min, max) = (self.whole("min")?, self.whole("max")?);
        let weight: &[&str] = if in_mix { &["weight"] } else { &[] };
        if let Some(mix) = self.table.get("mix") {
            if in_mix {
                return Err(at(&self.key("mix"), "a mix's component cannot be a mix"));
            }
            return self.mix(mix, min, max);
        }
        let Some(dist) = self.table.get("dist") else {
            return Err(at(
                &self.key("dist"),
                format!(
                    "required: one of {}{}",
                    DISTS.join(", "),
                    if in_mix { "" } else { " (or a `mix`)" }
                ),
            ));
        };
        let name = match dist {
            toml::Value::String(s) => s.as_str(),
            v => {
                return Err(at(
                    &self.key("dist"),
                    format!("invalid type: {}, expected a string", a(v)),
                ));
            }
        };
        let keys = |own: &[&'static str]| -> Vec<&str> {
            let mut k: Vec<&str> = ["dist", "min", "max"].to_vec();
            k.extend_from_slice(own);
            k.extend_from_slice(weight);
            k
        };
        let what = format!("dist \"{name}\"");
        let shape = match name {
            "uniform" => {
                self.only(&keys(&[]), &what)?;
                self.required("min", min, name, " (the shortest length)")?;
                self.required("max", max, name, " (the longest length)")?;
                Shape::Uniform
            }
            "normal" => {
                self.only(&keys(&["mean", "stdev", "stddev"]), &what)?;
                let stdev = match (self.number("stdev")?, self.number("stddev")?) {
                    (Some(_), Some(_)) => {
                        return Err(at(
                            &self.key("stddev"),
                            "give `stdev` or `stddev` (the same key), not both",
                        ));
                    }
                    (s, t) => s.or(t),
                };
                Shape::Normal {
                    mean: self.required("mean", self.number("mean")?, name, "")?,
                    stdev: self.required("stdev", stdev, name, "")?,
                }
            }
            "lognormal" => {
                self.only(&keys(&["mean", "sigma"]), &what)?;
                let unbounded = " (its tail is unbounded: clip it, e.g. max = 8192)";
                self.required("max", max, name, unbounded)?;
                Shape::Lognormal {
                    mean: self.required("mean", self.number("mean")?, name, "")?,
                    sigma: self.required("sigma", self.number("sigma")?, name, "")?,
                }
            }
            "zipf" => {
                self.only(&keys(&["exponent"]), &what)?;
                self.required("max", max, name, " (the longest length)")?;
                Shape::Zipf {
                    exponent: self.required("exponent", self.number("exponent")?, name, "")?,
                }
            }
            "constant" => {
                self.only(&keys(&["value"]), &what)?;
                Shape::Constant {
                    value: self.required("value", self.whole("value")?, name, "")?,
                }
            }
            other => {
                return Err(at(
                    &self.key("dist"),
                    format!(
                        "unknown value \"{other}\"; expected one of {}",
                        DISTS.join(", ")
                    ),
                ));
            }
        };
        Ok(LengthDist { shape, min, max })
    }
}

impl<'de> Deserialize<'de> for Length {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = toml::Value::deserialize(d)?;
        match &v {
            toml::Value::Integer(n) => u32::try_from(*n).map(Length::Fixed).map_err(|_| {
                de::Error::custom(format!(
                    "invalid value: {n}, expected a whole number of tokens from 1 to {}",
                    u32::MAX
                ))
            }),
            toml::Value::Table(t) => Reader {
                table: t,
                prefix: String::new(),
            }
            .dist(false)
            .map(Length::Drawn)
            .map_err(de::Error::custom),
            other => Err(de::Error::custom(format!(
                "invalid type: {} {other}, expected a whole number from 0 to {}, or a table with `dist` (e.g. {{ dist = \"normal\", mean = 1000, stdev = 200 }})",
                other.type_str(),
                u32::MAX
            ))),
        }
    }
}

impl Serialize for Length {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Length::Fixed(n) => s.serialize_u32(*n),
            Length::Drawn(d) => d.serialize(s),
        }
    }
}

impl LengthDist {
    /// The table's entries as the scenario file spells them.
    fn entries(&self) -> Vec<(&'static str, toml::Value)> {
        use toml::Value as V;
        let mut out = Vec::new();
        match &self.shape {
            // written by `serialize`, so a component's keys keep their order
            Shape::Mix(_) => {}
            shape => {
                out.push(("dist", V::String(shape.name().into())));
                match shape {
                    Shape::Normal { mean, stdev } => {
                        out.push(("mean", V::Float(*mean)));
                        out.push(("stdev", V::Float(*stdev)));
                    }
                    Shape::Lognormal { mean, sigma } => {
                        out.push(("mean", V::Float(*mean)));
                        out.push(("sigma", V::Float(*sigma)));
                    }
                    Shape::Zipf { exponent } => out.push(("exponent", V::Float(*exponent))),
                    Shape::Constant { value } => out.push(("value", V::Integer(*value))),
                    Shape::Uniform | Shape::Mix(_) => {}
                }
            }
        }
        for (k, v) in [("min", self.min), ("max", self.max)] {
            if let Some(v) = v {
                out.push((k, V::Integer(v)));
            }
        }
        out
    }
}

/// A mix's component as written: its weight, then its distribution's keys.
struct Component<'a>(&'a Weighted);

impl Serialize for Component<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let entries = self.0.dist.entries();
        let mut m = s.serialize_map(Some(entries.len() + 1))?;
        m.serialize_entry("weight", &self.0.weight)?;
        for (k, v) in &entries {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Serialize for LengthDist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let entries = self.entries();
        let mut m = s.serialize_map(None)?;
        if let Shape::Mix(parts) = &self.shape {
            let parts: Vec<Component<'_>> = parts.iter().map(Component).collect();
            m.serialize_entry("mix", &parts)?;
        }
        for (k, v) in &entries {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Length, String> {
        #[derive(Deserialize)]
        struct T {
            len: Length,
        }
        toml::from_str::<T>(text)
            .map(|t| t.len)
            .map_err(|e| e.message().to_string())
    }

    #[test]
    fn a_plain_number_or_a_table() {
        assert_eq!(read("len = 7").unwrap(), Length::Fixed(7));
        let l =
            read("len = { dist = \"lognormal\", mean = 1000, sigma = 0.5, min = 16, max = 8192 }")
                .unwrap();
        assert_eq!(
            l,
            Length::Drawn(LengthDist {
                shape: Shape::Lognormal {
                    mean: 1000.0,
                    sigma: 0.5
                },
                min: Some(16),
                max: Some(8192),
            })
        );
        assert_eq!(
            l.to_string(),
            "lognormal(mean 1000, sigma 0.5) in [16, 8192]"
        );
        let l = read("len = { dist = \"normal\", mean = 100, stddev = 10 }").unwrap();
        assert_eq!(l.to_string(), "normal(mean 100, stdev 10)");
        let l = read(
            "[len]\nmax = 600\n[[len.mix]]\nweight = 3\ndist = \"constant\"\nvalue = 64\n[[len.mix]]\nweight = 1\ndist = \"uniform\"\nmin = 100\nmax = 200\n",
        )
        .unwrap();
        assert_eq!(
            l.to_string(),
            "mix[75% constant 64, 25% uniform in [100, 200]] in [1, 600]"
        );
    }

    #[test]
    fn written_back_a_length_reads_the_same() {
        for text in [
            "len = 12",
            "len = { dist = \"zipf\", exponent = 1.1, min = 2, max = 900 }",
            "len = { dist = \"constant\", value = 5 }",
            "[len]\nmin = 3\n[[len.mix]]\nweight = 0.5\ndist = \"normal\"\nmean = 10\nstdev = 2\n",
        ] {
            let l = read(text).unwrap();
            let mut t = toml::Table::new();
            t.insert("len".into(), toml::Value::try_from(&l).unwrap());
            let again = read(&toml::to_string(&t).unwrap()).unwrap();
            assert_eq!(again, l, "{text}");
        }
    }

    #[test]
    fn wrong_tables_name_their_key() {
        let e = read("len = { dist = \"gamma\", mean = 5 }").unwrap_err();
        assert_eq!(
            e,
            "at `dist`: unknown value \"gamma\"; expected one of uniform, normal, lognormal, zipf, constant"
        );
        let e = read("len = { mean = 5 }").unwrap_err();
        assert!(e.starts_with("at `dist`: required"), "{e}");
        let e = read("len = { dist = \"normal\", mean = 5, sigma = 1 }").unwrap_err();
        assert!(
            e.starts_with("at `sigma`: unknown key for dist \"normal\""),
            "{e}"
        );
        let e = read("len = { dist = \"lognormal\", mean = 5, sigma = 1 }").unwrap_err();
        assert!(
            e.starts_with("at `max`: required for dist \"lognormal\""),
            "{e}"
        );
        let e = read("len = { dist = \"normal\", mean = \"big\", stdev = 1 }").unwrap_err();
        assert_eq!(e, "at `mean`: invalid type: a string, expected a number");
        let e = read("[[len.mix]]\ndist = \"constant\"\nvalue = 3\n").unwrap_err();
        assert_eq!(e, "at `mix[0].weight`: required in a mix");
        let e = read("len = -4").unwrap_err();
        assert!(e.contains("from 1 to 4294967295"), "{e}");
        let e = read("len = \"long\"").unwrap_err();
        assert!(
            e.starts_with("invalid type: string \"long\", expected a whole number"),
            "{e}"
        );
    }

    const HEAD: &str = "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"random\"\n";

    /// The scenario's one error line, as `cicada run` prints it.
    fn load_err(dataset: &str, sets: &[&str]) -> String {
        let sets: Vec<crate::Override> = sets.iter().map(|s| s.parse().unwrap()).collect();
        crate::parse(&format!("{HEAD}{dataset}"), "s.toml", &sets)
            .unwrap_err()
            .to_string()
    }

    /// Each bad input names the file, the line and the key (the lines count
    /// from HEAD's 4 lines).
    #[test]
    fn bad_lengths_in_a_file_name_file_line_and_key() {
        let cases = [
            (
                "[dataset.input_len]\ndist = \"uniform\"\nmin = 0\nmax = 10\n",
                "s.toml:7: `dataset.input_len.min`: must be at least 1, got 0",
            ),
            (
                "[dataset.input_len]\ndist = \"uniform\"\nmin = 20\nmax = 10\n",
                "s.toml:7: `dataset.input_len.min`: must not exceed max (10), got 20",
            ),
            (
                "[dataset.input_len]\ndist = \"lognormal\"\nmean = 1000\nsigma = -0.5\nmax = 8192\n",
                "s.toml:8: `dataset.input_len.sigma`: must be ≥ 0, got -0.5",
            ),
            (
                "[dataset.input_len]\ndist = \"gamma\"\nmean = 1000\n",
                "s.toml:6: `dataset.input_len.dist`: unknown value \"gamma\"; expected one of uniform, normal, lognormal, zipf, constant",
            ),
            (
                "output_len = 0\n",
                "s.toml:5: `dataset.output_len`: must be at least 1",
            ),
            (
                "[[dataset.output_len.mix]]\nweight = 0\ndist = \"constant\"\nvalue = 8\n[[dataset.output_len.mix]]\nweight = 0.0\ndist = \"constant\"\nvalue = 9\n",
                "s.toml:5: `dataset.output_len.mix`: the weights sum to zero",
            ),
            (
                "[[dataset.output_len.mix]]\nweight = 1\ndist = \"normal\"\nmean = 8\n",
                "s.toml:5: `dataset.output_len.mix[0].stdev`: required for dist \"normal\"",
            ),
            (
                "sampler = \"vllm\"\ninput_len = { dist = \"constant\", value = 8 }\n[tokenizer]\nsource = \"t\"\n",
                "s.toml:5: `dataset.sampler`: vLLM's sample draws uniform lengths only; input_len is a distribution",
            ),
        ];
        for (dataset, expect) in cases {
            let e = load_err(dataset, &[]);
            assert!(e.starts_with(expect), "{dataset}\n got {e}\nwant {expect}");
        }
    }

    #[test]
    fn peers_spellings_set_a_distribution_from_the_command_line() {
        let s = crate::parse(
            &format!("{HEAD}input_len = 1000\n"),
            "s.toml",
            &[
                "dataset.input_len.dist=normal",
                "dataset.input_len.stddev=200",
            ]
            .map(|s| s.parse().unwrap()),
        )
        .unwrap();
        let crate::scenario::Dataset::Random(d) = &s.dataset else {
            panic!()
        };
        assert_eq!(d.input_len.to_string(), "normal(mean 1000, stdev 200)");
        assert_eq!(
            d.output_len,
            Length::Fixed(128),
            "the other length is as it was"
        );
        let e = load_err("input_len = 1000\n", &["dataset.input_len.dist=normal"]);
        assert!(
            e.starts_with("s.toml:5: `dataset.input_len.stdev`: required for dist \"normal\""),
            "{e}"
        );
        let e = load_err("", &["dataset.input_len.sigma=-1"]);
        assert!(
            e.starts_with("command line (--set): `dataset.input_len.dist`: required"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_are_problems_of_their_key() {
        let keys = |text: &str| -> Vec<String> {
            read(text)
                .unwrap()
                .problems("dataset.input_len")
                .into_iter()
                .map(|p| p.0)
                .collect()
        };
        assert_eq!(keys("len = 0"), ["dataset.input_len"]);
        assert_eq!(
            keys("len = { dist = \"uniform\", min = 0, max = 5 }"),
            ["dataset.input_len.min"]
        );
        assert_eq!(
            keys("len = { dist = \"uniform\", min = 9, max = 5 }"),
            ["dataset.input_len.min"]
        );
        assert_eq!(
            keys("len = { dist = \"lognormal\", mean = 9, sigma = -1, max = 50 }"),
            ["dataset.input_len.sigma"]
        );
        assert_eq!(
            keys("len = { dist = \"normal\", mean = 9, stdev = -1 }"),
            ["dataset.input_len.stdev"]
        );
        assert_eq!(
            keys(
                "[[len.mix]]\nweight = 0\ndist = \"constant\"\nvalue = 3\n[[len.mix]]\nweight = 0.0\ndist = \"zipf\"\nexponent = -1\nmax = 0\n"
            ),
            [
                "dataset.input_len.mix[1].max",
                "dataset.input_len.mix[1].exponent",
                "dataset.input_len.mix"
            ]
        );
    }
}
