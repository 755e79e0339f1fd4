//! The `sharegpt` workload with `vllm bench serve`'s rules.
//!
//! Records with at least two turns are shuffled by the seed; the prompt is the
//! first turn, the output length the second turn's token count (or the fixed
//! `output_len`); a record is dropped when its prompt or output has fewer than
//! 4 tokens (the output check is skipped with a fixed length), its prompt more
//! than 1024, or prompt + output more than 2048. The first `n` valid records in
//! shuffled order are kept. Tokens are counted with the tokenizer's special
//! tokens, as vLLM counts them.
//!
//! With `sampler = "vllm"`, the order is `vllm bench serve`'s own shuffle of
//! the records with two turns or more (a first pass counts them), and a
//! sample with fewer valid records than asked is padded as vLLM pads it.
//!
//! The file is streamed: only the first two turns of each record are parsed,
//! every record gets its shuffle key from the seed, and a record is tokenised
//! (in parallel batches) only while it could still be among the first `n`, so
//! the 640 MB file costs memory for `n` records and tokenising a few of them.

use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::select::{Smallest, order_key};
use super::{
    Build, DatasetError, DatasetReport, PoolEntry, Progress, Prompt, json_array, parallel,
    vllm_sample,
};
use crate::scenario::{Sampler, SharegptSpec};
use crate::tokenizer::Tokenizer;

/// Records tokenised per parallel batch.
const BATCH: usize = 512;

/// vLLM's `is_valid_sequence` defaults.
const MIN_LEN: usize = 4;
const MAX_PROMPT_LEN: usize = 1024;
const MAX_TOTAL_LEN: usize = 2048;

/// Filter reasons, as reported.
pub(crate) const FEWER_THAN_2_TURNS: &str = "fewer than 2 turns";
const PROMPT_SHORT: &str = "prompt < 4 tokens";
const OUTPUT_SHORT: &str = "output < 4 tokens";
const PROMPT_LONG: &str = "prompt > 1024 tokens";
const TOTAL_LONG: &str = "prompt + output > 2048 tokens";

/// vLLM's length rules; `Err` names the first rule broken.
fn check(prompt: usize, output: usize, fixed_output: bool) -> Result<(), &'static str> {
    if prompt < MIN_LEN {
        Err(PROMPT_SHORT)
    } else if !fixed_output && output < MIN_LEN {
        Err(OUTPUT_SHORT)
    } else if prompt > MAX_PROMPT_LEN {
        Err(PROMPT_LONG)
    } else if prompt + output > MAX_TOTAL_LEN {
        Err(TOTAL_LONG)
    } else {
        Ok(())
    }
}

/// What the workload reads of one record: the first two turns' text.
#[derive(Debug, Default)]
struct Record {
    texts: Vec<String>,
}

#[derive(Deserialize)]
struct TurnText {
    value: String,
}

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RecordVisitor)
    }
}

struct RecordVisitor;

impl<'de> Visitor<'de> for RecordVisitor {
    type Value = Record;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a ShareGPT record (an object with \"conversations\")")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
        let mut rec = Record::default();
        while let Some(key) = map.next_key::<String>()? {
            if key == "conversations" {
                rec.texts = map.next_value::<FirstTwo>()?.0;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(rec)
    }
}

/// The first two turns' values; later turns are skipped unparsed.
struct FirstTwo(Vec<String>);

impl<'de> Deserialize<'de> for FirstTwo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FirstTwo;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of turns ({\"from\": ..., \"value\": ...})")
            }
            fn visit_unit<E: de::Error>(self) -> Result<FirstTwo, E> {
                Ok(FirstTwo(Vec::new()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FirstTwo, A::Error> {
                let mut texts = Vec::with_capacity(2);
                while texts.len() < 2 {
                    match seq.next_element::<TurnText>()? {
                        Some(t) => texts.push(t.value),
                        None => return Ok(FirstTwo(texts)),
                    }
                }
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(FirstTwo(texts))
            }
        }
        d.deserialize_any(V)
    }
}

struct Candidate {
    key: (u64, u64),
    prompt: String,
    completion: String,
}

struct Kept {
    prompt: String,
    input: usize,
    output: usize,
}

/// The selection as the stream goes by.
struct Selecting<'a> {
    tok: &'a Tokenizer,
    fixed: Option<u32>,
    sel: Smallest<Kept>,
    pending: Vec<Candidate>,
    report: DatasetReport,
    what: String,
}

