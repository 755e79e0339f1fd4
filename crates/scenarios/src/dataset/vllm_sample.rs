//! `dataset.sampler = "vllm"`: the sample `vllm bench serve` (vLLM 0.32)
//! draws for a seed, reproduced draw for draw, so switching clients changes
//! nothing but the client.
//!
//! - `random` mirrors `RandomDataset.sample` (`vllm/benchmarks/datasets/
//!   datasets.py`, with `get_sampling_params` of `utils.py`): from
//!   `np.random.default_rng(seed)`, the input lengths, output lengths and
//!   vocabulary offsets (`size = n` each), then the shared prefix's ids, then
//!   for each prompt in turn the run of consecutive allowed ids from
//!   `offset + index`, decoded and re-encoded by `gen_prompt_decode_to_target_len`
//!   (up to 10 rounds; a short text gets random ids drawn from the same
//!   generator, a long one is truncated).
//! - `sharegpt` mirrors `ShareGPTDataset.load_data` (records with two turns
//!   or more, `random.seed(seed)`, `random.shuffle`) and `sample` (walk the
//!   shuffled records, keep the valid ones until `n`), then
//!   `maybe_oversample_requests` (`random.seed(seed)` again and
//!   `random.choice` until `n` when fewer were valid). The walk itself is
//!   `sharegpt.rs`'s streamed selection, keyed by each record's place in
//!   this shuffle.
//!
//! The tokenizer is seen as transformers 5 sees it (vLLM's client loads it
//! with `AutoTokenizer`): `vocab_size` is the vocabulary without added
//! tokens; `all_special_ids` are the named special tokens of
//! `tokenizer_config.json` and `special_tokens_map.json` beside
//! `tokenizer.json` (none without them); `decode` keeps special tokens and
//! applies `clean_up_tokenization` only when the config asks for it on a
//! non-BPE model.

use std::path::Path;

use serde_json::Value;

use super::pyrng::{Numpy, Python};
use super::{Build, DatasetError, DatasetReport, PoolEntry, Prompt};
use crate::scenario::RandomSpec;
use crate::tokenizer::{Tokenizer, TokenizerError};

/// `gen_prompt_decode_to_target_len`'s `max_retry`.
const MAX_RETRY: u32 = 10;

/// transformers' `SPECIAL_TOKENS_ATTRIBUTES`: the named special tokens.
const NAMED: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

/// Lists of further special tokens (transformers 4's and 5's names).
const LISTS: [&str; 2] = ["additional_special_tokens", "extra_special_tokens"];

/// The tokenizer as `vllm bench serve` sees it through transformers.
pub(crate) struct HfView<'a> {
    tok: &'a Tokenizer,
    /// `tokenizer.vocab_size`: the vocabulary without added tokens.
    vocab_size: u32,
    /// `tokenizer.all_special_ids`.
    special: Vec<u32>,
    /// `decode` applies `clean_up_tokenization`.
    clean_up: bool,
}

/// A config file's token value: `"<s>"` or `{"content": "<s>", ...}`.
fn token_text(v: &Value) -> Option<&str> {
    v.as_str().or_else(|| v.get("content")?.as_str())
}

