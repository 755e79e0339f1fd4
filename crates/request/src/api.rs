//! Which API a request speaks, to which server family, with which sampling.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which API goes on the wire: the request body and stream format spoken to
/// the target (what `target.backend` resolves to, with the server family).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireApi {
    /// OpenAI text completions.
    Completions,
    /// OpenAI chat completions.
    Chat,
    /// HuggingFace TGI `/generate_stream` and `/generate`.
    Tgi,
    /// llama.cpp's native `/completion`.
    LlamaCpp,
    /// NVIDIA Triton's generate extension (`/v2/models/{model}/generate_stream`).
    Triton,
    /// OpenAI Responses (`/v1/responses`): typed `response.*` events, usage on
    /// `response.completed`.
    Responses,
    /// Anthropic Messages (`/v1/messages`): `message_start` ... `message_stop`.
    Messages,
    /// OpenAI audio transcriptions (`/v1/audio/transcriptions`, multipart).
    Transcription,
    /// OpenAI embeddings (`/v1/embeddings`): a batch of texts, one vector each.
    Embeddings,
    /// Rerank (`/v1/rerank`, vLLM's and llama-server's): a query and
    /// documents, a relevance score each.
    Rerank,
    /// HuggingFace TEI's `/embed`: `inputs`, an array of vectors back, no usage.
    TeiEmbed,
    /// HuggingFace TEI's `/rerank`: a query and `texts`, `[{index, score}]`
    /// back, no usage.
    TeiRerank,
    /// vLLM's pooling API (`/pooling`): a batch of `input` texts, one pooled
    /// output each (`data[].data`), usage like embeddings.
    Pooling,
    /// vLLM's score API (`/score`): `text_1` (the query) and `text_2` (the
    /// documents), a score per document (`data[].score`), usage.
    Score,
}

/// Server family, for the extras it accepts beyond its API and where it
/// exposes health and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerFamily {
    /// Plain OpenAI: no extra fields.
    Openai,
    /// vLLM: `ignore_eos`, `min_tokens`, continuous usage stats.
    Vllm,
    /// SGLang: `ignore_eos`, `min_tokens`, continuous usage stats.
    Sglang,
    /// The built-in mock (vLLM-compatible extras).
    Mock,
    /// HuggingFace text-generation-inference.
    Tgi,
    /// llama.cpp's `llama-server`: `ignore_eos`, `timings`.
    LlamaCpp,
    /// NVIDIA Triton (TensorRT-LLM or vLLM backend).
    Triton,
}

/// Sampling fields sent with every request, with defaults applied.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResolvedSampling {
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
