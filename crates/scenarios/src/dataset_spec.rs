//! The scenario's `[dataset]` section: one flat table whose keys apply to the
//! kinds noted on each (validation names any key given to a kind it does not
//! apply to), with per-kind defaults filled in after validation.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::units::Span;

/// Kinds of workload.
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
    /// A Mooncake-style trace replayed at its timestamps.
    Trace,
}

impl DatasetKind {
    /// Every kind, for messages.
    pub const ALL: [DatasetKind; 7] = [
        DatasetKind::Random,
        DatasetKind::Sharegpt,
        DatasetKind::Sonnet,
        DatasetKind::Prefix,
        DatasetKind::Jsonl,
        DatasetKind::Conversations,
        DatasetKind::Trace,
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
            DatasetKind::Trace => "trace",
        }
    }

    /// Kinds that cannot count tokens without a tokenizer.
    pub fn needs_tokenizer(self) -> bool {
        matches!(
            self,
            DatasetKind::Sharegpt | DatasetKind::Sonnet | DatasetKind::Prefix
        )
    }

    /// Kinds that read a file.
    pub fn needs_path(self) -> bool {
        matches!(
            self,
            DatasetKind::Sharegpt
                | DatasetKind::Sonnet
                | DatasetKind::Jsonl
                | DatasetKind::Conversations
                | DatasetKind::Trace
        )
    }

    /// Kinds whose output lengths are a specification rather than a natural
    /// answer, so `ignore_eos` is on by default.
    pub fn synthetic(self) -> bool {
        matches!(
            self,
            DatasetKind::Random | DatasetKind::Prefix | DatasetKind::Trace
        )
    }
}

/// What prompts to send. Keys apply to the kinds noted on each; every key is
/// optional and takes its kind's default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Dataset {
    /// Workload kind.
    pub kind: DatasetKind,
    /// sharegpt, sonnet, jsonl, conversations, trace: the dataset file
    /// (relative paths are relative to the scenario file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// random (1024), sonnet (550): prompt length in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_len: Option<u32>,
    /// Output tokens asked of the server. random (128), sonnet (150), prefix (128);
    /// sharegpt, jsonl, conversations: a fixed length replacing the dataset's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_len: Option<u32>,
    /// random (0): lengths are drawn uniformly within ±ratio of the asked length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_ratio: Option<f64>,
    /// random (0), sonnet (200), prefix (256): tokens of the shared prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_len: Option<u32>,
    /// prefix (256): tokens of each request's own suffix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suffix_len: Option<u32>,
    /// prefix (10): distinct shared prefixes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_prefixes: Option<u32>,
    /// sharegpt, prefix, jsonl, conversations (true): shuffle by the seed before taking entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shuffle: Option<bool>,
    /// trace (1.0): replay speed factor; 10 replays ten times faster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// trace (512): tokens per hash id block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    /// conversations (0s): pause between an answer and the next turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_time: Option<Span>,
    /// conversations: keep at most this many turns of each conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

use DatasetKind as K;

/// Which kinds each optional key applies to.
pub(crate) const KEY_KINDS: [(&str, &[DatasetKind]); 12] = [
    (
        "path",
        &[K::Sharegpt, K::Sonnet, K::Jsonl, K::Conversations, K::Trace],
    ),
    ("input_len", &[K::Random, K::Sonnet]),
    (
        "output_len",
        &[
            K::Random,
            K::Sharegpt,
            K::Sonnet,
            K::Prefix,
            K::Jsonl,
            K::Conversations,
        ],
    ),
    ("range_ratio", &[K::Random]),
    ("prefix_len", &[K::Random, K::Sonnet, K::Prefix]),
    ("suffix_len", &[K::Prefix]),
    ("num_prefixes", &[K::Prefix]),
    (
        "shuffle",
        &[K::Sharegpt, K::Prefix, K::Jsonl, K::Conversations],
    ),
    ("speed", &[K::Trace]),
    ("block_size", &[K::Trace]),
    ("think_time", &[K::Conversations]),
    ("max_turns", &[K::Conversations]),
];

