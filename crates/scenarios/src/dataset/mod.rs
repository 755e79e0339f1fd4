//! Datasets: turning a scenario's `[dataset]` into the request pool.
//!
//! The coordinator builds the pool once, deterministically from the seed, and
//! ships each worker the entries its stripe of the schedule uses, so the same
//! seed sends the same prompts whatever the number of workers.

mod agent_trace;
mod agent_tree;
mod agentic;
mod batch;
mod conversations;
mod exact;
mod json_array;
mod jsonl;
mod lengths;
mod media;
mod mixed;
mod multi_turn;
/// The media workloads' own checks, for validation to name their keys.
pub(crate) mod media_checks {
    pub(crate) use super::media::{image_buckets, item_bounds};
}
mod parallel;
mod prefix;
mod pyrng;
mod random;
mod rerank;
mod select;
mod shapes;
mod sharegpt;
mod sonnet;
mod trace;
mod vllm_sample;
mod weka;
mod words;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::scenario::{
    AgentTraceSpec, AgenticSpec, AudioSpec, ConversationsSpec, Dataset, DatasetKind, JsonlSpec,
    MultiTurnSpec, PrefixSpec, RandomMmSpec, RandomSpec, Scenario, SharegptSpec, SonnetSpec,
    TraceSpec,
};
use crate::tokenizer::{Tokenizer, TokenizerError};

use cicada_plan::pool::{
    Audio, Branch, ChatMessage, Conversation, Image, Media, MediaFile, OutputShape, PoolEntry,
    Prompt, Turn,
};

/// Why a dataset could not be built.
#[derive(Debug, Error)]
pub enum DatasetError {
    /// The dataset file could not be read.
    #[error("{path}: cannot read the dataset: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// An element of a JSON array file is malformed (`record` is its 0-based index).
    #[error("{path}: record [{record}]: {message}")]
    Record {
        path: String,
        record: u64,
        message: String,
    },
    /// A line of a JSONL file is malformed (`line` is 1-based).
    #[error("{path}:{line}: {message}")]
    Line {
        path: String,
        line: u64,
        message: String,
    },
    /// The file as a whole is not in the expected format.
    #[error("{path}: {message}")]
    Format { path: String, message: String },
    /// Nothing was left to send.
    #[error("{origin}: the dataset yields no requests: {reason}")]
    Empty { origin: String, reason: String },
    /// The kind counts tokens and no tokenizer was given.
    #[error(
        "the {kind} dataset counts tokens and needs a tokenizer: add [tokenizer] source = \"<tokenizer.json, model directory or hub id>\""
    )]
    NeedsTokenizer { kind: &'static str },
    /// The tokenizer failed on the dataset's text.
    #[error("{what}: {source}")]
    Tokenizer {
        what: String,
        #[source]
        source: TokenizerError,
    },
    /// The settings cannot produce the requested pool.
    #[error("{0}")]
    Invalid(String),
}

/// Counts describing how the pool was built.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DatasetReport {
    /// Workload kind.
    #[serde(default)]
    pub kind: String,
    /// Records read from the source (or prompts generated).
    pub read: u64,
    /// Records dropped by filters.
    pub filtered: u64,
    /// Records dropped, by reason.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub filter_reasons: BTreeMap<String, u64>,
    /// Records kept in the pool.
    pub kept: u64,
    /// Valid records the run did not need (the pool was full).
    #[serde(default)]
    pub unused: u64,
    /// Prompts whose re-encoded length could not be made exactly the asked length.
    #[serde(default)]
    pub inexact: u64,
    /// How lengths were counted (the tokenizer's source, or "words" without one).
    pub counted_with: String,
    /// The lengths drawn from a distribution: what was asked, what the pool holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lengths: Vec<LengthReport>,
}

/// A length drawn from a distribution (`[dataset.input_len]`), as asked and
/// as the pool holds it, so a run says what it sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LengthReport {
    /// `input_len` or `output_len`.
    pub key: String,
    /// The distribution as asked (`lognormal(mean 1000, sigma 0.5) in [16, 8192]`).
    pub asked: String,
    /// The pool's shortest, in tokens (an input's as recorded: its shared prefix included).
    pub min: u32,
    /// The pool's median (nearest rank).
    pub p50: u32,
    /// The pool's mean.
    pub mean: f64,
    /// The pool's 99th percentile (nearest rank).
    pub p99: u32,
    /// The pool's longest.
    pub max: u32,
}