impl Selecting<'_> {
    /// Tokenise the pending candidates in parallel and offer the valid ones.
    fn flush(&mut self) -> Result<(), DatasetError> {
        let (tok, fixed) = (self.tok, self.fixed);
        let counted = parallel::try_map(&self.pending, |c| {
            let p = tok.count_with_special(&c.prompt)?;
            let o = match fixed {
                Some(f) => f as usize,
                None => tok.count_with_special(&c.completion)?,
            };
            Ok((p, o))
        })
        .map_err(|e| DatasetError::Tokenizer {
            what: self.what.clone(),
            source: e,
        })?;
        for (c, (input, output)) in self.pending.drain(..).zip(counted) {
            match check(input, output, fixed.is_some()) {
                Err(reason) => self.report.drop_for(reason),
                Ok(()) => {
                    let kept = Kept {
                        prompt: c.prompt,
                        input,
                        output,
                    };
                    if self.sel.offer(c.key, kept) {
                        self.report.unused += 1;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Records with two turns or more: what `vllm bench serve` shuffles.
fn two_turn_records(path: &Path, progress: &dyn Progress) -> Result<u64, DatasetError> {
    let mut m = 0;
    json_array::for_each::<Record, _>(path, progress, "ShareGPT records (counting)", |_, rec| {
        m += u64::from(rec.texts.len() >= 2);
        Ok(())
    })?;
    Ok(m)
}

/// The pool: the first `n` valid records in seeded shuffled order (cicada's
/// shuffle, or `vllm bench serve`'s with its oversampling).
pub(crate) fn build(
    b: &Build<'_, SharegptSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let tok = b.tokenizer()?;
    let path = b.d.path.as_path();
    let shuffle = b.d.shuffle;
    let vllm = b.d.sampler == Sampler::Vllm;
    // vLLM shuffles the two-turn records in memory: their places in its
    // order, by their index among themselves
    let places = if vllm && shuffle {
        let m = two_turn_records(path, b.progress)?;
        Some(vllm_sample::shuffled_places(b.seed, m))
    } else {
        None
    };
    let mut two = 0u64;
    let mut s = Selecting {
        tok,
        fixed: b.d.output_len,
        sel: Smallest::new(b.n),
        pending: Vec::with_capacity(BATCH),
        report: b.report(),
        what: path.display().to_string(),
    };
    let read =
        json_array::for_each::<Record, _>(path, b.progress, "ShareGPT records", |i, rec| {
            let mut texts = rec.texts.into_iter();
            let (Some(prompt), Some(completion)) = (texts.next(), texts.next()) else {
                s.report.drop_for(FEWER_THAN_2_TURNS);
                return Ok(());
            };
            // this record's index among the two-turn records
            let index = two;
            two += 1;
            let key = match &places {
                Some(p) => (p.get(index as usize).copied().unwrap_or(u64::MAX), i),
                None => order_key(shuffle, b.seed, i),
            };
            if !s.sel.wants(key) {
                s.report.unused += 1;
                return Ok(());
            }
            s.pending.push(Candidate {
                key,
                prompt,
                completion,
            });
            if s.pending.len() >= BATCH {
                s.flush()?;
            }
            Ok(())
        })?;
    s.flush()?;
    let mut report = s.report;
    report.read = read;
    let kept = s.sel.into_sorted();
    report.kept = kept.len() as u64;
    let mut entries = kept
        .into_iter()
        .enumerate()
        .map(|(id, k)| PoolEntry {
            id: id as u64,
            prompt: Prompt::Text(k.prompt.into()),
            input_tokens: u32::try_from(k.input).unwrap_or(u32::MAX),
            output_tokens: Some(u32::try_from(k.output).unwrap_or(u32::MAX)),
            conversation: None,
            shape: None,
            media: super::Media::default(),
        })
        .collect();
    if vllm {
        vllm_sample::oversample(b.seed, &mut entries, b.n);
    }
    Ok((entries, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::testutil::{Scratch, tokenizer};
    use crate::dataset::{Silent, build_pool};
    use crate::scenario::{Dataset, Scenario, SharegptSpec, TokenizerSpec};

    /// Text of exactly `n` tokens for the test tokenizer ("the the the ...").
    fn text(tok: &Tokenizer, n: usize) -> String {
        let t = vec!["the"; n].join(" ");
        assert_eq!(
            tok.count(&t).unwrap(),
            n,
            "the test words must be one token each"
        );
        t
    }

    fn record(turns: &[String]) -> serde_json::Value {
        let conv: Vec<serde_json::Value> = turns
            .iter()
            .enumerate()
            .map(|(i, t)| {
                serde_json::json!({"from": if i % 2 == 0 { "human" } else { "gpt" }, "value": t})
            })
            .collect();
        serde_json::json!({"id": "x", "conversations": conv})
    }

    /// A record whose turns have exactly these token counts.
    fn exact(tok: &Tokenizer, turns: &[usize]) -> serde_json::Value {
        record(&turns.iter().map(|n| text(tok, *n)).collect::<Vec<_>>())
    }

    fn scenario(path: &std::path::Path, n: u64, fixed: Option<u32>, seed: u64) -> Scenario {
        let mut s = Scenario {
            seed,
            tokenizer: Some(TokenizerSpec {
                source: "test".into(),
                verify_every: 0,
            }),
            dataset: Dataset::Sharegpt(SharegptSpec {
                path: path.to_path_buf(),
                output_len: fixed,
                shuffle: true,
                sampler: crate::scenario::Sampler::Cicada,
            }),
            ..Scenario::default()
        };
        s.load.num_prompts = Some(n);
        s
    }

    /// Kept (prompt, output) token counts, sorted.
    fn lens(entries: &[PoolEntry]) -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> = entries
            .iter()
            .map(|e| (e.input_tokens, e.output_tokens.unwrap()))
            .collect();
        v.sort_unstable();
        v
    }

    fn fixture(tok: &Tokenizer) -> String {
        let recs = vec![
            exact(tok, &[10]),                 // one turn
            serde_json::json!({"id": "none"}), // no conversations
            exact(tok, &[3, 10]),              // prompt < 4
            exact(tok, &[4, 3]),               // output < 4
            exact(tok, &[4, 4]),               // both at the minimum: kept
            exact(tok, &[1025, 10]),           // prompt > 1024
            exact(tok, &[1024, 1024]),         // total exactly 2048: kept
            exact(tok, &[1024, 1025]),         // total 2049
            exact(tok, &[100, 200, 50]),       // three turns: kept
            exact(tok, &[50, 60]),             // kept
        ];
        serde_json::to_string_pretty(&recs).unwrap()
    }

    #[test]
    fn crafted_entries_are_kept_exactly_as_vllm_keeps_them() {
        let tok = tokenizer();
        let dir = Scratch::new("sharegpt");
        let path = dir.file("sg.json", &fixture(&tok));
        let pool = build_pool(&scenario(&path, 100, None, 0), Some(&tok)).unwrap();
        assert_eq!(
            lens(&pool.entries),
            [(4, 4), (50, 60), (100, 200), (1024, 1024)]
        );
        let r = &pool.report;
        assert_eq!((r.read, r.filtered, r.kept, r.unused), (10, 6, 4, 0));
        assert_eq!(r.filter_reasons[FEWER_THAN_2_TURNS], 2);
        assert_eq!(r.filter_reasons[PROMPT_SHORT], 1);
        assert_eq!(r.filter_reasons[OUTPUT_SHORT], 1);
        assert_eq!(r.filter_reasons[PROMPT_LONG], 1);
        assert_eq!(r.filter_reasons[TOTAL_LONG], 1);
        assert_eq!(
            r.to_string(),
            "read 10, filtered 6 (fewer than 2 turns: 2, output < 4 tokens: 1, \
             prompt + output > 2048 tokens: 1, prompt < 4 tokens: 1, prompt > 1024 tokens: 1), \
             kept 4 (sharegpt, counted with trained-bpe)"
        );

        // a fixed output length skips the output check and enters the total
        let fixed = build_pool(&scenario(&path, 100, Some(2), 0), Some(&tok)).unwrap();
        assert_eq!(
            lens(&fixed.entries),
            [(4, 2), (4, 2), (50, 2), (100, 2), (1024, 2), (1024, 2)]
        );
        let big = build_pool(&scenario(&path, 100, Some(1100), 0), Some(&tok)).unwrap();
        assert_eq!(
            lens(&big.entries),
            [(4, 1100), (4, 1100), (50, 1100), (100, 1100)]
        );
        // fewer wanted than valid: the rest is reported as not needed
        let two = build_pool(&scenario(&path, 2, None, 0), Some(&tok)).unwrap();
        assert_eq!(two.entries.len(), 2);
        assert_eq!(two.report.unused, 2);
    }

    #[test]
    fn counts_include_the_bos_as_vllm_counts_them() {
        let tok = crate::dataset::testutil::tokenizer_with_bos();
        let dir = Scratch::new("sharegpt-bos");
        // 3 text tokens + BOS = 4: kept; 1024 + BOS = 1025: dropped
        let recs = vec![exact(&tok, &[3, 3]), exact(&tok, &[1024, 10])];
        let path = dir.file("sg.json", &serde_json::to_string(&recs).unwrap());
        let pool = build_pool(&scenario(&path, 10, None, 0), Some(&tok)).unwrap();
        assert_eq!(lens(&pool.entries), [(4, 4)]);
        assert_eq!(pool.report.filter_reasons[PROMPT_LONG], 1);
    }

    #[test]
    fn streaming_selection_equals_shuffle_then_filter_then_take() {
        let tok = tokenizer();
        let dir = Scratch::new("sharegpt-big");
        let lens: Vec<(usize, usize)> = (0..700)
            .map(|i| ((i * 37) % 60 + 1, (i * 53) % 40 + 1))
            .collect();
        let recs: Vec<serde_json::Value> = lens
            .iter()
            .enumerate()
            .map(|(i, (p, o))| record(&[format!("r{i} {}", text(&tok, *p)), text(&tok, *o)]))
            .collect();
        let path = dir.file("sg.json", &serde_json::to_string(&recs).unwrap());
        for (n, seed) in [(10u64, 1u64), (100, 2), (1000, 3)] {
            let pool = build_pool(&scenario(&path, n, None, seed), Some(&tok)).unwrap();
            let mut valid: Vec<((u64, u64), String)> = recs
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let c = r["conversations"].as_array().unwrap();
                    let p = tok.count(c[0]["value"].as_str().unwrap()).unwrap();
                    let o = tok.count(c[1]["value"].as_str().unwrap()).unwrap();
                    check(p, o, false).ok()?;
                    Some((
                        order_key(true, seed, i as u64),
                        c[0]["value"].as_str().unwrap().to_string(),
                    ))
                })
                .collect();
            valid.sort();
            let want: Vec<String> = valid
                .iter()
                .take(n as usize)
                .map(|(_, p)| p.clone())
                .collect();
            let got: Vec<String> = pool
                .entries
                .iter()
                .map(|e| e.prompt.text().into_owned())
                .collect();
            assert_eq!(got, want, "n={n}");
            let r = &pool.report;
            assert_eq!(r.read, 700);
            assert_eq!(r.read, r.filtered + r.kept + r.unused, "{r:?}");
        }
    }

    #[test]
    fn malformed_files_name_the_record_and_empty_results_say_why() {
        let tok = tokenizer();
        let dir = Scratch::new("sharegpt-bad");
        let s = |p: &std::path::Path| scenario(p, 10, None, 0);
        let bad = dir.file(
            "bad.json",
            r#"[{"conversations": [{"from": "human", "value": "a b c d e"}, {"from": "gpt", "value": "x y z w v"}]},
                {"conversations": [{"from": "human"}, {"from": "gpt", "value": "x"}]}]"#,
        );
        let e = build_pool(&s(&bad), Some(&tok)).unwrap_err().to_string();
        assert!(
            e.contains("bad.json: record [1]") && e.contains("missing field `value`"),
            "{e}"
        );
        let not_json = dir.file("nj.json", "[{\"conversations\": [}]");
        let e = build_pool(&s(&not_json), Some(&tok))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nj.json: record [0]"), "{e}");
        let short = dir.file(
            "short.json",
            r#"[{"conversations": [{"value": "hi"}, {"value": "ok"}]}, {"conversations": [{"value": "x"}]}]"#,
        );
        let e = build_pool(&s(&short), Some(&tok)).unwrap_err().to_string();
        assert!(
            e.contains("short.json: the dataset yields no requests"),
            "{e}"
        );
        assert!(
            e.contains("fewer than 2 turns: 1") && e.contains("prompt < 4 tokens: 1"),
            "{e}"
        );
        let e = build_pool(&s(&short), None).unwrap_err().to_string();
        assert!(e.contains("needs a tokenizer"), "{e}");
        let Dataset::Sharegpt(d) = s(&short).dataset else {
            panic!("a sharegpt scenario")
        };
        let b = Build {
            d: &d,
            seed: 0,
            n: 1,
            tokenizer: Some(&tok),
            progress: &Silent,
        };
        assert!(build(&b).unwrap().0.is_empty());
    }
}
