//! Byte-level writers for the OpenAI stream formats (no serde on the hot path).

use std::fmt::Write as _;

/// Which OpenAI API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    Completions,
    Chat,
}

/// Words the mock generates; each is one token in common BPE vocabularies.
pub const WORDS: [&str; 32] = [
    " the", " of", " and", " to", " in", " is", " it", " that", " was", " for", " on", " are",
    " with", " as", " at", " be", " this", " have", " from", " or", " one", " had", " by", " word",
    " but", " not", " what", " all", " were", " we", " when", " your",
];

fn word(seq: u64, j: u32) -> &'static str {
    let idx = (seq.wrapping_mul(7).wrapping_add(u64::from(j))) % WORDS.len() as u64;
    WORDS[idx as usize]
}

/// Text of `n` tokens starting at token number `first` of request `seq`.
pub(crate) fn token_text(out: &mut String, seq: u64, first: u32, n: u32) {
    for j in first..first + n {
        out.push_str(word(seq, j));
    }
}

/// Fingerprint of the whole answer of request `seq` (`n` tokens), without building it.
pub(crate) fn text_fingerprint(seq: u64, n: u32) -> u64 {
    (0..n).fold(crate::request::FNV_BASIS, |h, j| {
        crate::request::fnv1a(h, word(seq, j).as_bytes())
    })
}

/// Fields shared by every chunk of one response.
pub(crate) struct ChunkHeader<'a> {
    pub api: Api,
    pub seq: u64,
    pub created: u64,
    /// Model id already JSON-escaped and quoted.
    pub model_json: &'a str,
}

/// Token counts for a usage object.
#[derive(Clone, Copy)]
pub(crate) struct Usage {
    pub prompt: u32,
    pub completion: u32,
    /// Cached prompt tokens, reported as `prompt_tokens_details.cached_tokens`.
    pub cached: Option<u32>,
}

impl ChunkHeader<'_> {
    fn open(&self, out: &mut String) {
        let (prefix, object) = match self.api {
            Api::Chat => ("chatcmpl", "chat.completion.chunk"),
            Api::Completions => ("cmpl", "text_completion"),
        };
        let _ = write!(
            out,
            "data: {{\"id\":\"{prefix}-{}\",\"object\":\"{object}\",\"created\":{},\"model\":{}",
            self.seq, self.created, self.model_json
        );
    }

    /// One chunk with `text` (already JSON-safe: the mock's words need no escaping).
    pub fn content(
        &self,
        out: &mut String,
        text: &str,
        finish: Option<&str>,
        usage: Option<Usage>,
    ) {
        self.open(out);
        let finish = finish.map_or_else(|| "null".to_string(), |f| format!("\"{f}\""));
        match self.api {
            Api::Chat => {
                let _ = write!(
                    out,
                    ",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"logprobs\":null,\"finish_reason\":{finish}}}]"
                );
            }
            Api::Completions => {
                let _ = write!(
                    out,
                    ",\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"logprobs\":null,\"finish_reason\":{finish}}}]"
                );
            }
        }
        if let Some(u) = usage {
            write_usage(out, u);
        }
        out.push_str("}\n\n");
    }

    /// The role-only first chat chunk (not content).
    pub fn role(&self, out: &mut String) {
        self.open(out);
        out.push_str(",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    }

    /// The usage-only final chunk (`choices: []`).
    pub fn usage_only(&self, out: &mut String, usage: Usage) {
        self.open(out);
        out.push_str(",\"choices\":[]");
        write_usage(out, usage);
        out.push_str("}\n\n");
    }

    /// A complete non-streaming response body.
    pub fn full_response(&self, out: &mut String, text: &str, finish: &str, usage: Usage) {
        let (prefix, object) = match self.api {
            Api::Chat => ("chatcmpl", "chat.completion"),
            Api::Completions => ("cmpl", "text_completion"),
        };
        let _ = write!(
            out,
            "{{\"id\":\"{prefix}-{}\",\"object\":\"{object}\",\"created\":{},\"model\":{}",
            self.seq, self.created, self.model_json
        );
        match self.api {
            Api::Chat => {
                let _ = write!(
                    out,
                    ",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{text}\"}},\"finish_reason\":\"{finish}\"}}]"
                );
            }
            Api::Completions => {
                let _ = write!(
                    out,
                    ",\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"finish_reason\":\"{finish}\"}}]"
                );
            }
        }
        write_usage(out, usage);
        out.push('}');
    }
}

fn write_usage(out: &mut String, u: Usage) {
    let _ = write!(
        out,
        ",\"usage\":{{\"prompt_tokens\":{},\"completion_tokens\":{},\"total_tokens\":{}",
        u.prompt,
        u.completion,
        u.prompt + u.completion
    );
    if let Some(c) = u.cached {
        let _ = write!(out, ",\"prompt_tokens_details\":{{\"cached_tokens\":{c}}}");
    }
    out.push('}');
}

/// The end-of-stream marker.
pub(crate) const DONE: &str = "data: [DONE]\n\n";

/// An in-band error event inside a 200 stream, shaped like vLLM's.
pub(crate) const ERROR_EVENT: &str = "data: {\"error\":{\"message\":\"mock injected error\",\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}\n\n";

/// An event whose payload is not valid JSON.
pub(crate) const MALFORMED_EVENT: &str =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn header(api: Api) -> (String, Api) {
        (serde_json::to_string("m\"x").unwrap(), api)
    }

    #[test]
    fn chunks_are_valid_json_events() {
        for api in [Api::Chat, Api::Completions] {
            let (model, api) = header(api);
            let h = ChunkHeader {
                api,
                seq: 3,
                created: 1,
                model_json: &model,
            };
            let mut out = String::new();
            let mut text = String::new();
            token_text(&mut text, 3, 0, 4);
            h.content(
                &mut out,
                &text,
                Some("length"),
                Some(Usage {
                    prompt: 2,
                    completion: 4,
                    cached: None,
                }),
            );
            h.role(&mut out);
            h.usage_only(
                &mut out,
                Usage {
                    prompt: 2,
                    completion: 4,
                    cached: Some(1),
                },
            );
            for event in out.split("\n\n").filter(|e| !e.is_empty()) {
                let json = event.strip_prefix("data: ").unwrap();
                let v: serde_json::Value = serde_json::from_str(json).unwrap();
                assert_eq!(v["model"], "m\"x");
            }
            let mut full = String::new();
            h.full_response(
                &mut full,
                &text,
                "length",
                Usage {
                    prompt: 2,
                    completion: 4,
                    cached: Some(1),
                },
            );
            let v: serde_json::Value = serde_json::from_str(&full).unwrap();
            assert_eq!(v["usage"]["completion_tokens"], 4);
            assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
            let mut t = String::new();
            token_text(&mut t, 3, 0, 9);
            assert_eq!(text_fingerprint(3, 9), crate::request::fingerprint(&t));
        }
        assert_eq!(text_words(4), 4);
    }

    fn text_words(n: u32) -> usize {
        let mut t = String::new();
        token_text(&mut t, 99, 5, n);
        t.split_whitespace().count()
    }
}