/// transformers' `clean_up_tokenization`.
fn clean_up_tokenization(text: &str) -> String {
    [
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ]
    .iter()
    .fold(text.to_string(), |t, (from, to)| t.replace(from, to))
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

impl<'a> HfView<'a> {
    /// The view of `tok` with the config files beside its `tokenizer.json`.
    pub fn new(tok: &'a Tokenizer) -> Self {
        let dir = crate::tokenizer::resolve(&tok.source)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        let file = |name: &str| dir.as_ref().and_then(|d| read_json(&d.join(name)));
        Self::with_config(
            tok,
            file("tokenizer_config.json").as_ref(),
            file("special_tokens_map.json").as_ref(),
        )
    }

    /// The view of `tok` with these `tokenizer_config.json` and
    /// `special_tokens_map.json` contents.
    pub fn with_config(tok: &'a Tokenizer, config: Option<&Value>, map: Option<&Value>) -> Self {
        // a key of the config wins over the same key of the map
        let get = |key: &str| {
            config
                .and_then(|c| c.get(key))
                .or_else(|| map.and_then(|m| m.get(key)))
        };
        let mut texts: Vec<&str> = NAMED
            .iter()
            .filter_map(|k| get(k).and_then(token_text))
            .collect();
        for list in LISTS.iter().filter_map(|k| get(k)) {
            match list {
                Value::Array(a) => texts.extend(a.iter().filter_map(token_text)),
                Value::Object(o) => texts.extend(o.values().filter_map(token_text)),
                _ => {}
            }
        }
        let mut special: Vec<u32> = texts.iter().filter_map(|t| tok.token_id(t)).collect();
        special.sort_unstable();
        special.dedup();
        let flag = |key: &str| get(key).and_then(Value::as_bool).unwrap_or(false);
        let clean_up = flag("clean_up_tokenization_spaces")
            && (!tok.is_bpe()
                || flag("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"));
        Self {
            tok,
            vocab_size: tok.base_vocab_size(),
            special,
            clean_up,
        }
    }

    /// `tokenizer.decode(ids)`.
    fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        let text = self.tok.decode(ids)?;
        Ok(if self.clean_up {
            clean_up_tokenization(&text)
        } else {
            text
        })
    }

    /// `allowed_tokens`: `0..vocab_size` without the special ids, ascending
    /// (as the Python set difference iterates small ints).
    fn allowed(&self) -> Vec<u32> {
        (0..self.vocab_size)
            .filter(|id| self.special.binary_search(id).is_err())
            .collect()
    }

    /// `gen_prompt_decode_to_target_len(..., add_special_tokens=False, rng)`:
    /// the prompt text and its ids (their count is `target` unless the
    /// rounds ran out).
    fn fit(
        &self,
        ids: Vec<u32>,
        target: usize,
        g: &mut Numpy,
    ) -> Result<(String, Vec<u32>), TokenizerError> {
        let mut ids = ids;
        let mut tries = MAX_RETRY;
        loop {
            let prompt = self.decode(&ids)?;
            ids = self.tok.encode(&prompt)?;
            if tries == 0 || ids.len() == target {
                return Ok((prompt, ids));
            }
            if ids.len() < target {
                let more = g.integers(0, i64::from(self.vocab_size), target - ids.len());
                ids.extend(more.into_iter().map(|id| id as u32));
            } else {
                ids.truncate(target);
            }
            tries -= 1;
        }
    }
}

/// `get_sampling_params`' inclusive bounds: `floor(len * (1 - r))` to
/// `ceil(len * (1 + r))`, at least `min`.
fn bounds(len: i64, r: f64, min: i64) -> (i64, i64) {
    let low = ((len as f64) * (1.0 - r)).floor() as i64;
    let high = ((len as f64) * (1.0 + r)).ceil() as i64;
    (low.max(min), high.max(min))
}

/// The per-prompt draws of `get_sampling_params`, in its order.
struct Draws {
    input: Vec<i64>,
    output: Vec<i64>,
    offset: Vec<i64>,
}

fn draws(d: &Plain, tok: &Tokenizer, hf: &HfView<'_>, n: usize, g: &mut Numpy) -> Draws {
    let special = i64::try_from(tok.num_special_tokens()).unwrap_or(0);
    let real = (i64::from(d.input_len) - special).max(0);
    let (in_lo, in_hi) = bounds(real, d.range_ratio, i64::MIN);
    let (out_lo, out_hi) = bounds(i64::from(d.output_len), d.range_ratio, 1);
    // in get_sampling_params' order (a struct literal evaluates its fields
    // in the order written)
    let input = g.integers(in_lo, in_hi + 1, n);
    let output = g.integers(out_lo, out_hi + 1, n);
    let offset = g.integers(0, i64::from(hf.vocab_size), n);
    Draws {
        input,
        output,
        offset,
    }
}

