//! The scenario's `[dataset]` section: `kind` picks the workload, and each
//! kind is its own type holding exactly the keys it takes, with their
//! defaults. Which keys a kind takes is read off its type, so messages about
//! a key given to the wrong kind (`does not apply to kind "random" (it
//! applies to trace)`) need no table kept beside the types.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use cicada_plan::units::Span;

pub use crate::length_spec::{Length, LengthDist, Shape as LengthShape, Weighted};
pub use crate::media_spec::{AudioSpec, ImageBucket, MmLimits, RandomMmSpec};

/// Kinds of workload: the values of `dataset.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DatasetKind {
    /// Synthetic prompts of drawn lengths (token-exact with a tokenizer).
    #[default]
    Random,
    /// The ShareGPT JSON file, filtered by `vllm bench serve`'s rules.
    Sharegpt,
    /// Lines of a poem: an instruction, shared prefix lines and random lines.
    Sonnet,
    /// `num_prefixes` shared random prefixes, each with per-request random suffixes.
    Prefix,
    /// One `{"prompt": ...}` or `{"messages": [...]}` object per line.
    Jsonl,
    /// Multi-turn sessions sent with the model's own previous answers.
    Conversations,
    /// Synthetic multi-turn sessions (no file): drawn turns and lengths.
    MultiTurn,
    /// Synthetic agentic sessions (no file): turns that fan out into
    /// parallel sub-agents and wait for tools.
    Agentic,
    /// Agentic sessions read from a trace (cicada's JSONL or a Weka trace).
    AgentTrace,
    /// A Mooncake-style trace replayed at its timestamps.
    Trace,
    /// `random` prompts with images attached (vLLM's `random-mm`).
    #[serde(rename = "random-mm")]
    RandomMm,
    /// Audio clips to transcribe: WAV files, or synthetic tones.
    Audio,
}

impl DatasetKind {
    /// Every kind, for messages.
    pub const ALL: [DatasetKind; 12] = [
        DatasetKind::Random,
        DatasetKind::Sharegpt,
        DatasetKind::Sonnet,
        DatasetKind::Prefix,
        DatasetKind::Jsonl,
        DatasetKind::Conversations,
        DatasetKind::MultiTurn,
        DatasetKind::Agentic,
        DatasetKind::AgentTrace,
        DatasetKind::Trace,
        DatasetKind::RandomMm,
        DatasetKind::Audio,
    ];

    /// Name as written in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            DatasetKind::Random => "random",
            DatasetKind::Sharegpt => "sharegpt",
            DatasetKind::Sonnet => "sonnet",
            DatasetKind::Prefix => "prefix",
            DatasetKind::Jsonl => "jsonl",
            DatasetKind::Conversations => "conversations",
            DatasetKind::MultiTurn => "multi_turn",
            DatasetKind::Agentic => "agentic",
            DatasetKind::AgentTrace => "agent_trace",
            DatasetKind::Trace => "trace",
            DatasetKind::RandomMm => "random-mm",
            DatasetKind::Audio => "audio",
        }
    }

    /// The kind a name (as in scenario files) stands for.
    pub fn from_name(name: &str) -> Option<DatasetKind> {
        DatasetKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Kinds that cannot count tokens without a tokenizer.
    pub fn needs_tokenizer(self) -> bool {
        matches!(
            self,
            DatasetKind::Sharegpt | DatasetKind::Sonnet | DatasetKind::Prefix
        )
    }

    /// Kinds whose output lengths are a specification rather than a natural
    /// answer, so `ignore_eos` is on by default.
    pub fn synthetic(self) -> bool {
        matches!(
            self,
            DatasetKind::Random
                | DatasetKind::Prefix
                | DatasetKind::Trace
                | DatasetKind::RandomMm
                | DatasetKind::MultiTurn
                | DatasetKind::Agentic
        )
    }

    /// Kinds whose scheduled requests start multi-turn sessions (sent as
    /// growing `messages` arrays with the model's real answers).
    pub fn sessions(self) -> bool {
        matches!(
            self,
            DatasetKind::Conversations
                | DatasetKind::MultiTurn
                | DatasetKind::Agentic
                | DatasetKind::AgentTrace
        )
    }

    /// The keys (besides `kind`) this kind takes, in the order they are written.
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            DatasetKind::Random => field_names::<RandomSpec>(),
            DatasetKind::Sharegpt => field_names::<SharegptSpec>(),
            DatasetKind::Sonnet => field_names::<SonnetSpec>(),
            DatasetKind::Prefix => field_names::<PrefixSpec>(),
            DatasetKind::Jsonl => field_names::<JsonlSpec>(),
            DatasetKind::Conversations => field_names::<ConversationsSpec>(),
            DatasetKind::MultiTurn => field_names::<MultiTurnSpec>(),
            DatasetKind::Agentic => field_names::<AgenticSpec>(),
            DatasetKind::AgentTrace => field_names::<AgentTraceSpec>(),
            DatasetKind::Trace => field_names::<TraceSpec>(),
            DatasetKind::RandomMm => field_names::<RandomMmSpec>(),
            DatasetKind::Audio => field_names::<AudioSpec>(),
        }
    }
}

