//! The `trace` workload: a Mooncake-style JSONL trace replayed at its
//! timestamps. Each line is
//! `{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [..]}`;
//! every hash id stands for one block of `block_size` tokens and equal ids
//! give equal blocks, so requests sharing leading hash ids share a prefix (and
//! hit the server's prefix cache as in the traced system).
//!
//! A prompt is the blocks of its hash ids, cut at `input_length`; tokens past
//! the last id are the request's own. With a tokenizer, block `h` is random
//! printable token ids seeded by `h`, fitted to exactly `block_size` tokens,
//! and the last block is fitted in place so the whole prompt re-encodes to
//! exactly `input_length` (BOS included); without one, blocks are one-token
//! words. Requests are sorted by timestamp and sent at
//! `(timestamp − first timestamp) / speed`.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use super::exact::Vocab;
use super::jsonl::{for_each_line, line_error, parse_line};
use super::random::entry_rng;
use super::select::mix;
use super::words::WORDS;
use super::{Build, DatasetError, DatasetReport, PoolEntry, Prompt, parallel};
use crate::scenario::TraceSpec;
use crate::tokenizer::Tokenizer;

/// RNG stream for block content.
const BLOCK_STREAM: u64 = 6;
/// RNG stream for request-unique tokens.
const OWN_STREAM: u64 = 7;

