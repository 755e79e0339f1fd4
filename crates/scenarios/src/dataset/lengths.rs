//! Drawing a synthetic workload's input and output lengths.
//!
//! A plain length (`input_len = 1000`) is drawn as it always was: uniformly
//! within `range_ratio` of it, from the workload's own stream, in pool order
//! (so existing seeds send what they sent). A distribution is drawn for
//! entry `id` from a generator seeded by the seed and `id` alone, one stream
//! for inputs and one for outputs: the length of request `i` does not depend
//! on the pool's size, on the other draws, or on how many workers send it
//! (the coordinator builds the pool once and ships each worker its entries).

use rand::distr::Distribution;
use rand::distr::weighted::WeightedIndex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{LogNormal, Normal, Zipf};

use super::select::mix;
use super::{DatasetError, LengthReport, PoolEntry};
use crate::length_spec::{Length, LengthDist, Shape};
use crate::scenario::Dataset;

/// RNG stream of drawn input lengths.
const INPUT_STREAM: u64 = 7;
/// RNG stream of drawn output lengths.
const OUTPUT_STREAM: u64 = 8;

/// Inclusive length bounds for a length `len` with range ratio `r` (vLLM's rule).
pub(crate) fn length_bounds(len: u32, r: f64, min: u32) -> (u32, u32) {
    let low = ((f64::from(len) * (1.0 - r)).floor() as u32).max(min);
    let high = ((f64::from(len) * (1.0 + r)).ceil() as u32).max(low);
    (low, high)
}

/// A distribution ready to draw from, with its clipping.
#[derive(Debug, Clone)]
pub(crate) struct Drawer {
    what: What,
    lo: u32,
    hi: u32,
}

#[derive(Debug, Clone)]
enum What {
    Uniform,
    Normal(Normal<f64>),
    Lognormal(LogNormal<f64>),
    /// Drawn in `1..=n`, shifted to start at the clip's low end.
    Zipf(Zipf<f64>),
    Constant(u32),
    Mix(WeightedIndex<f64>, Vec<Drawer>),
}

fn invalid(key: &str, message: impl std::fmt::Display) -> DatasetError {
    DatasetError::Invalid(format!("dataset.{key}: {message}"))
}

fn bound(key: &str, v: Option<i64>, default: u32) -> Result<u32, DatasetError> {
    match v {
        None => Ok(default),
        Some(v) => u32::try_from(v)
            .ok()
            .filter(|v| *v >= 1)
            .ok_or_else(|| invalid(key, format!("a bound must be from 1 to {}", u32::MAX))),
    }
}