// defaults, named for serde
fn yes() -> bool {
    true
}
fn n10() -> u32 {
    10
}
fn n150() -> u32 {
    150
}
fn n200() -> u32 {
    200
}
fn n256() -> u32 {
    256
}
fn n512() -> u32 {
    512
}
fn n550() -> u32 {
    550
}
fn one() -> f64 {
    1.0
}
pub(crate) fn len128() -> Length {
    Length::Fixed(128)
}
pub(crate) fn len1024() -> Length {
    Length::Fixed(1024)
}

/// Whose draws pick a `random` or `sharegpt` sample for a seed (`dataset.sampler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sampler {
    /// cicada's own: token-exact random prompts, a streamed ShareGPT selection.
    #[default]
    Cicada,
    /// `vllm bench serve`'s (vLLM 0.32), draw for draw: the same seed sends
    /// the same prompts, lengths and order as vLLM's client.
    Vllm,
}

impl Sampler {
    /// Name as written in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Sampler::Cicada => "cicada",
            Sampler::Vllm => "vllm",
        }
    }

    fn is_cicada(&self) -> bool {
        *self == Sampler::Cicada
    }
}

/// `kind = "random"`: synthetic prompts; token-exact with a `[tokenizer]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomSpec {
    /// Prompt length in tokens, or its distribution.
    #[serde(default = "len1024")]
    pub input_len: Length,
    /// Output tokens asked of the server, or their distribution.
    #[serde(default = "len128")]
    pub output_len: Length,
    /// Plain lengths are drawn uniformly within ±ratio of the asked length.
    #[serde(default)]
    pub range_ratio: f64,
    /// Tokens of a random prefix shared by every prompt.
    #[serde(default)]
    pub prefix_len: u32,
    /// Whose draws pick the prompts (`"vllm"` needs a tokenizer).
    #[serde(default, skip_serializing_if = "Sampler::is_cicada")]
    pub sampler: Sampler,
    /// Send each prompt as its token ids (`prompt: [ids]`, vllm-bench's
    /// `--prompt-token-ids`): the server skips tokenizing and counts exactly
    /// the drawn length. Completions APIs only; needs a tokenizer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompt_token_ids: bool,
}

impl Default for RandomSpec {
    fn default() -> Self {
        Self {
            input_len: len1024(),
            output_len: len128(),
            range_ratio: 0.0,
            prefix_len: 0,
            sampler: Sampler::Cicada,
            prompt_token_ids: false,
        }
    }
}

