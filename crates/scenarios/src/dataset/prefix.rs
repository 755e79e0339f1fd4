//! The `prefix` workload (vLLM's `prefix_repetition`): `num_prefixes` random
//! prefixes of `prefix_len` tokens, each shared by its share of the requests,
//! followed by a random suffix of `suffix_len` tokens per request, for
//! prefix-cache benchmarks. Prefix `i` serves `⌊n/P⌋ + (i < n mod P)` requests,
//! so the pool holds exactly `n`; requests are shuffled by the seed.
//!
//! Unlike vLLM, which corrects prefix and suffix separately, each prefix is
//! fitted to exactly `prefix_len` tokens and each suffix is fitted so that
//! prefix + suffix re-encodes to exactly `prefix_len + suffix_len` (BOS not
//! counted), and tokens are drawn only from printable, non-special ids.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::exact::Vocab;
use super::lengths::Lengths;
use super::random::entry_rng;
use super::select::order_key;
use super::{Build, DatasetError, DatasetReport, PoolEntry, Prompt, parallel};
use crate::scenario::{Length, PrefixSpec};

/// RNG stream reserved for the prefix dataset.
const STREAM: u64 = 5;

struct Planned {
    prefix: usize,
    suffix_ids: Vec<u32>,
}

/// The pool: `n` prompts over `num_prefixes` shared prefixes.
pub(crate) fn build(
    b: &Build<'_, PrefixSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let tok = b.tokenizer()?;
    let tok_err = |e| DatasetError::Tokenizer {
        what: "prefix prompts".to_string(),
        source: e,
    };
    let d = b.d;
    let num_prefixes = u64::from(d.num_prefixes);
    if b.n < num_prefixes {
        return Err(DatasetError::Invalid(format!(
            "the prefix workload needs at least num_prefixes = {num_prefixes} requests, the run has {}",
            b.n
        )));
    }
    let (prefix_len, suffix_len) = (d.prefix_len as usize, d.suffix_len as usize);
    let vocab = Vocab::new(tok).map_err(tok_err)?;
    let mut rng = ChaCha8Rng::seed_from_u64(b.seed);
    rng.set_stream(STREAM);
    let mut prefixes = Vec::with_capacity(num_prefixes as usize);
    let mut inexact = 0;
    for _ in 0..num_prefixes {
        let ids = vocab.random(&mut rng, prefix_len);
        let f = vocab.fit("", ids, prefix_len, &mut rng).map_err(tok_err)?;
        inexact += u64::from(!f.exact);
        prefixes.push(f.text);
    }
    let (per, extra) = (b.n / num_prefixes, b.n % num_prefixes);
    let mut planned = Vec::with_capacity(usize::try_from(b.n).unwrap_or(0));
    for i in 0..num_prefixes {
        for _ in 0..per + u64::from(i < extra) {
            planned.push(Planned {
                prefix: i as usize,
                suffix_ids: vocab.random(&mut rng, suffix_len),
            });
        }
    }
    b.progress.start("building prefix prompts", b.n, "prompts");
    let built = parallel::try_map(&planned.iter().enumerate().collect::<Vec<_>>(), |(k, p)| {
        let mut rng = entry_rng(b.seed, *k as u64);
        let prefix = &prefixes[p.prefix];
        let f = vocab.fit(
            prefix,
            p.suffix_ids.clone(),
            prefix_len + suffix_len,
            &mut rng,
        )?;
        b.progress.advance(1);
        Ok((format!("{prefix}{}", f.text), f.tokens, f.exact))
    })
    .map_err(tok_err)?;
    b.progress.finish();
    let mut order: Vec<usize> = (0..built.len()).collect();
    if d.shuffle {
        order.sort_by_key(|k| order_key(true, b.seed, *k as u64));
    }
    let lengths = Lengths::new(&Length::Fixed(1), &d.output_len, 0.0, 1, b.seed)?;
    let mut report = b.report();
    report.read = b.n;
    report.kept = b.n;
    report.inexact = inexact + built.iter().filter(|(_, _, exact)| !exact).count() as u64;
    let mut built: Vec<Option<(String, usize, bool)>> = built.into_iter().map(Some).collect();
    let entries = order
        .into_iter()
        .enumerate()
        .filter_map(|(id, k)| {
            let (text, tokens, _) = built[k].take()?;
            // a plain length here has one value (no range_ratio), whatever the stream's state
            let (_, output) = lengths.draw(&mut rng, id as u64);
            Some(PoolEntry {
                id: id as u64,
                prompt: Prompt::Text(text.into()),
                // the prompt's own tokens, as vLLM's prompt_len (the server adds its BOS)
                input_tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
                output_tokens: Some(output),
                conversation: None,
                shape: None,
                media: super::Media::default(),
            })
        })
        .collect();
    Ok((entries, report))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::dataset::Silent;
    use crate::dataset::testutil::tokenizer;

    #[test]
    fn prefixes_are_shared_evenly_and_lengths_are_exact() {
        let tok = tokenizer();
        let d = PrefixSpec {
            prefix_len: 96,
            suffix_len: 40,
            num_prefixes: 3,
            output_len: 16.into(),
            ..PrefixSpec::default()
        };
        let b = Build {
            d: &d,
            seed: 9,
            n: 20,
            tokenizer: Some(&tok),
            progress: &Silent,
        };
        let (entries, report) = build(&b).unwrap();
        assert_eq!(report.kept, 20);
        assert_eq!(report.inexact, 0);
        assert_eq!(build(&b).unwrap().0, entries);
        // group by the text of the first 96 tokens' worth of characters
        let mut groups: BTreeMap<String, usize> = BTreeMap::new();
        for e in &entries {
            let t = e.prompt.text();
            assert_eq!(tok.count(&t).unwrap(), 136);
            assert_eq!(e.input_tokens, 136);
            assert_eq!(e.output_tokens, Some(16));
            let ids = tok.encode(&t).unwrap();
            let head = tok.decode(&ids[..90]).unwrap();
            *groups.entry(head).or_default() += 1;
        }
        let mut sizes: Vec<usize> = groups.values().copied().collect();
        sizes.sort_unstable();
        assert_eq!(sizes, [6, 7, 7], "20 requests over 3 prefixes");
        let few = Build { n: 2, ..b };
        assert!(
            build(&few)
                .unwrap_err()
                .to_string()
                .contains("num_prefixes = 3")
        );
    }
}
