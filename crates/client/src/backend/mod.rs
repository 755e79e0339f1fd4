//! Serving APIs: how to build a request body and read the response for each.
//!
//! One file per API (`openai.rs` with its vLLM/SGLang/llama.cpp extras,
//! `tgi.rs`, `llamacpp.rs`, `triton.rs`); each turns a pool entry into a body
//! and one SSE data payload (or a whole non-streamed body) into an
//! [`EventInfo`]. Everything else (timing, classification) is shared.

mod ask;
mod embeddings;
mod llamacpp;
pub mod media;
mod messages;
mod openai;
mod rerank;
mod responses;
mod score;
mod shared;
mod spelled;
mod tei;
mod tgi;
mod transcription;
mod triton;

use std::borrow::Cow;

use cicada_request::{Prompt, ResolvedSampling, ServerFamily, WireApi};
use serde_json::{Map, Value};

pub use ask::Ask;
pub use messages::DEFAULT_MAX_TOKENS as MESSAGES_DEFAULT_MAX_TOKENS;
pub use shared::SharedBody;

/// Token counts a server reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// Output tokens spent reasoning (`completion_tokens_details.reasoning_tokens`),
    /// part of `completion_tokens`.
    pub reasoning_tokens: Option<u64>,
}

/// The server's own timing of one request, where its API reports it
/// (llama.cpp's `timings`), to put beside what the client measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerTiming {
    /// Prompt processing time (llama.cpp `timings.prompt_ms`), µs.
    pub prompt_us: Option<u64>,
    /// Time per generated token (llama.cpp `timings.predicted_per_token_ms`), µs.
    pub per_token_us: Option<u64>,
}

/// One piece of a tool call in an event: the first piece of a call names
/// its function, later ones add to its arguments.
#[derive(Debug, Default, PartialEq)]
pub struct ToolCallPiece<'a> {
    /// Which call of the answer it belongs to (the server's `index`).
    pub index: u32,
    /// The function called, when this piece names it.
    pub name: Option<Cow<'a, str>>,
    /// Argument text it adds.
    pub arguments: Option<Cow<'a, str>>,
}

/// What one streamed event (or a whole non-streamed body) said.
#[derive(Debug, Default, PartialEq)]
pub struct EventInfo<'a> {
    /// Generated answer text, if the event carried any.
    pub content: Option<Cow<'a, str>>,
    /// Generated reasoning ("thinking") text, if the event carried any: a
    /// reasoning model's tokens before (or beside) its answer.
    pub reasoning: Option<Cow<'a, str>>,
    /// Generated tool-call argument text, if the event carried any: a
    /// model's output as much as answer text is.
    pub tool_arguments: Option<Cow<'a, str>>,
    /// Usage, if the event carried it (cumulative when continuous).
    pub usage: Option<Usage>,
    /// The server gave a finish reason.
    pub finished: bool,
    /// The `[DONE]` marker.
    pub done: bool,
    /// An in-band error the server reported.
    pub error: Option<String>,
    /// The server's timing of the request, if the event carried it.
    pub server: Option<ServerTiming>,
    /// The tool-call pieces the event carried (their arguments, joined, are
    /// `tool_arguments`), for the check of a request's tool calls.
    pub tool_calls: Vec<ToolCallPiece<'a>>,
    /// Results a pooling answer carried (vectors, scores), when it is one.
    pub pooled: Option<u32>,
}

impl EventInfo<'_> {
    /// An answer that is the server's error and nothing else (`error` its
    /// text): every backend reads an in-band error the same way.
    fn failed(error: String) -> Self {
        EventInfo {
            error: Some(error),
            ..EventInfo::default()
        }
    }

    /// The event carried generated text of any kind (a content event), or
    /// is a pooling answer with results (its one event, of no tokens).
    pub fn generated(&self) -> bool {
        self.content.is_some()
            || self.reasoning.is_some()
            || self.tool_arguments.is_some()
            || self.pooled.is_some_and(|n| n > 0)
    }
}

/// How to talk to one serving API: the request body for a pool entry, and
/// what each streamed event (or whole body) of the answer says.
#[derive(Debug, Clone)]
pub struct ApiCodec {
    api: WireApi,
    family: ServerFamily,
    model: String,
    sampling: ResolvedSampling,
    stream: bool,
    /// llama-server's per-request adapter choice: `(id, scale)`.
    lora: Option<(u32, f64)>,
}

