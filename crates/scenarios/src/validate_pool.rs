//! Refusing synthetic pools too big to build: a typo such as
//! `input_len = 2000000000` or a `num_prompts` in the billions would otherwise
//! end in an allocation failure instead of an error naming the key.

use crate::dataset::pool_len;
use crate::scenario::{Dataset, Scenario};

/// Most prompt text the coordinator builds for one pool.
pub const POOL_TEXT_LIMIT_BYTES: f64 = 4.0 * GIB;

/// Bytes of prompt text per token, on the high side (a word and its space).
const BYTES_PER_TOKEN: f64 = 6.0;

/// Bytes per token of a prompt held as token ids (`prompt_token_ids`).
const BYTES_PER_ID: f64 = 4.0;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The synthetic pool's estimated size against [`POOL_TEXT_LIMIT_BYTES`], as (key, message).
pub(crate) fn pool_problems(s: &Scenario) -> Vec<(String, String)> {
    let entries = pool_len(s) as f64;
    // tokens of text generated for the whole pool (shared prefixes counted
    // once), and the longest prompt
    let (tokens, longest) = match &s.dataset {
        Dataset::Random(d) => {
            let (prefix, input) = (f64::from(d.prefix_len), d.input_len.longest(d.range_ratio));
            (prefix + entries * input, prefix + input)
        }
        Dataset::Sonnet(d) => {
            let input = f64::from(d.input_len);
            (entries * input, input)
        }
        Dataset::Prefix(d) => {
            let (prefix, suffix) = (f64::from(d.prefix_len), f64::from(d.suffix_len));
            (
                f64::from(d.num_prefixes) * prefix + entries * suffix,
                prefix + suffix,
            )
        }
        _ => return Vec::new(),
    };
    let per_token = match &s.dataset {
        Dataset::Random(d) if d.prompt_token_ids => BYTES_PER_ID,
        _ => BYTES_PER_TOKEN,
    };
    let bytes = tokens * per_token;
    if bytes <= POOL_TEXT_LIMIT_BYTES {
        return Vec::new();
    }
    let key = match (s.load.num_prompts, s.load.pool_size) {
        (_, Some(_)) => "load.pool_size",
        (Some(_), None) if entries > 1000.0 => "load.num_prompts",
        _ => "dataset.input_len",
    };
    vec![(
        key.to_string(),
        format!(
            "a pool of {} prompts of up to {:.0} tokens needs about {:.1} GiB of prompt text (limit {:.0} GiB); \
             lower the lengths, or set load.pool_size (prompts are cycled, so a long run needs few)",
            entries,
            longest,
            bytes / GIB,
            POOL_TEXT_LIMIT_BYTES / GIB
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(input_len: u32, num_prompts: u64) -> Scenario {
        let mut s = Scenario {
            dataset: Dataset::Random(crate::scenario::RandomSpec {
                input_len: input_len.into(),
                ..Default::default()
            }),
            ..Scenario::default()
        };
        s.load.num_prompts = Some(num_prompts);
        s
    }

    #[test]
    fn ordinary_pools_pass() {
        assert!(pool_problems(&random(1024, 1000)).is_empty());
        // 1000 prompts of 128k tokens: 0.7 GiB
        assert!(pool_problems(&random(128_000, 1000)).is_empty());
    }

    #[test]
    fn a_huge_prompt_names_the_length() {
        let p = pool_problems(&random(2_000_000_000, 10));
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0, "dataset.input_len");
        assert!(p[0].1.contains("GiB"), "{}", p[0].1);
    }

    #[test]
    fn billions_of_prompts_point_at_pool_size() {
        let p = pool_problems(&random(16, 100_000_000_000));
        assert_eq!(p[0].0, "load.num_prompts");
        assert!(p[0].1.contains("load.pool_size"));
        let mut capped = random(16, 100_000_000_000);
        capped.load.pool_size = Some(1000);
        assert!(pool_problems(&capped).is_empty());
    }

    /// Issue 39's start-up scale: 100,000 prompts of 8,192 tokens pass as
    /// token ids (3 GiB of ids), not as text (about 4.6 GiB).
    #[test]
    fn a_hundred_thousand_8k_prompts_fit_as_token_ids() {
        let mut s = random(8192, 100_000);
        assert_eq!(pool_problems(&s).len(), 1);
        if let Dataset::Random(d) = &mut s.dataset {
            d.prompt_token_ids = true;
        }
        assert!(pool_problems(&s).is_empty());
    }
}