/// The lengths vLLM's sample takes: plain numbers (vLLM draws them
/// uniformly within `range_ratio`; it has no other distribution).
struct Plain {
    input_len: u32,
    output_len: u32,
    range_ratio: f64,
}

/// `RandomDataset(random_seed=seed).sample(tokenizer, n, prefix_len,
/// range_ratio, input_len, output_len)`.
pub(crate) fn random(
    b: &Build<'_, RandomSpec>,
    tok: &Tokenizer,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let (Some(input_len), Some(output_len)) = (b.d.input_len.fixed(), b.d.output_len.fixed())
    else {
        return Err(DatasetError::Invalid(
            "sampler = \"vllm\" draws vLLM's uniform lengths: give input_len and output_len as whole numbers (with range_ratio)".into(),
        ));
    };
    let d = &Plain {
        input_len,
        output_len,
        range_ratio: b.d.range_ratio,
    };
    let prefix_len = b.d.prefix_len as usize;
    let tok_err = |e| DatasetError::Tokenizer {
        what: "random prompts (vLLM's sample)".to_string(),
        source: e,
    };
    let hf = HfView::new(tok);
    let special = i64::try_from(tok.num_special_tokens()).unwrap_or(0);
    let real = (i64::from(d.input_len) - special).max(0);
    if prefix_len as i64 + bounds(real, d.range_ratio, i64::MIN).0 < 1 {
        return Err(DatasetError::Invalid(format!(
            "dataset.input_len {} is too small for vLLM's sample: with the tokenizer's {special} special tokens and range_ratio {}, \
             a prompt could have no token (prefix_len + floor((input_len - special tokens) * (1 - range_ratio)) must be at least 1)",
            d.input_len, d.range_ratio
        )));
    }
    let allowed = hf.allowed();
    if allowed.is_empty() {
        return Err(tok_err(TokenizerError::Use(
            "every token below vocab_size is special: no prompt can be drawn".into(),
        )));
    }
    let n = usize::try_from(b.n).unwrap_or(usize::MAX);
    let mut g = Numpy::new(b.seed);
    let draws = draws(d, tok, &hf, n, &mut g);
    let mut inexact = 0;
    let prefix = if prefix_len == 0 {
        Vec::new()
    } else {
        let picks = g.integers(0, allowed.len() as i64, prefix_len);
        let ids = picks.iter().map(|&k| allowed[k as usize]).collect();
        let (_, ids) = hf.fit(ids, prefix_len, &mut g).map_err(tok_err)?;
        inexact += u64::from(ids.len() != prefix_len);
        ids
    };
    b.progress
        .start("building random prompts (vLLM's sample)", b.n, "prompts");
    let mut entries = Vec::with_capacity(n);
    for i in 0..n {
        let len = draws.input[i].max(0) as usize;
        let start = draws.offset[i] + i as i64;
        let mut ids = prefix.clone();
        ids.extend((0..len).map(|j| allowed[((start + j as i64) as usize) % allowed.len()]));
        let target = prefix_len + len;
        let (prompt, ids) = hf.fit(ids, target, &mut g).map_err(tok_err)?;
        inexact += u64::from(ids.len() != target);
        entries.push(PoolEntry {
            id: i as u64,
            prompt: Prompt::Text(prompt.into()),
            input_tokens: u32::try_from(ids.len()).unwrap_or(u32::MAX),
            output_tokens: Some(u32::try_from(draws.output[i]).unwrap_or(u32::MAX)),
            conversation: None,
            shape: None,
            media: super::Media::default(),
        });
        b.progress.advance(1);
    }
    b.progress.finish();
    let mut report = b.report();
    report.read = b.n;
    report.kept = b.n;
    report.inexact = inexact;
    Ok((entries, report))
}