impl ApiCodec {
    /// A codec for the resolved wire API, server family, model and sampling.
    pub fn new(
        api: WireApi,
        family: ServerFamily,
        model: String,
        sampling: ResolvedSampling,
        stream: bool,
    ) -> Self {
        Self {
            api,
            family,
            model,
            sampling,
            stream,
            lora: None,
        }
    }

    /// The same codec with llama-server's `"lora": [{"id", "scale"}]` in every
    /// JSON body: the adapter a model entry selects (see `target.models`).
    pub fn with_lora(mut self, lora: Option<(u32, f64)>) -> Self {
        self.lora = lora;
        self
    }

    /// Whether responses stream.
    pub fn streams(&self) -> bool {
        self.stream
    }

    /// The API spoken.
    pub fn api(&self) -> WireApi {
        self.api
    }

    /// A stream that closes cleanly has completed: the API sends no end marker
    /// (Triton), so only a broken connection can reveal an early end.
    pub fn ends_on_close(&self) -> bool {
        self.api == WireApi::Triton
    }

    /// The body for one request: JSON, or a multipart form for uploads
    /// (see [`ApiCodec::content_type`]).
    pub fn body(&self, entry: &Ask) -> Vec<u8> {
        let mut body = match self.api {
            WireApi::Completions | WireApi::Chat => openai::body(self, entry),
            WireApi::Tgi => tgi::body(self, entry),
            WireApi::LlamaCpp => llamacpp::body(self, entry),
            WireApi::Triton => triton::body(self, entry),
            WireApi::Responses => responses::body(self, entry),
            WireApi::Messages => messages::body(self, entry),
            WireApi::Transcription => return transcription::body(self, entry),
            WireApi::Embeddings => embeddings::body(self, entry),
            WireApi::Rerank => rerank::body(self, entry),
            WireApi::TeiEmbed => tei::embed_body(self, entry),
            WireApi::TeiRerank => tei::rerank_body(self, entry),
            WireApi::Pooling => embeddings::body(self, entry),
            WireApi::Score => score::body(self, entry),
        };
        if let Some((id, scale)) = self.lora {
            body.insert(
                "lora".into(),
                serde_json::json!([{ "id": id, "scale": scale }]),
            );
        }
        serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
    }

    /// The `Content-Type` of [`ApiCodec::body`]'s bytes.
    pub fn content_type(&self) -> &'static str {
        match self.api {
            WireApi::Transcription => transcription::CONTENT_TYPE,
            _ => "application/json",
        }
    }

    /// Interpret one SSE data payload. `Err` means the payload is not the API's format.
    pub fn parse_event<'a>(&self, data: &'a [u8]) -> Result<EventInfo<'a>, DecodeError> {
        match self.api {
            WireApi::Completions | WireApi::Chat => openai::parse_event(self.api, data),
            // vLLM streams transcriptions as chat-completion chunks
            WireApi::Transcription => openai::parse_event(WireApi::Chat, data),
            // pooling answers are never streamed: a body is one whole answer
            // vLLM's pooling and score answers hold `data[]` and `usage` too
            WireApi::Embeddings | WireApi::Pooling | WireApi::Score => embeddings::parse_full(data),
            WireApi::Rerank => rerank::parse_full(data),
            WireApi::TeiEmbed | WireApi::TeiRerank => tei::parse_full(data),
            WireApi::Tgi => tgi::parse(data),
            WireApi::LlamaCpp => llamacpp::parse(data),
            WireApi::Triton => triton::parse(data),
            WireApi::Responses => responses::parse_event(data),
            WireApi::Messages => messages::parse_event(data),
        }
    }

    /// Interpret a complete non-streamed response body.
    pub fn parse_full<'a>(&self, body: &'a [u8]) -> Result<EventInfo<'a>, DecodeError> {
        let mut info = match self.api {
            WireApi::Tgi => tgi::parse_full(body)?,
            WireApi::Responses => responses::parse_full(body)?,
            WireApi::Messages => messages::parse_full(body)?,
            WireApi::Transcription => transcription::parse_full(body)?,
            WireApi::Embeddings | WireApi::Pooling | WireApi::Score => {
                embeddings::parse_full(body)?
            }
            WireApi::Rerank => rerank::parse_full(body)?,
            WireApi::TeiEmbed | WireApi::TeiRerank => tei::parse_full(body)?,
            // the others answer with one object shaped like their last event
            _ => self.parse_event(body)?,
        };
        if info.error.is_none() {
            info.done = true;
        }
        Ok(info)
    }
}