/// `kind = "sharegpt"`: the ShareGPT JSON file with `vllm bench serve`'s filters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharegptSpec {
    /// The dataset file (relative paths are relative to the scenario file).
    pub path: PathBuf,
    /// A fixed output length replacing each answer's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_len: Option<u32>,
    /// Shuffle by the seed before taking entries.
    #[serde(default = "yes")]
    pub shuffle: bool,
    /// Whose shuffle orders the records.
    #[serde(default, skip_serializing_if = "Sampler::is_cicada")]
    pub sampler: Sampler,
}

/// `kind = "sonnet"`: an instruction, the poem's first lines as a shared
/// prefix, random lines up to `input_len`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SonnetSpec {
    /// The poem's text file.
    pub path: PathBuf,
    /// Prompt length in tokens.
    #[serde(default = "n550")]
    pub input_len: u32,
    /// Output tokens asked of the server.
    #[serde(default = "n150")]
    pub output_len: u32,
    /// Tokens of the shared prefix.
    #[serde(default = "n200")]
    pub prefix_len: u32,
}

/// `kind = "prefix"`: `num_prefixes` random prefixes × per-request random suffixes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixSpec {
    /// Output tokens asked of the server, or their distribution.
    #[serde(default = "len128")]
    pub output_len: Length,
    /// Tokens of each shared prefix.
    #[serde(default = "n256")]
    pub prefix_len: u32,
    /// Tokens of each request's own suffix.
    #[serde(default = "n256")]
    pub suffix_len: u32,
    /// Distinct shared prefixes.
    #[serde(default = "n10")]
    pub num_prefixes: u32,
    /// Shuffle by the seed.
    #[serde(default = "yes")]
    pub shuffle: bool,
}

impl Default for PrefixSpec {
    fn default() -> Self {
        Self {
            output_len: len128(),
            prefix_len: n256(),
            suffix_len: n256(),
            num_prefixes: n10(),
            shuffle: true,
        }
    }
}

/// `kind = "jsonl"`: one `{"prompt": ...}` or `{"messages": [...]}` per line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonlSpec {
    /// The JSONL file.
    pub path: PathBuf,
    /// A fixed output length replacing every line's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_len: Option<u32>,
    /// Shuffle by the seed before taking entries.
    #[serde(default = "yes")]
    pub shuffle: bool,
}

/// `kind = "conversations"`: multi-turn sessions, each turn sent with the
/// model's real previous answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationsSpec {
    /// JSONL of `{"messages": [...]}` or ShareGPT records, or the ShareGPT file.
    pub path: PathBuf,
    /// A fixed output length per turn replacing the dataset answer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_len: Option<u32>,
    /// Shuffle by the seed before taking conversations.
    #[serde(default = "yes")]
    pub shuffle: bool,
    /// Pause between an answer and the next turn.
    #[serde(default)]
    pub think_time: Span,
    /// Keep at most this many turns of each conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

fn n3() -> u32 {
    3
}

/// `kind = "multi_turn"`: synthetic multi-turn sessions, no file (vLLM's
/// `vllm-bench --multi-turn` with `--dataset-name random`). Each session's
/// turns, lengths and think times are drawn from the seed and the session's
/// index alone; each turn is sent with the whole history and the model's
/// real answers, so the server's prefix cache sees a growing shared prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiTurnSpec {
    /// Turns per session, when `min_turns`/`max_turns` do not draw them.
    #[serde(default = "n3")]
    pub turns: u32,
    /// Fewest turns of a session: turns are drawn uniformly in
    /// `[min_turns, max_turns]` (either defaults to `turns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_turns: Option<u32>,
    /// Most turns of a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Tokens of the first turn's user message, or their distribution.
    #[serde(default = "len1024")]
    pub input_len: Length,
    /// Tokens each later turn adds as its user message (default: `input_len`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_turn_input_len: Option<Length>,
    /// Output tokens asked of each turn, or their distribution.
    #[serde(default = "len128")]
    pub output_len: Length,
    /// Pause between an answer and the next turn.
    #[serde(default)]
    pub think_time: Span,
    /// With it, each pause is drawn uniformly in `[think_time, think_time_max]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time_max: Option<Span>,
}