impl fmt::Display for LengthReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: pool min {}, p50 {}, mean {:.1}, p99 {}, max {}",
            self.key, self.asked, self.min, self.p50, self.mean, self.p99, self.max
        )
    }
}

impl DatasetReport {
    fn new(kind: DatasetKind, tokenizer: Option<&Tokenizer>) -> Self {
        Self {
            kind: kind.name().to_string(),
            counted_with: counted_with(tokenizer),
            ..Self::default()
        }
    }

    /// Count one record dropped for `reason`.
    fn drop_for(&mut self, reason: &str) {
        self.filtered += 1;
        *self.filter_reasons.entry(reason.to_string()).or_default() += 1;
    }
}

impl fmt::Display for DatasetReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "read {}, filtered {}", self.read, self.filtered)?;
        if !self.filter_reasons.is_empty() {
            let reasons: Vec<String> = self
                .filter_reasons
                .iter()
                .map(|(r, n)| format!("{r}: {n}"))
                .collect();
            write!(f, " ({})", reasons.join(", "))?;
        }
        write!(f, ", kept {}", self.kept)?;
        if self.unused > 0 {
            write!(f, ", not needed {}", self.unused)?;
        }
        if self.inexact > 0 {
            write!(f, ", {} prompts off their asked length", self.inexact)?;
        }
        write!(f, " ({}, counted with {})", self.kind, self.counted_with)?;
        for l in &self.lengths {
            write!(f, "\n  {l}")?;
        }
        Ok(())
    }
}

fn counted_with(tokenizer: Option<&Tokenizer>) -> String {
    tokenizer.map_or_else(|| "words".to_string(), |t| t.source.clone())
}

/// The request pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub entries: Vec<PoolEntry>,
    pub report: DatasetReport,
    /// Send offsets from the start barrier, µs, one per entry in order
    /// (trace replay); `None` for workloads paced by the arrival process.
    pub arrivals_us: Option<Vec<u64>>,
    /// The distinct tools / response formats entries ask for (`PoolEntry::shape`).
    pub shapes: Vec<OutputShape>,
    /// Mixed traffic: each workload's run of entry ids, in `[[workloads]]`
    /// order (empty without workloads).
    pub workloads: Vec<std::ops::Range<u64>>,
}

/// Receives progress while a pool is built (the coordinator draws a bar).
pub trait Progress: Sync {
    /// A phase starts with `total` units (`unit` is "bytes" or "prompts").
    fn start(&self, _what: &str, _total: u64, _unit: &str) {}
    /// `n` more units are done.
    fn advance(&self, _n: u64) {}
    /// The phase ended.
    fn finish(&self) {}
}

/// Progress that goes nowhere.
pub struct Silent;

impl Progress for Silent {}

/// A kind's settings, for the builder of that kind.
pub(crate) trait Spec {
    /// The kind these settings belong to.
    const KIND: DatasetKind;
}

impl Spec for RandomSpec {
    const KIND: DatasetKind = DatasetKind::Random;
}
impl Spec for SharegptSpec {
    const KIND: DatasetKind = DatasetKind::Sharegpt;
}
impl Spec for SonnetSpec {
    const KIND: DatasetKind = DatasetKind::Sonnet;
}
impl Spec for PrefixSpec {
    const KIND: DatasetKind = DatasetKind::Prefix;
}
impl Spec for JsonlSpec {
    const KIND: DatasetKind = DatasetKind::Jsonl;
}
impl Spec for ConversationsSpec {
    const KIND: DatasetKind = DatasetKind::Conversations;
}
impl Spec for MultiTurnSpec {
    const KIND: DatasetKind = DatasetKind::MultiTurn;
}
impl Spec for AgenticSpec {
    const KIND: DatasetKind = DatasetKind::Agentic;
}
impl Spec for AgentTraceSpec {
    const KIND: DatasetKind = DatasetKind::AgentTrace;
}
impl Spec for TraceSpec {
    const KIND: DatasetKind = DatasetKind::Trace;
}
impl Spec for RandomMmSpec {
    const KIND: DatasetKind = DatasetKind::RandomMm;
}
impl Spec for AudioSpec {
    const KIND: DatasetKind = DatasetKind::Audio;
}

/// What every builder gets: its kind's settings and the run's.
pub(crate) struct Build<'a, S> {
    pub d: &'a S,
    pub seed: u64,
    /// Entries wanted.
    pub n: u64,
    pub tokenizer: Option<&'a Tokenizer>,
    pub progress: &'a dyn Progress,
}

