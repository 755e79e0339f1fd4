//! The `random` workload: synthetic prompts of drawn lengths.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::words::WORDS;
use super::{DatasetReport, Pool, PoolEntry, Prompt};
use crate::scenario::Dataset;

/// RNG stream reserved for the random dataset.
const STREAM: u64 = 1;

/// Inclusive length bounds for a length `len` with range ratio `r` (vLLM's rule).
pub(crate) fn length_bounds(len: u32, r: f64, min: u32) -> (u32, u32) {
    let low = ((f64::from(len) * (1.0 - r)).floor() as u32).max(min);
    let high = ((f64::from(len) * (1.0 + r)).ceil() as u32).max(low);
    (low, high)
}

fn words(rng: &mut ChaCha8Rng, n: u32, out: &mut String) {
    for _ in 0..n {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
}

/// `n` prompts of word tokens: input and output lengths uniform within the range ratio,
/// after an optional shared prefix.
pub(crate) fn build(d: &Dataset, seed: u64, n: u64) -> Pool {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(STREAM);
    let (in_lo, in_hi) = length_bounds(d.input_len, d.range_ratio, 1);
    let (out_lo, out_hi) = length_bounds(d.output_len, d.range_ratio, 1);
    let mut prefix = String::new();
    words(&mut rng, d.prefix_len, &mut prefix);
    let entries = (0..n)
        .map(|id| {
            let input = rng.random_range(in_lo..=in_hi);
            let output = rng.random_range(out_lo..=out_hi);
            let mut text = prefix.clone();
            words(&mut rng, input, &mut text);
            PoolEntry {
                id,
                prompt: Prompt::Text(text),
                input_tokens: d.prefix_len + input,
                output_tokens: Some(output),
            }
        })
        .collect();
    Pool {
        entries,
        report: DatasetReport {
            read: n,
            filtered: 0,
            kept: n,
            counted_with: "words".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_vllm() {
        assert_eq!(length_bounds(100, 0.0, 1), (100, 100));
        assert_eq!(length_bounds(100, 0.25, 1), (75, 125));
        assert_eq!(length_bounds(3, 0.9, 1), (1, 6));
    }

    #[test]
    fn lengths_are_exact_word_counts_and_deterministic() {
        let d = Dataset {
            input_len: 50,
            output_len: 20,
            range_ratio: 0.5,
            prefix_len: 7,
            ..Dataset::default()
        };
        let a = build(&d, 42, 200);
        let b = build(&d, 42, 200);
        assert_eq!(a, b);
        let c = build(&d, 43, 200);
        assert_ne!(a, c);
        let first_prefix: Vec<&str> = match &a.entries[0].prompt {
            Prompt::Text(t) => t.split(' ').take(7).collect(),
            _ => unreachable!(),
        };
        for e in &a.entries {
            let Prompt::Text(t) = &e.prompt else {
                unreachable!()
            };
            assert_eq!(t.split_whitespace().count() as u32, e.input_tokens);
            assert!((7 + 25..=7 + 75).contains(&e.input_tokens));
            assert!((10..=30).contains(&e.output_tokens.unwrap()));
            let prefix: Vec<&str> = t.split(' ').take(7).collect();
            assert_eq!(prefix, first_prefix);
        }
    }
}
