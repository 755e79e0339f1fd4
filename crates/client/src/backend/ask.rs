//! What a request asks of a serving API, in the client's own terms: which
//! API and server family, the sampling, and the prompt with its output
//! limit. Whoever reads a scenario maps its types onto these once, before
//! the first request (`cicada-bridge`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;

/// Which API goes on the wire: the request body and stream format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireApi {
    /// OpenAI text completions.
    Completions,
    /// OpenAI chat completions.
    Chat,
    /// HuggingFace TGI `/generate_stream` and `/generate`.
    Tgi,
    /// llama.cpp's native `/completion`.
    LlamaCpp,
    /// NVIDIA Triton's generate extension.
    Triton,
}

/// The server family, for the fields it accepts beyond its API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerFamily {
    /// Plain OpenAI: no extra fields.
    Openai,
    /// vLLM: `min_tokens`, continuous usage stats.
    Vllm,
    /// SGLang: `min_tokens`, continuous usage stats.
    Sglang,
    /// cicada's mock (vLLM-compatible extras).
    Mock,
    /// HuggingFace text-generation-inference.
    Tgi,
    /// llama.cpp's `llama-server`.
    LlamaCpp,
    /// NVIDIA Triton.
    Triton,
}

/// Sampling fields sent with every request (defaults already applied).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    /// Ask the server to ignore end-of-sequence (where the API has the field).
    pub ignore_eos: bool,
    /// Least output tokens (vLLM and SGLang only).
    pub min_tokens: Option<u32>,
    /// Fields merged into every body as they are (later keys win).
    pub extra_body: BTreeMap<String, serde_json::Value>,
}

/// A chat message as sent in a `messages` array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// The prompt of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Plain text (sent as `prompt`, or as one user message to chat APIs).
    Text(String),
    /// A conversation (sent as `messages`, or joined for text APIs).
    Chat(Vec<Message>),
}

impl Prompt {
    /// The text a text-only API is sent: a conversation's messages, one a line.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Prompt::Text(t) => Cow::Borrowed(t),
            Prompt::Chat(msgs) => {
                let mut out = String::new();
                for m in msgs {
                    out.push_str(&m.content);
                    out.push('\n');
                }
                Cow::Owned(out)
            }
        }
    }

    /// Bytes of text it holds (what a body built from it at least weighs).
    pub fn text_bytes(&self) -> usize {
        match self {
            Prompt::Text(t) => t.len(),
            Prompt::Chat(msgs) => msgs.iter().map(|m| m.content.len()).sum(),
        }
    }
}

/// One request's question: the prompt, and the output tokens it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub prompt: Prompt,
    /// `max_tokens` (or the API's name for it), when the workload fixes it.
    pub output_tokens: Option<u32>,
}