impl<S: Spec> Build<'_, S> {
    fn tokenizer(&self) -> Result<&Tokenizer, DatasetError> {
        self.tokenizer.ok_or(DatasetError::NeedsTokenizer {
            kind: S::KIND.name(),
        })
    }

    fn report(&self) -> DatasetReport {
        DatasetReport::new(S::KIND, self.tokenizer)
    }
}

/// Prompts a duration-bound run cycles through when `load.pool_size` is not given.
pub const DEFAULT_POOL_SIZE: u64 = 1000;

/// Entries the scenario's run needs: `num_prompts` (at most `load.pool_size`),
/// or the pool size for duration runs.
pub fn pool_len(s: &Scenario) -> u64 {
    let cap = s.load.pool_size;
    match (s.load.num_prompts, s.load.duration) {
        (Some(n), _) => cap.map_or(n, |c| n.min(c)),
        (None, Some(_)) => cap.unwrap_or(DEFAULT_POOL_SIZE),
        (None, None) => crate::scenario::DEFAULT_NUM_PROMPTS.min(cap.unwrap_or(u64::MAX)),
    }
}

/// Build the request pool for a scenario.
pub fn build_pool(s: &Scenario, tokenizer: Option<&Tokenizer>) -> Result<Pool, DatasetError> {
    build_pool_with(s, tokenizer, &Silent)
}