/// `random.seed(seed); random.shuffle(records)` over the `m` records with
/// two turns or more: each record's place in the shuffled order.
pub(crate) fn shuffled_places(seed: u64, m: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..m).collect();
    Python::new(seed).shuffle(&mut order);
    let mut place = vec![0; order.len()];
    for (k, &record) in order.iter().enumerate() {
        place[record as usize] = k as u64;
    }
    place
}

/// `maybe_oversample_requests`: when fewer than `n` records were valid,
/// `random.seed(seed)` and `random.choice` of the valid ones until `n`.
pub(crate) fn oversample(seed: u64, entries: &mut Vec<PoolEntry>, n: u64) {
    let have = entries.len();
    if have == 0 || have as u64 >= n {
        return;
    }
    let mut r = Python::new(seed);
    for id in have as u64..n {
        let mut e = entries[r.choice(have)].clone();
        e.id = id;
        entries.push(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::testutil::tokenizer;
    use crate::dataset::{Silent, build_pool};
    use crate::scenario::{Dataset, Sampler, Scenario, SharegptSpec, TokenizerSpec};

    /// The fixtures' directory (`tests/fixtures/pyrng`, written by `make_vllm.py`).
    fn fixtures() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pyrng")
    }

    /// The fixtures' tokenizer, with its config beside it.
    fn fixture_tokenizer() -> Tokenizer {
        Tokenizer::load(fixtures().join("tokenizer").to_str().unwrap()).unwrap()
    }

    fn fixture(name: &str) -> Value {
        serde_json::from_str(&std::fs::read_to_string(fixtures().join(name)).unwrap()).unwrap()
    }

    /// (prompt, prompt tokens, output tokens) of each entry, in order.
    fn rows(entries: &[PoolEntry]) -> Vec<(String, u64, u64)> {
        entries
            .iter()
            .map(|e| {
                let out = e.output_tokens.unwrap();
                let text = e.prompt.text().into_owned();
                (text, u64::from(e.input_tokens), u64::from(out))
            })
            .collect()
    }

    /// The rows vLLM's client sampled, as the fixture holds them.
    fn vllm_rows(case: &Value) -> Vec<(String, u64, u64)> {
        let row = |s: &Value| {
            let n = |i: usize| s[i].as_u64().unwrap();
            (s[0].as_str().unwrap().to_string(), n(1), n(2))
        };
        case["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(row)
            .collect()
    }

    #[test]
    fn special_ids_come_from_the_named_tokens_of_the_config_files() {
        let tok = tokenizer();
        let (s, e) = (tok.token_id("<s>").unwrap(), tok.token_id("</s>").unwrap());
        let none = HfView::with_config(&tok, None, None);
        assert!(none.special.is_empty(), "without config files, none");
        let config = serde_json::json!({"bos_token": "<s>", "unk_token": "<nope>",
            "clean_up_tokenization_spaces": true});
        let map = serde_json::json!({"bos_token": "</s>", "eos_token": {"content": "</s>"}});
        let v = HfView::with_config(&tok, Some(&config), Some(&map));
        // the config's bos wins; the map adds eos; unknown names are left out
        let mut want = vec![s, e];
        want.sort_unstable();
        assert_eq!(v.special, want);
        assert_eq!(v.vocab_size, tok.base_vocab_size());
        let allowed = v.allowed();
        assert!(!allowed.contains(&s) && allowed.len() == v.vocab_size as usize - 2);
        // BPE: transformers skips the clean-up
        assert!(!v.clean_up);
        let extra = serde_json::json!({"extra_special_tokens": ["<s>"]});
        assert_eq!(HfView::with_config(&tok, Some(&extra), None).special, [s]);
        // transformers' own output for this text
        assert_eq!(
            clean_up_tokenization("a , b . is n't it ' s ? I 'm here , we 've , they 're ! he 's"),
            "a, b. isn't it's? I'm here, we've, they're! he's"
        );
        // the fixture's config names <s> and </s>, not its third special <x>
        let f = fixture_tokenizer();
        let fv = HfView::new(&f);
        assert_eq!(
            fv.special,
            [f.token_id("<s>").unwrap(), f.token_id("</s>").unwrap()]
        );
        assert!(f.special_ids().contains(&f.token_id("<x>").unwrap()));
    }

    /// Prompts, their lengths and their order as vLLM 0.32's client drew
    /// them for the same tokenizer and settings (`vllm_random.json`).
    #[test]
    fn random_sample_is_vllms() {
        let tok = fixture_tokenizer();
        let mut inexact = 0;
        for case in fixture("vllm_random.json")["cases"].as_array().unwrap() {
            let n = |k: &str| case[k].as_u64().unwrap();
            let d = RandomSpec {
                input_len: (n("input_len") as u32).into(),
                output_len: (n("output_len") as u32).into(),
                range_ratio: case["range_ratio"].as_f64().unwrap(),
                prefix_len: n("prefix_len") as u32,
                sampler: Sampler::Vllm,
                prompt_token_ids: false,
            };
            let b = Build {
                d: &d,
                seed: n("seed"),
                n: n("n"),
                tokenizer: Some(&tok),
                progress: &Silent,
            };
            let (entries, report) = random(&b, &tok).unwrap();
            assert_eq!(rows(&entries), vllm_rows(case), "{}", case["name"]);
            inexact += report.inexact;
        }
        // the tokenizer's merges leave some prompts off their length after
        // vLLM's ten rounds: that branch is covered too
        assert!(inexact > 0);
    }

    /// ShareGPT records, their order, the oversampled padding and the
    /// lengths as vLLM 0.32's client sampled them (`vllm_sharegpt.json`).
    #[test]
    fn sharegpt_sample_is_vllms() {
        let tok = fixture_tokenizer();
        for case in fixture("vllm_sharegpt.json")["cases"].as_array().unwrap() {
            let mut s = Scenario {
                seed: case["seed"].as_u64().unwrap(),
                tokenizer: Some(TokenizerSpec {
                    source: tok.source.clone(),
                    verify_every: 0,
                }),
                dataset: Dataset::Sharegpt(SharegptSpec {
                    path: fixtures().join("sharegpt.json"),
                    output_len: case["output_len"].as_u64().map(|n| n as u32),
                    shuffle: true,
                    sampler: Sampler::Vllm,
                }),
                ..Scenario::default()
            };
            s.load.num_prompts = case["n"].as_u64();
            let pool = build_pool(&s, Some(&tok)).unwrap();
            assert_eq!(rows(&pool.entries), vllm_rows(case), "{}", case["name"]);
        }
    }

    #[test]
    fn oversampling_picks_as_random_choice_does() {
        let entry = |id: u64| PoolEntry {
            id,
            prompt: Prompt::Text(format!("p{id}").into()),
            input_tokens: 1,
            output_tokens: Some(1),
            conversation: None,
            shape: None,
            media: crate::dataset::Media::default(),
        };
        let mut e: Vec<PoolEntry> = (0..7).map(entry).collect();
        oversample(0, &mut e, 19);
        let picked: Vec<String> = e[7..]
            .iter()
            .map(|e| e.prompt.text().into_owned())
            .collect();
        // CPython: random.seed(0); [random.choice(range(7)) for _ in range(12)]
        let python = fixture("python.json");
        let want: Vec<String> = python["seeds"][0]["choices"].as_array().unwrap()[..12]
            .iter()
            .map(|c| format!("p{c}"))
            .collect();
        assert_eq!(picked, want);
        assert!(e.iter().enumerate().all(|(i, e)| e.id == i as u64));
        assert!(shuffled_places(0, 0).is_empty());
    }
}