impl Default for MultiTurnSpec {
    fn default() -> Self {
        Self {
            turns: n3(),
            min_turns: None,
            max_turns: None,
            input_len: len1024(),
            per_turn_input_len: None,
            output_len: len128(),
            think_time: Span::default(),
            think_time_max: None,
        }
    }
}

impl MultiTurnSpec {
    /// The inclusive range a session's turn count is drawn from.
    pub fn turn_range(&self) -> (u32, u32) {
        (
            self.min_turns.unwrap_or(self.turns),
            self.max_turns.unwrap_or(self.turns),
        )
    }
}

fn len2() -> Length {
    Length::Fixed(2)
}
fn len64() -> Length {
    Length::Fixed(64)
}
fn half() -> f64 {
    0.5
}
fn n1() -> u32 {
    1
}
fn ms100() -> Span {
    Span::millis(100)
}

/// `kind = "agentic"`: synthetic agent sessions, no file. A session is a
/// tree: the main agent's turns (as `multi_turn`'s), each of which may fan
/// out into parallel sub-agents (each its own branch of turns, started from
/// the main agent's history so far) and may be followed by a tool wait (a
/// delay, no request, then the tool's result joins the history). Drawn
/// from the seed and the session's index alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgenticSpec {
    /// Main-agent turns per session, when `min_turns`/`max_turns` do not draw them.
    #[serde(default = "n3")]
    pub turns: u32,
    /// Fewest main-agent turns (drawn uniformly in `[min_turns, max_turns]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_turns: Option<u32>,
    /// Most main-agent turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Tokens of the session's first message.
    #[serde(default = "len1024")]
    pub input_len: Length,
    /// Tokens each later turn (and each sub-agent's task) adds: the
    /// context's growth per turn (default: `input_len`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_turn_input_len: Option<Length>,
    /// Output tokens asked of each turn.
    #[serde(default = "len128")]
    pub output_len: Length,
    /// Pause between an answer and the next turn of its branch.
    #[serde(default)]
    pub think_time: Span,
    /// With it, each pause is drawn uniformly in `[think_time, think_time_max]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time_max: Option<Span>,
    /// Chance that a turn fans out into sub-agents, in [0, 1].
    #[serde(default = "half")]
    pub fan_out_chance: f64,
    /// Sub-agents a fanning turn starts, or their distribution.
    #[serde(default = "len2")]
    pub fan_out: Length,
    /// Levels of sub-agents: 1, sub-agents do not fan out themselves; 0, none.
    #[serde(default = "n1")]
    pub depth: u32,
    /// Turns of each sub-agent, or their distribution.
    #[serde(default = "len2")]
    pub sub_agent_turns: Length,
    /// Chance that a turn is followed by a tool wait, in [0, 1].
    #[serde(default = "half")]
    pub tool_chance: f64,
    /// How long a tool runs.
    #[serde(default = "ms100")]
    pub tool_delay: Span,
    /// With it, each tool's delay is drawn uniformly in `[tool_delay, tool_delay_max]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_delay_max: Option<Span>,
    /// Tokens of a tool's result, which joins the history.
    #[serde(default = "len64")]
    pub tool_output_len: Length,
}

impl Default for AgenticSpec {
    fn default() -> Self {
        Self {
            turns: n3(),
            min_turns: None,
            max_turns: None,
            input_len: len1024(),
            per_turn_input_len: None,
            output_len: len128(),
            think_time: Span::default(),
            think_time_max: None,
            fan_out_chance: half(),
            fan_out: len2(),
            depth: n1(),
            sub_agent_turns: len2(),
            tool_chance: half(),
            tool_delay: ms100(),
            tool_delay_max: None,
            tool_output_len: len64(),
        }
    }
}