/// Build the request pool, reporting progress.
///
/// Without a tokenizer, `random` builds prompts of common one-token words (the
/// built-in mock counts them exactly); with one, its prompts are token-exact.
/// `sharegpt`, `sonnet` and `prefix` need a tokenizer.
pub fn build_pool_with(
    s: &Scenario,
    tokenizer: Option<&Tokenizer>,
    progress: &dyn Progress,
) -> Result<Pool, DatasetError> {
    if !s.workloads.is_empty() {
        return mixed::build(s, tokenizer, progress);
    }
    let (pools, reranks) = (
        s.target.backend.pools(s.mock.api),
        s.target.backend.reranks(s.mock.api),
    );
    // a pooling request carries a batch of texts (a rerank's a query too):
    // build enough to fill them
    let n = if reranks {
        rerank::texts_needed(pool_len(s), s.pooling.most())
    } else if pools {
        pool_len(s).saturating_mul(u64::from(s.pooling.most().max(1)))
    } else {
        pool_len(s)
    };
    macro_rules! with {
        ($spec:expr, $builder:path) => {
            $builder(&Build {
                d: $spec,
                seed: s.seed,
                n,
                tokenizer,
                progress,
            })?
        };
    }
    let mut arrivals_us = None;
    let mut shapes = Vec::new();
    let (mut entries, mut report) = match &s.dataset {
        Dataset::Random(d) => with!(d, random::build),
        Dataset::Sharegpt(d) => with!(d, sharegpt::build),
        Dataset::Sonnet(d) => with!(d, sonnet::build),
        Dataset::Prefix(d) => with!(d, prefix::build),
        Dataset::Jsonl(d) => {
            let j = with!(d, jsonl::build);
            shapes = j.shapes;
            (j.entries, j.report)
        }
        Dataset::Conversations(d) => with!(d, conversations::build),
        Dataset::MultiTurn(d) => with!(d, multi_turn::build),
        Dataset::Agentic(d) => with!(d, agentic::build),
        Dataset::AgentTrace(d) => with!(d, agent_trace::build),
        Dataset::RandomMm(d) => with!(d, media::build_random_mm),
        Dataset::Audio(d) => with!(d, media::build_audio),
        Dataset::Trace(d) => {
            let b = Build {
                d,
                seed: s.seed,
                n,
                tokenizer,
                progress,
            };
            let t = trace::build(&b, s.load.num_prompts)?;
            arrivals_us = Some(t.arrivals_us);
            (t.entries, t.report)
        }
    };
    if entries.is_empty() {
        let origin = s.dataset.path().map_or_else(
            || s.dataset.kind().name().to_string(),
            |p| p.display().to_string(),
        );
        return Err(DatasetError::Empty {
            origin,
            reason: if report.filtered > 0 {
                format!(
                    "all {} records were filtered out ({})",
                    report.filtered,
                    report
                        .filter_reasons
                        .iter()
                        .map(|(r, n)| format!("{r}: {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                "it holds no records".to_string()
            },
        });
    }
    report.lengths = lengths::report(&s.dataset, &entries);
    entries = pooled(s, entries)?;
    let shapes = shapes::settle(s, &mut entries, shapes);
    if !shapes.is_empty()
        && let Some(why) = crate::validate_structured::cannot_carry(s)
    {
        return Err(DatasetError::Invalid(format!(
            "the dataset's lines carry tools or a response format: {why}"
        )));
    }
    Ok(Pool {
        entries,
        report,
        arrivals_us,
        shapes,
        workloads: Vec::new(),
    })
}

/// The workload's entries as a pooling backend sends them: grouped into
/// rerank requests or embeddings batches; as they are for a generation
/// backend, which cannot send rerank lines.
fn pooled(s: &Scenario, entries: Vec<PoolEntry>) -> Result<Vec<PoolEntry>, DatasetError> {
    let backend = s.target.backend;
    if backend.reranks(s.mock.api) {
        return rerank::group(&s.pooling, s.seed, entries, pool_len(s));
    }
    if entries
        .iter()
        .any(|e| matches!(e.prompt, Prompt::Rerank { .. }))
    {
        return Err(DatasetError::Invalid(format!(
            "the dataset holds rerank lines (\"query\" and \"documents\"), which only a rerank backend sends, not \"{}\"",
            backend.name()
        )));
    }
    Ok(if backend.pools(s.mock.api) {
        batch::group(&s.pooling, s.seed, entries, pool_len(s))
    } else {
        entries
    })
}

/// Count `text` with the tokenizer (with its special tokens, as the server
/// sees a prompt), or in words without one.
fn count_prompt(tokenizer: Option<&Tokenizer>, text: &str) -> Result<u32, TokenizerError> {
    match tokenizer {
        Some(t) => t.count_with_special(text).map(clamp_u32),
        None => Ok(clamp_u32(text.split_whitespace().count())),
    }
}

/// Count `text` without special tokens (a piece of a prompt, or an answer).
fn count_piece(tokenizer: Option<&Tokenizer>, text: &str) -> Result<u32, TokenizerError> {
    match tokenizer {
        Some(t) => t.count(text).map(clamp_u32),
        None => Ok(clamp_u32(text.split_whitespace().count())),
    }
}

fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn tokenizer_error(path: &Path, e: TokenizerError) -> DatasetError {
    DatasetError::Tokenizer {
        what: path.display().to_string(),
        source: e,
    }
}

fn open(path: &Path) -> Result<std::fs::File, DatasetError> {
    std::fs::File::open(path).map_err(|source| DatasetError::Read {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
pub(crate) mod testutil {
    //! A real tokenizer for dataset tests, trained once without downloads.

    use std::sync::OnceLock;

    use crate::tokenizer::{Tokenizer, train_bpe};

    /// A byte-level BPE trained on plain English-like text.
    pub fn tokenizer() -> Tokenizer {
        static T: OnceLock<Tokenizer> = OnceLock::new();
        T.get_or_init(|| {
            let words = super::words::WORDS;
            let corpus: Vec<String> = (0..600)
                .map(|i| {
                    let w: Vec<&str> = (0..24)
                        .map(|j| words[(i * 7 + j * 13 + i * j) % words.len()])
                        .collect();
                    format!("{} {i}. Tell me, why is {}?", w.join(" "), w[3])
                })
                .collect();
            train_bpe(&corpus, 1200).expect("training a test tokenizer")
        })
        .clone()
    }

    /// The same tokenizer with a post-processor that adds a BOS (`<s>`), as
    /// Llama's does: `count_with_special` is one more than `count`.
    pub fn tokenizer_with_bos() -> Tokenizer {
        let mut v: serde_json::Value = serde_json::from_str(tokenizer().json()).unwrap();
        let bos = v["added_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["content"] == "<s>")
            .unwrap()["id"]
            .clone();
        v["post_processor"] = serde_json::json!({
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]}}
        });
        let mut t = Tokenizer::from_json(&v.to_string()).unwrap();
        t.source = "trained-bpe-bos".to_string();
        assert_eq!(t.num_special_tokens(), 1);
        t
    }

    /// A scratch directory removed on drop.
    pub struct Scratch(pub std::path::PathBuf);

    impl Scratch {
        pub fn new(name: &str) -> Self {
            let p = std::env::temp_dir().join(format!(
                "cicada-ds-{name}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }

        pub fn file(&self, name: &str, text: &str) -> std::path::PathBuf {
            let p = self.0.join(name);
            std::fs::write(&p, text).unwrap();
            p
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