impl Dataset {
    /// Names of the optional keys that are set.
    pub(crate) fn given_keys(&self) -> Vec<&'static str> {
        let set = [
            ("path", self.path.is_some()),
            ("input_len", self.input_len.is_some()),
            ("output_len", self.output_len.is_some()),
            ("range_ratio", self.range_ratio.is_some()),
            ("prefix_len", self.prefix_len.is_some()),
            ("suffix_len", self.suffix_len.is_some()),
            ("num_prefixes", self.num_prefixes.is_some()),
            ("shuffle", self.shuffle.is_some()),
            ("speed", self.speed.is_some()),
            ("block_size", self.block_size.is_some()),
            ("think_time", self.think_time.is_some()),
            ("max_turns", self.max_turns.is_some()),
        ];
        set.into_iter()
            .filter(|(_, s)| *s)
            .map(|(k, _)| k)
            .collect()
    }

    /// Prompt length (random 1024, sonnet 550).
    pub fn input_len(&self) -> u32 {
        self.input_len.unwrap_or(match self.kind {
            K::Sonnet => 550,
            _ => 1024,
        })
    }

    /// Output length for kinds with a default (random 128, sonnet 150, prefix 128);
    /// for the others only a fixed length the scenario gives.
    pub fn output_len(&self) -> Option<u32> {
        self.output_len.or(match self.kind {
            K::Random | K::Prefix => Some(128),
            K::Sonnet => Some(150),
            _ => None,
        })
    }

    /// Range ratio (0).
    pub fn range_ratio(&self) -> f64 {
        self.range_ratio.unwrap_or(0.0)
    }

    /// Shared prefix length (random 0, sonnet 200, prefix 256).
    pub fn prefix_len(&self) -> u32 {
        self.prefix_len.unwrap_or(match self.kind {
            K::Sonnet => 200,
            K::Prefix => 256,
            _ => 0,
        })
    }

    /// Per-request suffix length (256).
    pub fn suffix_len(&self) -> u32 {
        self.suffix_len.unwrap_or(256)
    }

    /// Number of shared prefixes (10).
    pub fn num_prefixes(&self) -> u32 {
        self.num_prefixes.unwrap_or(10)
    }

    /// Shuffle by seed (true).
    pub fn shuffle(&self) -> bool {
        self.shuffle.unwrap_or(true)
    }

    /// Trace replay speed (1).
    pub fn speed(&self) -> f64 {
        self.speed.unwrap_or(1.0)
    }

    /// Tokens per trace hash block (512, Mooncake's).
    pub fn block_size(&self) -> u32 {
        self.block_size.unwrap_or(512)
    }

    /// Pause between turns (0).
    pub fn think_time(&self) -> Span {
        self.think_time.unwrap_or(Span::millis(0))
    }

    /// Write every default that applies to the kind, so the resolved scenario
    /// in results shows the values used.
    pub(crate) fn fill_defaults(&mut self) {
        let applies = |key: &str| {
            KEY_KINDS
                .iter()
                .any(|(k, kinds)| *k == key && kinds.contains(&self.kind))
        };
        if applies("input_len") {
            self.input_len = Some(self.input_len());
        }
        if applies("output_len") {
            self.output_len = self.output_len();
        }
        if applies("range_ratio") {
            self.range_ratio = Some(self.range_ratio());
        }
        if applies("prefix_len") {
            self.prefix_len = Some(self.prefix_len());
        }
        if applies("suffix_len") {
            self.suffix_len = Some(self.suffix_len());
        }
        if applies("num_prefixes") {
            self.num_prefixes = Some(self.num_prefixes());
        }
        if applies("shuffle") {
            self.shuffle = Some(self.shuffle());
        }
        if applies("speed") {
            self.speed = Some(self.speed());
        }
        if applies("block_size") {
            self.block_size = Some(self.block_size());
        }
        if applies("think_time") {
            self.think_time = Some(self.think_time());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_kinds_and_defaults_fill_only_applicable_keys() {
        let all = Dataset {
            path: Some("x".into()),
            input_len: Some(1),
            output_len: Some(1),
            range_ratio: Some(0.0),
            prefix_len: Some(1),
            suffix_len: Some(1),
            num_prefixes: Some(1),
            shuffle: Some(true),
            speed: Some(1.0),
            block_size: Some(1),
            think_time: Some(Span::millis(1)),
            max_turns: Some(1),
            ..Dataset::default()
        };
        let given = all.given_keys();
        assert_eq!(given.len(), KEY_KINDS.len());
        for (k, _) in KEY_KINDS {
            assert!(given.contains(&k), "{k}");
        }
        let mut d = Dataset {
            kind: DatasetKind::Sonnet,
            ..Dataset::default()
        };
        d.fill_defaults();
        assert_eq!(d.input_len, Some(550));
        assert_eq!(d.output_len, Some(150));
        assert_eq!(d.prefix_len, Some(200));
        assert_eq!(d.speed, None);
        let mut d = Dataset {
            kind: DatasetKind::Sharegpt,
            ..Dataset::default()
        };
        d.fill_defaults();
        assert_eq!(d.output_len, None, "sharegpt takes lengths from the data");
        assert_eq!(d.shuffle, Some(true));
    }
}