impl AgenticSpec {
    /// The inclusive range a session's main-agent turn count is drawn from.
    pub fn turn_range(&self) -> (u32, u32) {
        (
            self.min_turns.unwrap_or(self.turns),
            self.max_turns.unwrap_or(self.turns),
        )
    }
}

/// The formats an `agent_trace` file may be in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentTraceFormat {
    /// cicada's own JSONL, one node per line (docs/guide/workloads.md).
    #[default]
    Cicada,
    /// A Weka KV-cache-tester trace (one JSON object per file, or a
    /// directory of them), as AIPerf replays it.
    Weka,
}

/// `kind = "agent_trace"`: agentic sessions read from a trace file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentTraceSpec {
    /// The trace: a JSONL file (`cicada`), or a file or directory (`weka`).
    pub path: PathBuf,
    /// Which format the trace is in.
    #[serde(default)]
    pub format: AgentTraceFormat,
    /// Pause before a turn whose node gives no `delay_ms`.
    #[serde(default)]
    pub think_time: Span,
}

/// `kind = "trace"`: a Mooncake JSONL trace replayed at its timestamps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The trace file.
    pub path: PathBuf,
    /// Replay speed factor; 10 replays ten times faster.
    #[serde(default = "one")]
    pub speed: f64,
    /// Tokens per hash id block.
    #[serde(default = "n512")]
    pub block_size: u32,
}

/// `[dataset]`: what prompts to send.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Dataset {
    Random(RandomSpec),
    Sharegpt(SharegptSpec),
    Sonnet(SonnetSpec),
    Prefix(PrefixSpec),
    Jsonl(JsonlSpec),
    Conversations(ConversationsSpec),
    MultiTurn(MultiTurnSpec),
    Agentic(Box<AgenticSpec>),
    AgentTrace(AgentTraceSpec),
    Trace(TraceSpec),
    #[serde(rename = "random-mm")]
    RandomMm(RandomMmSpec),
    Audio(AudioSpec),
}

impl Default for Dataset {
    fn default() -> Self {
        Dataset::Random(RandomSpec::default())
    }
}

impl Dataset {
    /// Which kind of workload this is.
    pub fn kind(&self) -> DatasetKind {
        match self {
            Dataset::Random(_) => DatasetKind::Random,
            Dataset::Sharegpt(_) => DatasetKind::Sharegpt,
            Dataset::Sonnet(_) => DatasetKind::Sonnet,
            Dataset::Prefix(_) => DatasetKind::Prefix,
            Dataset::Jsonl(_) => DatasetKind::Jsonl,
            Dataset::Conversations(_) => DatasetKind::Conversations,
            Dataset::MultiTurn(_) => DatasetKind::MultiTurn,
            Dataset::Agentic(_) => DatasetKind::Agentic,
            Dataset::AgentTrace(_) => DatasetKind::AgentTrace,
            Dataset::Trace(_) => DatasetKind::Trace,
            Dataset::RandomMm(_) => DatasetKind::RandomMm,
            Dataset::Audio(_) => DatasetKind::Audio,
        }
    }

    /// The dataset file, for the kinds that read one.
    pub fn path(&self) -> Option<&Path> {
        self.path_ref().map(|p| &**p)
    }

    fn path_ref(&self) -> Option<&PathBuf> {
        match self {
            Dataset::Random(_)
            | Dataset::Prefix(_)
            | Dataset::MultiTurn(_)
            | Dataset::Agentic(_) => None,
            Dataset::AgentTrace(d) => Some(&d.path),
            Dataset::RandomMm(d) => d.image_dir.as_ref(),
            Dataset::Audio(d) => d.path.as_ref(),
            Dataset::Sharegpt(d) => Some(&d.path),
            Dataset::Sonnet(d) => Some(&d.path),
            Dataset::Jsonl(d) => Some(&d.path),
            Dataset::Conversations(d) => Some(&d.path),
            Dataset::Trace(d) => Some(&d.path),
        }
    }

