//! The `random` workload: synthetic prompts of drawn lengths.
//!
//! With a tokenizer, prompts are built from token ids as `vllm bench serve`
//! builds them (a run of consecutive vocabulary ids from a random offset, after
//! an optional shared random prefix) and corrected until they re-encode to
//! exactly the drawn length. As in vLLM, `input_len` counts the tokenizer's
//! special tokens (BOS): the prompt is that much shorter, so the server sees
//! the asked number of tokens, and the prompt's own length (vLLM's
//! `prompt_len`) is what `input_tokens` records. Without a tokenizer, prompts
//! are common words that are one token each in the usual vocabularies (and to
//! the built-in mock). With `sampler = "vllm"` the prompts are instead
//! `vllm bench serve`'s own, draw for draw (`vllm_sample`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exact::{Fitted, Vocab};
use super::lengths::Lengths;
use super::select::mix;
use super::words::WORDS;
use super::{Build, DatasetError, DatasetReport, PoolEntry, Prompt, parallel};
use crate::scenario::{Length, RandomSpec, Sampler};
use crate::tokenizer::Tokenizer;

/// RNG stream reserved for the random dataset.
const STREAM: u64 = 1;
/// RNG stream for per-prompt corrections.
const FIX_STREAM: u64 = 3;

fn words(rng: &mut ChaCha8Rng, n: u32, out: &mut String) {
    for _ in 0..n {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
}

/// An RNG of its own for entry `id`, so entries can be built in parallel.
pub(crate) fn entry_rng(seed: u64, id: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(mix(seed ^ mix(id)));
    r.set_stream(FIX_STREAM);
    r
}

fn rng(seed: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(STREAM);
    rng
}

/// The pool: token-exact with a tokenizer, words without; `vllm bench
/// serve`'s own sample with `sampler = "vllm"` (which needs the tokenizer).
pub(crate) fn build(
    b: &Build<'_, RandomSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    if b.d.prompt_token_ids {
        return match (b.d.sampler, b.tokenizer) {
            (Sampler::Cicada, Some(t)) => with_ids(b, t),
            (Sampler::Cicada, None) => Err(DatasetError::NeedsTokenizer {
                kind: "random (prompt_token_ids = true)",
            }),
            (Sampler::Vllm, _) => Err(DatasetError::Invalid(
                "dataset.prompt_token_ids: applies to cicada's sampler, not sampler = \"vllm\" (whose prompts are text)".into(),
            )),
        };
    }
    match (b.d.sampler, b.tokenizer) {
        (Sampler::Vllm, Some(t)) => super::vllm_sample::random(b, t),
        (Sampler::Vllm, None) => Err(DatasetError::NeedsTokenizer {
            kind: "random (sampler = \"vllm\")",
        }),
        (Sampler::Cicada, Some(t)) => with_tokens(b, t),
        (Sampler::Cicada, None) => with_words(b),
    }
}

/// `n` prompts of word tokens: input and output lengths as asked (plain
/// ones uniform within the range ratio), after an optional shared prefix.
fn with_words(b: &Build<'_, RandomSpec>) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let d = b.d;
    let mut rng = rng(b.seed);
    let lengths = Lengths::new(&d.input_len, &d.output_len, d.range_ratio, 1, b.seed)?;
    let prefix_len = d.prefix_len;
    let mut prefix = String::new();
    words(&mut rng, prefix_len, &mut prefix);
    let entries: Vec<PoolEntry> = (0..b.n)
        .map(|id| {
            let (input, output) = lengths.draw(&mut rng, id);
            let mut text = prefix.clone();
            words(&mut rng, input, &mut text);
            PoolEntry {
                id,
                prompt: Prompt::Text(text.into()),
                input_tokens: prefix_len + input,
                output_tokens: Some(output),
                conversation: None,
                shape: None,
                media: super::Media::default(),
            }
        })
        .collect();
    let mut report = b.report();
    report.read = b.n;
    report.kept = b.n;
    Ok((entries, report))
}