impl Drawer {
    /// Check `d` and make it drawable; `key` names it in errors (validation
    /// refuses these first, with the file's line).
    pub(crate) fn new(d: &LengthDist, key: &str) -> Result<Drawer, DatasetError> {
        let lo = bound(key, d.min, 1)?;
        let hi = bound(key, d.max, u32::MAX)?;
        if lo > hi {
            return Err(invalid(key, format!("min {lo} exceeds max {hi}")));
        }
        let bad = |e: rand_distr::NormalError| invalid(key, e);
        let what = match &d.shape {
            Shape::Uniform => What::Uniform,
            Shape::Normal { mean, stdev } => What::Normal(Normal::new(*mean, *stdev).map_err(bad)?),
            Shape::Lognormal { mean, sigma } => {
                // rand_distr takes a negative sigma (as its absolute value)
                if !(*mean > 0.0 && *sigma >= 0.0) {
                    return Err(invalid(key, "the mean must be positive, sigma ≥ 0"));
                }
                // the mean of the lengths is exp(mu + sigma^2 / 2)
                let mu = mean.ln() - sigma * sigma / 2.0;
                What::Lognormal(LogNormal::new(mu, *sigma).map_err(bad)?)
            }
            Shape::Zipf { exponent } => {
                let n = f64::from(hi - lo) + 1.0;
                What::Zipf(Zipf::new(n, *exponent).map_err(|e| invalid(key, e))?)
            }
            Shape::Constant { value } => What::Constant(
                u32::try_from(*value).map_err(|_| invalid(key, "the value is out of range"))?,
            ),
            Shape::Mix(parts) => {
                let drawers = parts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| Drawer::new(&p.dist, &format!("{key}.mix[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                let weights = WeightedIndex::new(parts.iter().map(|p| p.weight))
                    .map_err(|e| invalid(key, format!("the mix's weights: {e}")))?;
                What::Mix(weights, drawers)
            }
        };
        Ok(Drawer { what, lo, hi })
    }

    /// One length, within `[min, max]`.
    pub(crate) fn draw<R: Rng>(&self, rng: &mut R) -> u32 {
        let clip = |x: f64| -> u32 {
            let x = x.round();
            if x.is_nan() || x <= f64::from(self.lo) {
                self.lo
            } else if x >= f64::from(self.hi) {
                self.hi
            } else {
                x as u32
            }
        };
        match &self.what {
            What::Uniform => rng.random_range(self.lo..=self.hi),
            What::Normal(d) => clip(d.sample(rng)),
            What::Lognormal(d) => clip(d.sample(rng)),
            What::Zipf(d) => clip(f64::from(self.lo) + d.sample(rng) - 1.0),
            What::Constant(v) => (*v).clamp(self.lo, self.hi),
            What::Mix(w, parts) => {
                let inner = parts[w.sample(rng)].draw(rng);
                inner.clamp(self.lo, self.hi)
            }
        }
    }
}

/// How one of the two lengths is drawn.
#[derive(Debug, Clone)]
enum Side {
    /// The workload's stream, uniform in `lo..=hi`.
    Sequential { lo: u32, hi: u32 },
    /// A generator of the entry's own.
    PerEntry(Drawer, u64),
}

/// The input and output lengths of a synthetic workload's entries.
#[derive(Debug, Clone)]
pub(crate) struct Lengths {
    input: Side,
    output: Side,
    seed: u64,
}

impl Lengths {
    /// `input` and `output` as asked; a plain length is uniform within
    /// `range_ratio`, at least `min_input` (input) or 1 (output).
    pub(crate) fn new(
        input: &Length,
        output: &Length,
        range_ratio: f64,
        min_input: u32,
        seed: u64,
    ) -> Result<Lengths, DatasetError> {
        let side = |l: &Length, min: u32, key: &str, stream: u64| -> Result<Side, DatasetError> {
            Ok(match l {
                Length::Fixed(n) => {
                    let (lo, hi) = length_bounds(*n, range_ratio, min);
                    Side::Sequential { lo, hi }
                }
                Length::Drawn(d) => Side::PerEntry(Drawer::new(d, key)?, stream),
            })
        };
        Ok(Lengths {
            input: side(input, min_input, "input_len", INPUT_STREAM)?,
            output: side(output, 1, "output_len", OUTPUT_STREAM)?,
            seed,
        })
    }

    /// Entry `id`'s (input, output) lengths; plain ones come from `rng`,
    /// input first, as they always did.
    pub(crate) fn draw<R: Rng>(&self, rng: &mut R, id: u64) -> (u32, u32) {
        let input = self.one(&self.input, rng, id);
        let output = self.one(&self.output, rng, id);
        (input, output)
    }

    /// Whether the input length is a distribution (then the drawn length
    /// counts the tokenizer's special tokens, which the caller takes off).
    pub(crate) fn input_drawn(&self) -> bool {
        matches!(self.input, Side::PerEntry(..))
    }

    fn one<R: Rng>(&self, side: &Side, rng: &mut R, id: u64) -> u32 {
        match side {
            Side::Sequential { lo, hi } => rng.random_range(*lo..=*hi),
            Side::PerEntry(d, stream) => {
                let mut own = ChaCha8Rng::seed_from_u64(mix(self.seed ^ mix(id)));
                own.set_stream(*stream);
                d.draw(&mut own)
            }
        }
    }
}

/// The lengths entry `e` holds of `key`: a session's per turn (its first
/// turn's input for `input_len`, the later turns' for `per_turn_input_len`).
fn drawn_of(e: &PoolEntry, key: &str) -> Vec<u32> {
    match (&e.conversation, key) {
        (Some(c), "input_len") => c.turns.iter().take(1).map(|t| t.input_tokens).collect(),
        (Some(c), "per_turn_input_len") => c.turns.iter().skip(1).map(|t| t.input_tokens).collect(),
        (Some(c), _) => c.turns.iter().filter_map(|t| t.output_tokens).collect(),
        (None, "input_len") => vec![e.input_tokens],
        (None, _) => e.output_tokens.into_iter().collect(),
    }
}

/// What the pool holds of each length the dataset draws from a
/// distribution (none for plain lengths: the report stays as it was).
pub(crate) fn report(d: &Dataset, entries: &[PoolEntry]) -> Vec<LengthReport> {
    d.lengths()
        .into_iter()
        .filter_map(|(key, l)| match l {
            Length::Fixed(_) => None,
            Length::Drawn(dist) => {
                let mut xs: Vec<u32> = entries.iter().flat_map(|e| drawn_of(e, key)).collect();
                xs.sort_unstable();
                let at = |q: f64| {
                    // nearest rank: the smallest value with at least q of the pool at or below it
                    let rank = (q * xs.len() as f64).ceil() as usize;
                    xs.get(rank.saturating_sub(1)).copied().unwrap_or(0)
                };
                let sum: u64 = xs.iter().map(|x| u64::from(*x)).sum();
                Some(LengthReport {
                    key: key.to_string(),
                    asked: dist.to_string(),
                    min: xs.first().copied().unwrap_or(0),
                    p50: at(0.5),
                    mean: if xs.is_empty() {
                        0.0
                    } else {
                        sum as f64 / xs.len() as f64
                    },
                    p99: at(0.99),
                    max: xs.last().copied().unwrap_or(0),
                })
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_vllm() {
        assert_eq!(length_bounds(100, 0.0, 1), (100, 100));
        assert_eq!(length_bounds(100, 0.25, 1), (75, 125));
        assert_eq!(length_bounds(3, 0.9, 1), (1, 6));
        assert_eq!(length_bounds(0, 0.0, 0), (0, 0));
    }

    fn dist(text: &str) -> Drawer {
        #[derive(serde::Deserialize)]
        struct T {
            len: Length,
        }
        let t: T = toml::from_str(text).unwrap();
        let Length::Drawn(d) = t.len else {
            panic!("{text}")
        };
        Drawer::new(&d, "input_len").unwrap()
    }

    /// 10,000 draws of entries 0..10,000, as a pool draws them.
    fn draws(text: &str) -> Vec<u32> {
        let d = dist(text);
        let l = Lengths {
            input: Side::PerEntry(d, INPUT_STREAM),
            output: Side::Sequential { lo: 1, hi: 1 },
            seed: 42,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        (0..10_000).map(|id| l.draw(&mut rng, id).0).collect()
    }

    fn mean_sd(xs: &[u32]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().map(|x| f64::from(*x)).sum::<f64>() / n;
        let var = xs
            .iter()
            .map(|x| (f64::from(*x) - mean).powi(2))
            .sum::<f64>()
            / (n - 1.0);
        (mean, var.sqrt())
    }

    /// The standard error of a 10k-draw mean is sd/100; every bound below is
    /// at least 4 standard errors wide (a false failure is below 1 in 10^4),
    /// and far narrower than a wrong parameterisation would land.
    #[test]
    fn normal_draws_have_the_asked_mean_and_stdev() {
        let xs = draws("len = { dist = \"normal\", mean = 1000, stdev = 200 }");
        let (mean, sd) = mean_sd(&xs);
        assert!((mean - 1000.0).abs() < 8.0, "mean {mean}");
        assert!((sd - 200.0).abs() < 8.0, "sd {sd}");
    }

    #[test]
    fn lognormal_draws_have_the_asked_mean_and_log_sigma() {
        let xs = draws(
            "len = { dist = \"lognormal\", mean = 1000, sigma = 0.5, min = 1, max = 1000000 }",
        );
        let (mean, _) = mean_sd(&xs);
        // sd of the lengths is mean * sqrt(exp(sigma^2) - 1) = 533: se 5.3
        assert!((mean - 1000.0).abs() < 25.0, "mean {mean}");
        let logs: Vec<f64> = xs.iter().map(|x| f64::from(*x).ln()).collect();
        let lm = logs.iter().sum::<f64>() / logs.len() as f64;
        let lsd = (logs.iter().map(|l| (l - lm).powi(2)).sum::<f64>() / 9999.0).sqrt();
        assert!((lsd - 0.5).abs() < 0.02, "sigma {lsd}");
        // the median is exp(mu) = 1000 * exp(-0.125) = 882
        let mut sorted = xs.clone();
        sorted.sort_unstable();
        let median = f64::from(sorted[5000]);
        assert!((median - 882.5).abs() < 20.0, "median {median}");
    }

    #[test]
    fn clipping_holds_and_piles_up_at_the_bounds() {
        let xs = draws("len = { dist = \"normal\", mean = 100, stdev = 100, min = 50, max = 150 }");
        assert!(xs.iter().all(|x| (50..=150).contains(x)));
        // P(x < 49.5) = P(z < -0.505) = 0.307, so about 3070 sit at 50
        let at_min = xs.iter().filter(|x| **x == 50).count();
        assert!((2870..3270).contains(&at_min), "{at_min} at min");
        let xs =
            draws("len = { dist = \"lognormal\", mean = 1000, sigma = 2, min = 16, max = 4096 }");
        assert!(xs.iter().all(|x| (16..=4096).contains(x)));
        assert!(xs.contains(&16) && xs.contains(&4096));
        let xs = draws("len = { dist = \"uniform\", min = 10, max = 20 }");
        assert!(xs.iter().all(|x| (10..=20).contains(x)));
        let (mean, _) = mean_sd(&xs);
        assert!((mean - 15.0).abs() < 0.15, "mean {mean}");
        let xs = draws("len = { dist = \"constant\", value = 77, max = 70 }");
        assert!(xs.iter().all(|x| *x == 70));
    }

    #[test]
    fn zipf_starts_at_min_and_falls_as_a_power() {
        let xs = draws("len = { dist = \"zipf\", exponent = 1.5, min = 100, max = 10000 }");
        assert!(xs.iter().all(|x| (100..=10000).contains(x)));
        let count = |v: u32| xs.iter().filter(|x| **x == v).count() as f64;
        // P(k) ∝ k^-1.5: P(1) / P(4) = 8; P(1) = 1 / zeta-ish sum (about 0.39)
        let (first, fourth) = (count(100), count(103));
        assert!((3600.0..4200.0).contains(&first), "{first}");
        let ratio = first / fourth;
        assert!((6.0..10.5).contains(&ratio), "P(1)/P(4) = {ratio}");
    }

    #[test]
    fn a_mix_picks_components_by_weight() {
        let xs = draws(
            "[len]\n[[len.mix]]\nweight = 0.7\ndist = \"constant\"\nvalue = 64\n[[len.mix]]\nweight = 0.3\ndist = \"uniform\"\nmin = 1000\nmax = 2000\n",
        );
        let short = xs.iter().filter(|x| **x == 64).count() as f64 / 10_000.0;
        // binomial sd sqrt(0.7 * 0.3 / 10^4) = 0.0046
        assert!(
            (short - 0.7).abs() < 0.02,
            "share of the 0.7 component {short}"
        );
        assert!(xs.iter().all(|x| *x == 64 || (1000..=2000).contains(x)));
        let xs = draws(
            "[len]\nmax = 1500\n[[len.mix]]\nweight = 1\ndist = \"uniform\"\nmin = 1000\nmax = 2000\n",
        );
        assert!(
            xs.iter().all(|x| (1000..=1500).contains(x)),
            "the mix's own max clips"
        );
    }

    /// The pool of `dataset` (TOML) with `n` entries, built as the coordinator builds it.
    fn pool(dataset: &str, n: u64, tok: Option<&crate::tokenizer::Tokenizer>) -> Vec<PoolEntry> {
        let mut s: crate::Scenario = toml::from_str(&format!("[dataset]\n{dataset}")).unwrap();
        s.load.num_prompts = Some(n);
        s.seed = 5;
        crate::dataset::build_pool(&s, tok).unwrap().entries
    }

    /// `random` (words and tokens), `random-mm` and `prefix` draw from the
    /// distribution, and entry `i`'s drawn length is the same in a pool of
    /// 60 as in one of 120.
    #[test]
    fn synthetic_kinds_draw_per_entry_whatever_the_pool_size() {
        let tok = crate::dataset::testutil::tokenizer();
        let out = "output_len = { dist = \"uniform\", min = 3, max = 900 }";
        for (dataset, tok) in [
            (
                format!(
                    "kind = \"random\"\ninput_len = {{ dist = \"normal\", mean = 40, stdev = 10, min = 5 }}\n{out}"
                ),
                None,
            ),
            (
                format!(
                    "kind = \"random\"\nprefix_len = 4\ninput_len = {{ dist = \"zipf\", exponent = 1, min = 8, max = 64 }}\n{out}"
                ),
                Some(&tok),
            ),
            (
                format!(
                    "kind = \"random-mm\"\ninput_len = {{ dist = \"constant\", value = 9 }}\n{out}"
                ),
                None,
            ),
            (
                format!(
                    "kind = \"prefix\"\nnum_prefixes = 2\nprefix_len = 8\nsuffix_len = 8\n{out}"
                ),
                Some(&tok),
            ),
        ] {
            let (small, large) = (pool(&dataset, 60, tok), pool(&dataset, 120, tok));
            let outputs = |p: &[PoolEntry]| -> Vec<u32> {
                p.iter().map(|e| e.output_tokens.unwrap()).collect()
            };
            assert_eq!(outputs(&small), outputs(&large)[..60], "{dataset}");
            let distinct: std::collections::BTreeSet<u32> = outputs(&large).into_iter().collect();
            assert!(distinct.len() > 60, "{dataset}: {distinct:?}");
            assert!(distinct.iter().all(|o| (3..=900).contains(o)), "{dataset}");
        }
        let words = pool(
            &format!("input_len = {{ dist = \"normal\", mean = 40, stdev = 10, min = 5 }}\n{out}"),
            120,
            None,
        );
        let inputs: Vec<u32> = words.iter().map(|e| e.input_tokens).collect();
        assert!(inputs.iter().all(|i| *i >= 5), "{inputs:?}");
        assert!(
            inputs
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                > 20,
            "{inputs:?}"
        );
        let tokens = pool(
            &format!(
                "prefix_len = 4\ninput_len = {{ dist = \"zipf\", exponent = 1, min = 8, max = 64 }}\n{out}"
            ),
            120,
            Some(&tok),
        );
        // the prompt's own tokens: the prefix's 4 and a body of 8 to 64
        assert!(
            tokens.iter().all(|e| (12..=68).contains(&e.input_tokens)),
            "{tokens:?}"
        );
        let mm = pool(
            &format!(
                "kind = \"random-mm\"\ninput_len = {{ dist = \"constant\", value = 9 }}\n{out}"
            ),
            20,
            None,
        );
        assert!(mm.iter().all(|e| e.input_tokens == 9));
    }

    #[test]
    fn an_entrys_length_depends_on_the_seed_and_its_index_only() {
        let l = |seed| {
            Lengths::new(
                &Length::Fixed(10),
                &toml::Value::Table(
                    toml::from_str("dist = \"normal\"\nmean = 500\nstdev = 100\n").unwrap(),
                )
                .try_into()
                .unwrap(),
                0.5,
                1,
                seed,
            )
            .unwrap()
        };
        let (a, b) = (l(1), l(1));
        let mut r1 = ChaCha8Rng::seed_from_u64(9);
        let mut r2 = ChaCha8Rng::seed_from_u64(123);
        // other draws before it (another stream state) change nothing of entry 17's output
        assert_eq!(a.draw(&mut r1, 17).1, b.draw(&mut r2, 17).1);
        assert_ne!(
            (0..20).map(|i| l(1).draw(&mut r1, i).1).collect::<Vec<_>>(),
            (0..20).map(|i| l(2).draw(&mut r1, i).1).collect::<Vec<_>>()
        );
    }
}