    /// Whose draws pick the sample (cicada's for the kinds without a choice).
    pub fn sampler(&self) -> Sampler {
        match self {
            Dataset::Random(d) => d.sampler,
            Dataset::Sharegpt(d) => d.sampler,
            _ => Sampler::Cicada,
        }
    }

    /// The dataset file, to rebase a relative path.
    pub(crate) fn path_mut(&mut self) -> Option<&mut PathBuf> {
        match self {
            Dataset::Random(_)
            | Dataset::Prefix(_)
            | Dataset::MultiTurn(_)
            | Dataset::Agentic(_) => None,
            Dataset::AgentTrace(d) => Some(&mut d.path),
            Dataset::RandomMm(d) => d.image_dir.as_mut(),
            Dataset::Audio(d) => d.path.as_mut(),
            Dataset::Sharegpt(d) => Some(&mut d.path),
            Dataset::Sonnet(d) => Some(&mut d.path),
            Dataset::Jsonl(d) => Some(&mut d.path),
            Dataset::Conversations(d) => Some(&mut d.path),
            Dataset::Trace(d) => Some(&mut d.path),
        }
    }

    /// Token counts that must be at least 1, by key, in the order messages list them.
    pub(crate) fn counts(&self) -> Vec<(&'static str, Option<u32>)> {
        match self {
            // their lengths are checked as lengths (`Dataset::lengths`)
            Dataset::Random(_) | Dataset::RandomMm(_) => Vec::new(),
            Dataset::Audio(d) => vec![
                ("output_len", d.output_len),
                ("sample_rate", Some(d.sample_rate)),
            ],
            Dataset::Sonnet(d) => vec![
                ("input_len", Some(d.input_len)),
                ("output_len", Some(d.output_len)),
            ],
            Dataset::Prefix(d) => vec![("num_prefixes", Some(d.num_prefixes))],
            Dataset::Sharegpt(SharegptSpec { output_len, .. })
            | Dataset::Jsonl(JsonlSpec { output_len, .. }) => vec![("output_len", *output_len)],
            Dataset::Conversations(d) => {
                vec![("output_len", d.output_len), ("max_turns", d.max_turns)]
            }
            Dataset::Trace(d) => vec![("block_size", Some(d.block_size))],
            Dataset::MultiTurn(d) => vec![
                ("turns", Some(d.turns)),
                ("min_turns", d.min_turns),
                ("max_turns", d.max_turns),
            ],
            Dataset::Agentic(d) => vec![
                ("turns", Some(d.turns)),
                ("min_turns", d.min_turns),
                ("max_turns", d.max_turns),
            ],
            Dataset::AgentTrace(_) => Vec::new(),
        }
    }

    /// The lengths a synthetic kind draws, by key: `input_len` and
    /// `output_len` (plain numbers or distributions).
    pub fn lengths(&self) -> Vec<(&'static str, &Length)> {
        match self {
            Dataset::Random(d) => vec![("input_len", &d.input_len), ("output_len", &d.output_len)],
            Dataset::RandomMm(d) => {
                vec![("input_len", &d.input_len), ("output_len", &d.output_len)]
            }
            Dataset::Prefix(d) => vec![("output_len", &d.output_len)],
            Dataset::MultiTurn(d) => {
                let mut v = vec![("input_len", &d.input_len)];
                if let Some(p) = &d.per_turn_input_len {
                    v.push(("per_turn_input_len", p));
                }
                v.push(("output_len", &d.output_len));
                v
            }
            Dataset::Agentic(d) => {
                let mut v = vec![("input_len", &d.input_len)];
                if let Some(p) = &d.per_turn_input_len {
                    v.push(("per_turn_input_len", p));
                }
                v.extend([
                    ("output_len", &d.output_len),
                    ("fan_out", &d.fan_out),
                    ("sub_agent_turns", &d.sub_agent_turns),
                    ("tool_output_len", &d.tool_output_len),
                ]);
                v
            }
            _ => Vec::new(),
        }
    }
}