struct Planned {
    id: u64,
    input: u32,
    output: u32,
    offset: usize,
}

/// `prompt_token_ids`: each prompt is the id run itself (after the shared
/// prefix's ids), sent as ids, so nothing is decoded, re-encoded or
/// corrected. A server adds no special tokens to an id prompt, so the drawn
/// length is exactly what it counts, and what `input_tokens` records.
fn with_ids(
    b: &Build<'_, RandomSpec>,
    tok: &Tokenizer,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let d = b.d;
    let vocab = Vocab::new(tok).map_err(|e| DatasetError::Tokenizer {
        what: "random prompts".to_string(),
        source: e,
    })?;
    let mut rng = rng(b.seed);
    let prefix_len = d.prefix_len;
    let lengths = Lengths::new(
        &d.input_len,
        &d.output_len,
        d.range_ratio,
        u32::from(prefix_len == 0),
        b.seed,
    )?;
    let prefix = vocab.random(&mut rng, prefix_len as usize);
    let planned: Vec<Planned> = (0..b.n)
        .map(|id| {
            let (input, output) = lengths.draw(&mut rng, id);
            Planned {
                id,
                input,
                output,
                offset: rng.random_range(0..vocab.len()),
            }
        })
        .collect();
    b.progress.start("building random prompts", b.n, "prompts");
    let entries = parallel::map(&planned, |p| {
        let mut ids = Vec::with_capacity(prefix.len() + p.input as usize);
        ids.extend_from_slice(&prefix);
        vocab.extend_run(&mut ids, p.offset, p.input as usize);
        b.progress.advance(1);
        PoolEntry {
            id: p.id,
            input_tokens: u32::try_from(ids.len()).unwrap_or(u32::MAX),
            prompt: Prompt::Tokens(ids),
            output_tokens: Some(p.output),
            conversation: None,
            shape: None,
            media: super::Media::default(),
        }
    });
    b.progress.finish();
    let mut report = b.report();
    report.read = b.n;
    report.kept = b.n;
    Ok((entries, report))
}