#[derive(Debug, Deserialize)]
struct Line {
    timestamp: f64,
    input_length: u32,
    output_length: u32,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

/// The trace as a pool plus its send times.
#[derive(Debug)]
pub(crate) struct Trace {
    pub entries: Vec<PoolEntry>,
    pub report: DatasetReport,
    pub arrivals_us: Vec<u64>,
}

fn block_rng(seed: u64, hash: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(mix(seed ^ mix(hash)));
    r.set_stream(BLOCK_STREAM);
    r
}

fn own_rng(seed: u64, record: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(mix(seed ^ mix(record)));
    r.set_stream(OWN_STREAM);
    r
}

/// Read, sort and cut the trace, then build its prompts.
pub(crate) fn build(
    b: &Build<'_, TraceSpec>,
    num_prompts: Option<u64>,
) -> Result<Trace, DatasetError> {
    let path = b.d.path.as_path();
    let mut lines: Vec<Line> = Vec::new();
    let read = for_each_line(path, b.progress, |number, text| {
        let l: Line = parse_line(path, number, text)?;
        let bad = |m: &str| Err(line_error(path, number, m.to_string()));
        if !(l.timestamp.is_finite() && l.timestamp >= 0.0) {
            return bad("\"timestamp\" must be a number of milliseconds ≥ 0");
        }
        if l.input_length == 0 {
            return bad("\"input_length\" must be at least 1");
        }
        if l.output_length == 0 {
            return bad("\"output_length\" must be at least 1");
        }
        lines.push(l);
        Ok(())
    })?;
    lines.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
    let mut report = b.report();
    report.read = read;
    if let Some(n) = num_prompts {
        if n > read {
            return Err(DatasetError::Invalid(format!(
                "{}: load.num_prompts = {n} but the trace has {read} records (leave num_prompts out to replay them all)",
                path.display()
            )));
        }
        report.unused = read - n;
        lines.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    report.kept = lines.len() as u64;
    let speed = b.d.speed;
    let t0 = lines.first().map_or(0.0, |l| l.timestamp);
    let arrivals_us = lines
        .iter()
        .map(|l| ((l.timestamp - t0) * 1000.0 / speed).round() as u64)
        .collect();
    let block = b.d.block_size as usize;
    let prompts = match b.tokenizer {
        None => words(&lines, block, b),
        Some(t) => tokens(&lines, block, b, t, &mut report)?,
    };
    let entries = lines
        .iter()
        .zip(prompts)
        .enumerate()
        .map(|(id, (l, (text, input_tokens)))| PoolEntry {
            id: id as u64,
            prompt: Prompt::Text(text.into()),
            input_tokens,
            output_tokens: Some(l.output_length),
            conversation: None,
            shape: None,
            media: super::Media::default(),
        })
        .collect();
    Ok(Trace {
        entries,
        report,
        arrivals_us,
    })
}

/// How a prompt of `len` tokens is made of the blocks of `ids`: the number
/// of whole blocks, then how many tokens come from the next block and how
/// many are the request's own.
fn layout(len: usize, ids: &[u64], block: usize) -> (usize, usize, usize) {
    let whole = (len / block).min(ids.len());
    let rest = len - whole * block;
    let from_next = if whole < ids.len() {
        rest.min(block)
    } else {
        0
    };
    (whole, from_next, rest - from_next)
}

fn words(lines: &[Line], block: usize, b: &Build<'_, TraceSpec>) -> Vec<(String, u32)> {
    let block_words = |h: u64, n: usize, out: &mut Vec<&'static str>| {
        let mut rng = block_rng(b.seed, h);
        out.extend((0..n).map(|_| WORDS[rng.random_range(0..WORDS.len())]));
    };
    let items: Vec<(usize, &Line)> = lines.iter().enumerate().collect();
    b.progress
        .start("building trace prompts", lines.len() as u64, "prompts");
    let out = parallel::map(&items, |(k, l)| {
        let len = l.input_length as usize;
        let (whole, from_next, own) = layout(len, &l.hash_ids, block);
        let mut w: Vec<&'static str> = Vec::with_capacity(len);
        for h in &l.hash_ids[..whole] {
            block_words(*h, block, &mut w);
        }
        if from_next > 0 {
            block_words(l.hash_ids[whole], from_next, &mut w);
        }
        let mut rng = own_rng(b.seed, *k as u64);
        w.extend((0..own).map(|_| WORDS[rng.random_range(0..WORDS.len())]));
        b.progress.advance(1);
        (w.join(" "), l.input_length)
    });
    b.progress.finish();
    out
}

fn tokens(
    lines: &[Line],
    block: usize,
    b: &Build<'_, TraceSpec>,
    tok: &Tokenizer,
    report: &mut DatasetReport,
) -> Result<Vec<(String, u32)>, DatasetError> {
    let tok_err = |e| DatasetError::Tokenizer {
        what: "trace prompts".to_string(),
        source: e,
    };
    let vocab = Vocab::new(tok).map_err(tok_err)?;
    let special = tok.num_special_tokens();
    // every hash id used as a whole block, fitted once
    let mut whole_ids: Vec<u64> = lines
        .iter()
        .flat_map(|l| {
            let body = (l.input_length as usize).saturating_sub(special).max(1);
            let (whole, _, _) = layout(body, &l.hash_ids, block);
            l.hash_ids[..whole].iter().copied()
        })
        .collect();
    whole_ids.sort_unstable();
    whole_ids.dedup();
    let block_ids = |h: u64| vocab.random(&mut block_rng(b.seed, h), block);
    b.progress
        .start("building trace blocks", whole_ids.len() as u64, "blocks");
    let fitted = parallel::try_map(&whole_ids, |h| {
        let f = vocab.fit("", block_ids(*h), block, &mut block_rng(b.seed, *h))?;
        b.progress.advance(1);
        Ok(f)
    })
    .map_err(tok_err)?;
    b.progress.finish();
    report.inexact += fitted.iter().filter(|f| !f.exact).count() as u64;
    let blocks: HashMap<u64, String> = whole_ids
        .into_iter()
        .zip(fitted.into_iter().map(|f| f.text))
        .collect();
    let items: Vec<(usize, &Line)> = lines.iter().enumerate().collect();
    b.progress
        .start("building trace prompts", lines.len() as u64, "prompts");
    let built = parallel::try_map(&items, |(k, l)| {
        let body = (l.input_length as usize).saturating_sub(special).max(1);
        let (whole, from_next, own) = layout(body, &l.hash_ids, block);
        // the last piece (a partial block, own tokens, or the last whole block)
        // is fitted in place so the prompt is exact
        let (kept_whole, mut tail) = if from_next + own == 0 {
            (whole - 1, block_ids(l.hash_ids[whole - 1]))
        } else {
            let mut t = Vec::with_capacity(from_next + own);
            if from_next > 0 {
                t.extend_from_slice(&block_ids(l.hash_ids[whole])[..from_next]);
            }
            (whole, t)
        };
        tail.extend(vocab.random(&mut own_rng(b.seed, *k as u64), own));
        let mut prefix = String::new();
        for h in &l.hash_ids[..kept_whole] {
            prefix.push_str(blocks.get(h).map_or("", String::as_str));
        }
        let mut rng = entry_rng(b.seed, *k as u64);
        let f = vocab.fit(&prefix, tail, body, &mut rng)?;
        b.progress.advance(1);
        prefix.push_str(&f.text);
        Ok((prefix, (f.tokens + special) as u32, f.exact))
    })
    .map_err(tok_err)?;
    b.progress.finish();
    report.inexact += built.iter().filter(|(_, _, exact)| !exact).count() as u64;
    Ok(built.into_iter().map(|(t, n, _)| (t, n)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;
    use crate::dataset::testutil::{Scratch, tokenizer};

    const TRACE: &str = r#"{"timestamp": 0, "input_length": 40, "output_length": 5, "hash_ids": [1, 2, 3]}
{"timestamp": 2500, "input_length": 30, "output_length": 6, "hash_ids": [1, 2]}
{"timestamp": 1000, "input_length": 35, "output_length": 7, "hash_ids": [1, 2, 9]}

{"timestamp": 4000.5, "input_length": 50, "output_length": 8, "hash_ids": [7]}
"#;

    fn run(text: &str, tok: Option<&Tokenizer>, n: Option<u64>) -> Result<Trace, String> {
        let dir = Scratch::new("trace");
        let d = TraceSpec {
            path: dir.file("t.jsonl", text),
            speed: 10.0,
            block_size: 16,
        };
        let b = Build {
            d: &d,
            seed: 4,
            n: 0,
            tokenizer: tok,
            progress: &Silent,
        };
        build(&b, n).map_err(|e| e.to_string())
    }

    #[test]
    fn layouts_cover_the_length() {
        assert_eq!(layout(40, &[1, 2, 3], 16), (2, 8, 0));
        assert_eq!(layout(32, &[1, 2], 16), (2, 0, 0));
        assert_eq!(layout(50, &[7], 16), (1, 0, 34));
        assert_eq!(layout(10, &[], 16), (0, 0, 10));
        assert_eq!(layout(5, &[1, 2], 16), (0, 5, 0));
    }

    #[test]
    fn records_sort_by_time_and_equal_hash_ids_give_equal_blocks() {
        let t = run(TRACE, None, None).unwrap();
        assert_eq!(t.arrivals_us, [0, 100_000, 250_000, 400_050]);
        let outs: Vec<Option<u32>> = t.entries.iter().map(|e| e.output_tokens).collect();
        assert_eq!(outs, [Some(5), Some(7), Some(6), Some(8)]);
        let w: Vec<Vec<String>> = t
            .entries
            .iter()
            .map(|e| e.prompt.text().split(' ').map(str::to_string).collect())
            .collect();
        for (e, words) in t.entries.iter().zip(&w) {
            assert_eq!(words.len() as u32, e.input_tokens);
        }
        assert_eq!(w[0][..32], w[1][..32], "hash ids 1, 2 shared");
        assert_eq!(w[0][..30], w[2][..30]);
        assert_ne!(w[0][32..35], w[1][32..35], "ids 3 and 9 differ");
        assert_ne!(w[3][..16], w[0][..16]);
        assert_eq!(run(TRACE, None, None).unwrap().entries, t.entries);
        let cut = run(TRACE, None, Some(2)).unwrap();
        assert_eq!(cut.entries.len(), 2);
        assert_eq!(cut.report.unused, 2);
        assert!(
            run(TRACE, None, Some(5))
                .unwrap_err()
                .contains("has 4 records")
        );
    }

    #[test]
    fn token_prompts_are_exact_and_share_block_text() {
        let tok = tokenizer();
        let t = run(TRACE, Some(&tok), None).unwrap();
        assert_eq!(t.report.inexact, 0);
        for e in &t.entries {
            assert_eq!(tok.count(&e.prompt.text()).unwrap() as u32, e.input_tokens);
        }
        let texts: Vec<String> = t
            .entries
            .iter()
            .map(|e| e.prompt.text().into_owned())
            .collect();
        let common = texts[0]
            .chars()
            .zip(texts[1].chars())
            .take_while(|(a, b)| a == b)
            .count();
        let shared = texts[0].chars().take(common).collect::<String>();
        assert!(tok.count(&shared).unwrap() >= 16, "block 1 is shared text");
    }

    #[test]
    fn malformed_records_are_named() {
        let cases = [
            (
                "{\"timestamp\": 0, \"input_length\": 4}\n",
                ":1: ",
                "missing field `output_length`",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 1}\n{\"timestamp\": -1, \"input_length\": 4, \"output_length\": 1}\n",
                ":2: ",
                "timestamp",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 1}\n",
                ":1: ",
                "input_length",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": [\"a\"]}\n",
                ":1: ",
                "invalid type",
            ),
            ("not json\n", ":1: ", "expected"),
        ];
        for (text, at, what) in cases {
            let e = run(text, None, None).unwrap_err();
            assert!(
                e.contains(&format!("t.jsonl{at}")) && e.contains(what),
                "{e}"
            );
        }
    }
}