/// What is wrong with key `key` given to `kind`, when it does not take it.
pub(crate) fn misplaced_key(kind: DatasetKind, key: &str) -> Option<String> {
    if key == "kind" || kind.keys().contains(&key) {
        return None;
    }
    let takers: Vec<&str> = DatasetKind::ALL
        .into_iter()
        .filter(|k| k.keys().contains(&key))
        .map(DatasetKind::name)
        .collect();
    Some(if takers.is_empty() {
        let expected: Vec<String> = std::iter::once("kind")
            .chain(kind.keys().iter().copied())
            .map(|k| format!("`{k}`"))
            .collect();
        format!("unknown key; expected one of {}", expected.join(", "))
    } else {
        format!(
            "does not apply to kind \"{}\" (it applies to {})",
            kind.name(),
            takers.join(", ")
        )
    })
}

/// Keys of a `[dataset]` table that its kind does not take, as (dotted key,
/// message), all at once. An unreadable `kind` is left to the deserializer.
pub(crate) fn key_problems(scenario: &toml::Table) -> Vec<(String, String)> {
    let Some(toml::Value::Table(t)) = scenario.get("dataset") else {
        return Vec::new();
    };
    let kind = match t.get("kind") {
        None => DatasetKind::Random,
        Some(v) => match v.as_str().and_then(DatasetKind::from_name) {
            Some(k) => k,
            None => return Vec::new(),
        },
    };
    t.keys()
        .filter_map(|key| misplaced_key(kind, key).map(|m| (format!("dataset.{key}"), m)))
        .collect()
}

/// A problem inside `[dataset]`, carrying its key for `describe`: `at `key`: message`.
fn at(key: &str, message: impl fmt::Display) -> String {
    format!("at `{key}`: {message}")
}

impl<'de> Deserialize<'de> for Dataset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut table = toml::Table::deserialize(d)?;
        let kind = match table.remove("kind") {
            None => DatasetKind::Random,
            Some(v) => DatasetKind::deserialize(v)
                .map_err(|e| de::Error::custom(at("kind", e.message())))?,
        };
        if let Some(m) = table
            .keys()
            .find_map(|k| misplaced_key(kind, k).map(|m| at(k, m)))
        {
            return Err(de::Error::custom(m));
        }
        fn spec<T: serde::de::DeserializeOwned, E: de::Error>(
            kind: DatasetKind,
            table: toml::Table,
        ) -> Result<T, E> {
            serde_path_to_error::deserialize(table).map_err(|e| {
                let message = e.inner().message().to_string();
                let path = e.path().to_string();
                if let Some(field) = message
                    .strip_prefix("missing field `")
                    .and_then(|r| r.split('`').next())
                {
                    E::custom(at(field, format!("required for kind \"{}\"", kind.name())))
                } else if path == "." {
                    E::custom(message)
                } else {
                    E::custom(at(&path, message))
                }
            })
        }
        Ok(match kind {
            DatasetKind::Random => Dataset::Random(spec(kind, table)?),
            DatasetKind::Sharegpt => Dataset::Sharegpt(spec(kind, table)?),
            DatasetKind::Sonnet => Dataset::Sonnet(spec(kind, table)?),
            DatasetKind::Prefix => Dataset::Prefix(spec(kind, table)?),
            DatasetKind::Jsonl => Dataset::Jsonl(spec(kind, table)?),
            DatasetKind::Conversations => Dataset::Conversations(spec(kind, table)?),
            DatasetKind::MultiTurn => Dataset::MultiTurn(spec(kind, table)?),
            DatasetKind::Agentic => Dataset::Agentic(spec(kind, table)?),
            DatasetKind::AgentTrace => Dataset::AgentTrace(spec(kind, table)?),
            DatasetKind::Trace => Dataset::Trace(spec(kind, table)?),
            DatasetKind::RandomMm => Dataset::RandomMm(spec(kind, table)?),
            DatasetKind::Audio => Dataset::Audio(spec(kind, table)?),
        })
    }
}