fn with_tokens(
    b: &Build<'_, RandomSpec>,
    tok: &Tokenizer,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let d = b.d;
    let tok_err = |e| DatasetError::Tokenizer {
        what: "random prompts".to_string(),
        source: e,
    };
    let vocab = Vocab::new(tok).map_err(tok_err)?;
    let special = u32::try_from(tok.num_special_tokens()).unwrap_or(0);
    let mut rng = rng(b.seed);
    let prefix_len = d.prefix_len;
    // the server adds the special tokens (BOS), so the body is that much shorter
    let min_body = u32::from(prefix_len == 0);
    let input_len = match &d.input_len {
        Length::Fixed(n) => Length::Fixed(n.saturating_sub(special)),
        drawn => drawn.clone(),
    };
    let lengths = Lengths::new(&input_len, &d.output_len, d.range_ratio, min_body, b.seed)?;
    let body = |drawn: u32| {
        if lengths.input_drawn() {
            drawn.saturating_sub(special).max(min_body)
        } else {
            drawn
        }
    };
    let prefix = if prefix_len == 0 {
        Fitted {
            text: String::new(),
            tokens: 0,
            exact: true,
        }
    } else {
        let ids = vocab.random(&mut rng, prefix_len as usize);
        vocab
            .fit("", ids, prefix_len as usize, &mut rng)
            .map_err(tok_err)?
    };
    let planned: Vec<Planned> = (0..b.n)
        .map(|id| {
            let (input, output) = lengths.draw(&mut rng, id);
            Planned {
                id,
                input: body(input),
                output,
                offset: rng.random_range(0..vocab.len()),
            }
        })
        .collect();
    b.progress.start("building random prompts", b.n, "prompts");
    let built = parallel::try_map(&planned, |p| {
        let mut rng = entry_rng(b.seed, p.id);
        let target = prefix.tokens + p.input as usize;
        let f = vocab.fit(
            &prefix.text,
            vocab.run(p.offset, p.input as usize),
            target,
            &mut rng,
        )?;
        b.progress.advance(1);
        Ok(PoolEntry {
            id: p.id,
            prompt: Prompt::Text(format!("{}{}", prefix.text, f.text).into()),
            input_tokens: u32::try_from(f.tokens).unwrap_or(u32::MAX),
            output_tokens: Some(p.output),
            conversation: None,
            shape: None,
            media: super::Media::default(),
        })
        .map(|e| (e, f.exact))
    })
    .map_err(tok_err)?;
    b.progress.finish();
    let mut report = b.report();
    report.read = b.n;
    report.kept = b.n;
    report.inexact = built.iter().filter(|(_, exact)| !exact).count() as u64;
    if !prefix.exact {
        report.inexact += 1;
    }
    Ok((built.into_iter().map(|(e, _)| e).collect(), report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;
    use crate::dataset::testutil::tokenizer;

    fn build_with(d: &RandomSpec, seed: u64, n: u64, tok: Option<&Tokenizer>) -> Vec<PoolEntry> {
        let b = Build {
            d,
            seed,
            n,
            tokenizer: tok,
            progress: &Silent,
        };
        let (entries, report) = build(&b).unwrap();
        assert_eq!(report.kept, n);
        assert_eq!(report.inexact, 0, "{report:?}");
        entries
    }

    fn text(e: &PoolEntry) -> &str {
        match &e.prompt {
            Prompt::Text(t) => t,
            Prompt::Chat(_) | Prompt::Batch(_) | Prompt::Rerank { .. } | Prompt::Tokens(_) => {
                unreachable!()
            }
        }
    }

    #[test]
    fn word_lengths_are_exact_word_counts_and_deterministic() {
        let d = RandomSpec {
            input_len: 50.into(),
            output_len: 20.into(),
            range_ratio: 0.5,
            prefix_len: 7,
            ..RandomSpec::default()
        };
        let a = build_with(&d, 42, 200, None);
        assert_eq!(a, build_with(&d, 42, 200, None));
        assert_ne!(a, build_with(&d, 43, 200, None));
        let first_prefix: Vec<&str> = text(&a[0]).split(' ').take(7).collect();
        for e in &a {
            let t = text(e);
            assert_eq!(t.split_whitespace().count() as u32, e.input_tokens);
            assert!((7 + 25..=7 + 75).contains(&e.input_tokens));
            assert!((10..=30).contains(&e.output_tokens.unwrap()));
            let prefix: Vec<&str> = t.split(' ').take(7).collect();
            assert_eq!(prefix, first_prefix);
        }
    }

    /// Every length from 1 to 4096 (all of 1..=160, then a spread to 4096)
    /// re-encodes to exactly the asked number of tokens.
    #[test]
    fn token_prompts_reencode_to_the_asked_length_from_1_to_4096() {
        let tok = tokenizer();
        let mut lengths: Vec<u32> = (1..=160).collect();
        lengths.extend((161..4096).step_by(89));
        lengths.extend([4095, 4096]);
        for len in lengths {
            let d = RandomSpec {
                input_len: len.into(),
                output_len: 8.into(),
                ..RandomSpec::default()
            };
            for e in build_with(&d, u64::from(len), 2, Some(&tok)) {
                assert_eq!(tok.count(text(&e)).unwrap(), len as usize, "len {len}");
                assert_eq!(e.input_tokens, len);
            }
        }
    }

    #[test]
    fn the_bos_counts_toward_the_asked_length() {
        let tok = crate::dataset::testutil::tokenizer_with_bos();
        for len in [1u32, 2, 100, 777] {
            let d = RandomSpec {
                input_len: len.into(),
                prefix_len: if len > 50 { 20 } else { 0 },
                ..RandomSpec::default()
            };
            for e in build_with(&d, 1, 3, Some(&tok)) {
                // the prefix comes on top of input_len, as in vLLM; a body
                // is never empty, so input_len 1 with a BOS gives 2
                let expect = (d.prefix_len + len).max(2);
                assert_eq!(
                    tok.count_with_special(text(&e)).unwrap() as u32,
                    expect,
                    "len {len}"
                );
                // what is recorded is the prompt's own tokens, vLLM's prompt_len
                assert_eq!(e.input_tokens, expect - 1, "len {len}");
            }
        }
    }

    #[test]
    fn token_prompts_share_their_prefix_text_and_are_deterministic() {
        let tok = tokenizer();
        let d = RandomSpec {
            input_len: 300.into(),
            output_len: 30.into(),
            range_ratio: 0.3,
            prefix_len: 64,
            ..RandomSpec::default()
        };
        let a = build_with(&d, 5, 64, Some(&tok));
        assert_eq!(a, build_with(&d, 5, 64, Some(&tok)));
        let mut lcp = text(&a[0]).to_string();
        let mut distinct = std::collections::BTreeSet::new();
        for e in &a {
            let t = text(e);
            assert_eq!(tok.count(t).unwrap(), e.input_tokens as usize);
            assert!(
                (64 + 210..=64 + 390).contains(&e.input_tokens),
                "{}",
                e.input_tokens
            );
            assert!((21..=39).contains(&e.output_tokens.unwrap()));
            distinct.insert(t.to_string());
            let common: usize = lcp
                .char_indices()
                .zip(t.chars())
                .take_while(|((_, x), y)| x == y)
                .map(|((_, x), _)| x.len_utf8())
                .sum();
            lcp.truncate(common);
        }
        // every prompt starts with the same 64-token prefix text (a merge
        // across its end may take one token off the common part's count)
        assert!(tok.count(&lcp).unwrap() >= 63, "{lcp:?}");
        assert_eq!(distinct.len(), 64, "prompts differ after the prefix");
    }

    fn ids(e: &PoolEntry) -> &[u32] {
        match &e.prompt {
            Prompt::Tokens(ids) => ids,
            other => panic!("not token ids: {other:?}"),
        }
    }

    /// `prompt_token_ids`: every prompt is exactly the drawn number of ids
    /// (the BOS is not taken off: a server adds none to ids), after the
    /// shared prefix's ids, never a special id, and the same for a seed.
    #[test]
    fn token_id_prompts_are_exactly_the_drawn_length() {
        let tok = crate::dataset::testutil::tokenizer_with_bos();
        let special = tok.special_ids();
        let fixed = RandomSpec {
            input_len: 777.into(),
            prompt_token_ids: true,
            ..RandomSpec::default()
        };
        for e in build_with(&fixed, 3, 20, Some(&tok)) {
            assert_eq!(ids(&e).len(), 777);
            assert_eq!(e.input_tokens, 777);
        }
        let d = RandomSpec {
            input_len: 300.into(),
            range_ratio: 0.5,
            prefix_len: 40,
            prompt_token_ids: true,
            ..RandomSpec::default()
        };
        let a = build_with(&d, 9, 64, Some(&tok));
        assert_eq!(a, build_with(&d, 9, 64, Some(&tok)));
        let prefix = &ids(&a[0])[..40];
        let mut lengths = std::collections::BTreeSet::new();
        for e in &a {
            let got = ids(e);
            assert_eq!(got.len() as u32, e.input_tokens);
            assert!(
                (40 + 150..=40 + 450).contains(&e.input_tokens),
                "{}",
                e.input_tokens
            );
            assert_eq!(&got[..40], prefix);
            assert!(got.iter().all(|id| special.binary_search(id).is_err()));
            lengths.insert(e.input_tokens);
        }
        assert!(lengths.len() > 10, "lengths are drawn: {lengths:?}");
        // without a tokenizer there are no ids to send
        let b = Build {
            d: &fixed,
            seed: 1,
            n: 1,
            tokenizer: None,
            progress: &Silent,
        };
        assert!(matches!(
            build(&b),
            Err(DatasetError::NeedsTokenizer { .. })
        ));
    }
}