/// Bytes of a bad payload (and of the parser's message about it) quoted in its error.
const SHOWN_BYTES: usize = 200;

/// At most `max` bytes of `s`, cut at a character boundary, marked when cut.
fn clip(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}

/// A payload that is not in the API's format (the request counts as
/// `bad_payload`, with this as its reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

impl From<String> for DecodeError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for DecodeError {
    fn from(message: &str) -> Self {
        Self(message.to_string())
    }
}

/// Parse a payload as `T`, or say what was wrong with it.
fn decode<'a, T: serde::Deserialize<'a>>(data: &'a [u8]) -> Result<T, DecodeError> {
    let trimmed = data.trim_ascii();
    serde_json::from_slice(trimmed).map_err(|e| {
        let shown = String::from_utf8_lossy(&trimmed[..trimmed.len().min(SHOWN_BYTES)]);
        // serde quotes whole string values ("invalid type: string \"...\""): clip it too
        DecodeError(format!(
            "invalid event JSON ({}): {shown}",
            clip(&e.to_string(), SHOWN_BYTES)
        ))
    })
}

/// The text of an error value: a string, or an object's `message`.
fn error_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| v.to_string(), str::to_string),
        other => other.to_string(),
    }
}

/// Add the scenario's sampling fields that every API spells the same way.
fn common_sampling(m: &mut Map<String, Value>, s: &ResolvedSampling) {
    if let Some(t) = s.temperature {
        m.insert("temperature".into(), serde_json::json!(t));
    }
    if let Some(p) = s.top_p {
        m.insert("top_p".into(), serde_json::json!(p));
    }
    if let Some(k) = s.top_k {
        m.insert("top_k".into(), serde_json::json!(k));
    }
}

/// Merge `sampling.extra_body` into `m` (later keys win).
fn extra_body(m: &mut Map<String, Value>, s: &ResolvedSampling) {
    for (k, v) in &s.extra_body {
        m.insert(k.clone(), v.clone());
    }
}

/// A text API's `prompt`: the text, or the token ids as a JSON array
/// (OpenAI completions and llama.cpp's `/completion` take either).
pub(super) fn prompt_value(prompt: &Prompt) -> Value {
    match prompt {
        Prompt::Tokens(ids) => Value::Array(ids.iter().map(|id| Value::from(*id)).collect()),
        _ => Value::String(prompt.text().into_owned()),
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use cicada_request::Prompt;

    use super::*;

    /// A backend with greedy sampling, `ignore_eos` and one extra field.
    pub fn codec(api: WireApi, family: ServerFamily, stream: bool) -> ApiCodec {
        ApiCodec::new(
            api,
            family,
            "m".into(),
            ResolvedSampling {
                temperature: Some(0.0),
                top_p: None,
                top_k: None,
                ignore_eos: true,
                min_tokens: Some(5),
                extra_body: [("seed".to_string(), serde_json::json!(3))]
                    .into_iter()
                    .collect(),
            },
            stream,
        )
    }

    /// A two-word prompt asking for 5 tokens.
    pub fn entry() -> Ask {
        Ask {
            prompt: Prompt::Text("hi there".into()),
            media: Default::default(),
            output_tokens: Some(5),
            structured: None,
        }
    }

    /// A pooling request of `prompt` (a batch, or a query and documents):
    /// no output length.
    pub fn pooling_ask(prompt: Prompt) -> Ask {
        Ask {
            prompt,
            media: Default::default(),
            output_tokens: None,
            structured: None,
        }
    }

    /// The body as JSON.
    pub fn body(b: &ApiCodec) -> Value {
        serde_json::from_slice(&b.body(&entry())).unwrap()
    }

    #[test]
    fn a_lora_choice_goes_into_every_json_body() {
        for api in [WireApi::LlamaCpp, WireApi::Chat, WireApi::Completions] {
            let plain = body(&codec(api, ServerFamily::LlamaCpp, true));
            assert!(plain.get("lora").is_none(), "{plain}");
            let on = codec(api, ServerFamily::LlamaCpp, true).with_lora(Some((1, 1.0)));
            assert_eq!(
                body(&on)["lora"],
                serde_json::json!([{"id": 1, "scale": 1.0}])
            );
            let off = codec(api, ServerFamily::LlamaCpp, true).with_lora(Some((0, 0.0)));
            assert_eq!(
                body(&off)["lora"],
                serde_json::json!([{"id": 0, "scale": 0.0}])
            );
        }
    }
}