/// The field names a derived `Deserialize` struct accepts, read off what it
/// asks a deserializer for (so the types are the only list of keys).
fn field_names<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("fields read"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Dataset, String> {
        toml::from_str::<toml::Table>(text)
            .map_err(|e| e.to_string())
            .and_then(|t| Dataset::deserialize(toml::Value::Table(t)).map_err(|e| e.to_string()))
    }

    #[test]
    fn keys_are_read_off_the_kinds_types() {
        assert_eq!(
            DatasetKind::Random.keys(),
            [
                "input_len",
                "output_len",
                "range_ratio",
                "prefix_len",
                "sampler",
                "prompt_token_ids"
            ]
        );
        assert_eq!(DatasetKind::Trace.keys(), ["path", "speed", "block_size"]);
        for k in DatasetKind::ALL {
            assert!(!k.keys().is_empty(), "{k:?}");
            assert_eq!(DatasetKind::from_name(k.name()), Some(k));
        }
    }

    #[test]
    fn kinds_take_their_keys_and_defaults() {
        assert_eq!(parse("").unwrap(), Dataset::default());
        let d = parse("kind = \"sonnet\"\npath = \"s.txt\"\n").unwrap();
        let Dataset::Sonnet(s) = &d else {
            panic!("{d:?}")
        };
        assert_eq!((s.input_len, s.output_len, s.prefix_len), (550, 150, 200));
        let d = parse("kind = \"sharegpt\"\npath = \"x.json\"\n").unwrap();
        assert_eq!(d.path(), Some(Path::new("x.json")));
        let Dataset::Sharegpt(s) = d else { panic!() };
        assert_eq!(s.output_len, None, "sharegpt takes lengths from the data");
        assert!(s.shuffle);
    }

    #[test]
    fn misplaced_missing_and_unknown_keys_are_named() {
        let e = parse("speed = 2.0\n").unwrap_err();
        assert!(
            e.contains("at `speed`: does not apply to kind \"random\" (it applies to trace)"),
            "{e}"
        );
        let e = parse("kind = \"trace\"\n").unwrap_err();
        assert!(e.contains("at `path`: required for kind \"trace\""), "{e}");
        let e = parse("kind = \"trace\"\npath = \"t\"\nbogus = 1\n").unwrap_err();
        assert!(
            e.contains(
                "at `bogus`: unknown key; expected one of `kind`, `path`, `speed`, `block_size`"
            ),
            "{e}"
        );
        let e = parse("input_len = \"long\"\n").unwrap_err();
        assert!(e.contains("at `input_len`: invalid type"), "{e}");
        let e = parse("kind = \"telepathy\"\n").unwrap_err();
        assert!(e.contains("at `kind`: unknown variant `telepathy`"), "{e}");
        let t: toml::Table =
            toml::from_str("[dataset]\nkind = \"random\"\nspeed = 2.0\nthink_time = \"1s\"\n")
                .unwrap();
        let keys: Vec<String> = key_problems(&t).into_iter().map(|p| p.0).collect();
        assert_eq!(keys, ["dataset.speed", "dataset.think_time"]);
    }

    #[test]
    fn written_back_a_dataset_reads_the_same() {
        for text in [
            "kind = \"conversations\"\npath = \"c\"\nmax_turns = 2\n",
            "kind = \"prefix\"\nshuffle = false\n",
            "range_ratio = 0.5\n",
        ] {
            let d = parse(text).unwrap();
            let written = toml::to_string(&d).unwrap();
            assert!(written.starts_with("kind = "), "{written}");
            assert_eq!(parse(&written).unwrap(), d, "{written}");
        }
    }
}
