use serde::Deserialize;

use crate::MockConfig;
use crate::stats::LoggedMessage;

/// The parts of a request the mock acts on, for every API it serves: OpenAI
/// (`prompt`/`messages`, `max_tokens`), TGI (`inputs`, `parameters`),
/// llama.cpp (`prompt`, `n_predict`) and Triton (`text_input`, `max_tokens`).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct IncomingRequest {
    /// The model (or LoRA adapter) the request names.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub prompt: Option<serde_json::Value>,
    #[serde(default)]
    pub messages: Option<Vec<Message>>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// TGI: the prompt.
    #[serde(default)]
    pub inputs: Option<String>,
    /// TGI and Triton: generation parameters.
    #[serde(default)]
    pub parameters: Option<Parameters>,
    /// llama.cpp: tokens to predict (-1 = until end of sequence).
    #[serde(default)]
    pub n_predict: Option<i64>,
    /// Triton: the prompt.
    #[serde(default)]
    pub text_input: Option<String>,
    /// Triton's vLLM backend: sampling parameters as a JSON string.
    #[serde(default)]
    pub sampling_parameters: Option<String>,
    /// Triton: leave the prompt out of non-streamed output.
    #[serde(default)]
    pub exclude_input_in_output: bool,
    /// vLLM, SGLang and llama.cpp: generate to the limit, past end-of-sequence.
    #[serde(default)]
    pub ignore_eos: bool,
    /// vLLM and SGLang: generate at least this many tokens.
    #[serde(default)]
    pub min_tokens: Option<u32>,
    /// Triton's TensorRT-LLM ensemble: generate at least this many tokens.
    #[serde(default)]
    pub min_length: Option<u32>,
    /// OpenAI Responses: the prompt, text or a list of messages.
    #[serde(default)]
    pub input: Option<serde_json::Value>,
    /// OpenAI Responses: the output limit.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// Anthropic Messages: the system prompt, text or text blocks.
    #[serde(default)]
    pub system: Option<serde_json::Value>,
    /// Tools the model may call (chat's, Responses' or Messages' spelling).
    #[serde(default)]
    pub tools: Option<serde_json::Value>,
    /// How the model must use them (each API's spelling).
    #[serde(default)]
    pub tool_choice: Option<serde_json::Value>,
    /// OpenAI chat: the answer's format (`json_schema`, `json_object`).
    #[serde(default)]
    pub response_format: Option<serde_json::Value>,
    /// OpenAI Responses: `{format: ...}`, the answer's format.
    #[serde(default)]
    pub text: Option<serde_json::Value>,
    /// Anthropic Messages: `{format: {type: "json_schema", schema}}`.
    #[serde(default)]
    pub output_config: Option<serde_json::Value>,
}

/// TGI's and Triton's `parameters` object.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Parameters {
    #[serde(default)]
    pub max_new_tokens: Option<u32>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub details: bool,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
    #[serde(default)]
    pub continuous_usage_stats: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Message {
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub content: Option<serde_json::Value>,
}

impl IncomingRequest {
    /// The image parts of the conversation (chat's `image_url`, Responses'
    /// `input_image`, Messages' `image` blocks), and the bytes their base64
    /// data decodes to (an image by reference counts no bytes).
    pub fn images(&self) -> (u64, u64) {
        let mut n = 0;
        let mut bytes = 0;
        let parts = self
            .conversation()
            .into_iter()
            .flatten()
            .filter_map(|(_, c)| c.as_array())
            .flatten();
        for b in parts.filter_map(cicada_request::image_part_bytes) {
            n += 1;
            bytes += b;
        }
        (n, bytes)
    }

    /// The output shape the request asks, in its API's spelling (`None`
    /// when it asks none, or spells it so a server would refuse it).
    pub fn shape(&self) -> Option<cicada_request::OutputShape> {
        let format = self
            .response_format
            .as_ref()
            .or_else(|| self.text.as_ref()?.get("format"))
            .or_else(|| self.output_config.as_ref()?.get("format"));
        cicada_request::OutputShape::read(self.tools.as_ref(), self.tool_choice.as_ref(), format)
            .ok()
            .filter(|s| !s.is_empty())
    }

    /// The conversation, if the request carries one, as (role, content):
    /// Anthropic's `system` first, then `messages`, or Responses' `input` list.
    fn conversation(&self) -> Option<Vec<(&str, &serde_json::Value)>> {
        let mut out: Vec<(&str, &serde_json::Value)> = Vec::new();
        if let Some(system) = &self.system {
            out.push(("system", system));
        }
        if let Some(messages) = &self.messages {
            for m in messages {
                if let Some(c) = &m.content {
                    out.push((m.role.as_deref().unwrap_or(""), c));
                }
            }
        } else if let Some(serde_json::Value::Array(items)) = &self.input {
            for item in items {
                if let Some(c) = item.get("content") {
                    out.push((item.get("role").and_then(|r| r.as_str()).unwrap_or(""), c));
                }
            }
        } else if out.is_empty() {
            return None;
        }
        Some(out)
    }

    /// A completions `prompt` sent as token ids (an array of numbers).
    pub fn prompt_ids(&self) -> Option<&[serde_json::Value]> {
        match self.prompt.as_ref()? {
            serde_json::Value::Array(ids) if !ids.is_empty() && ids.iter().all(|v| v.is_u64()) => {
                Some(ids)
            }
            _ => None,
        }
    }

    /// The prompt text as one string (chat messages joined by newlines;
    /// token ids one word each, so the mock counts one token per id).
    pub fn prompt_text(&self) -> String {
        if let Some(ids) = self.prompt_ids() {
            let words: Vec<String> = ids.iter().map(ToString::to_string).collect();
            return words.join(" ");
        }
        if let Some(messages) = self.conversation() {
            let mut out = String::new();
            for (_, c) in messages {
                push_content(&mut out, c);
                out.push('\n');
            }
            return out;
        }
        let mut out = String::new();
        if let Some(p) = self.prompt.as_ref().or(self.input.as_ref()) {
            push_content(&mut out, p);
        } else if let Some(t) = self.inputs.as_ref().or(self.text_input.as_ref()) {
            out.push_str(t);
        }
        out
    }

    /// Output tokens the client asked for, if any, in whichever field its API uses.
    pub fn requested_tokens(&self) -> Option<u32> {
        let params = self.parameters.as_ref();
        self.max_completion_tokens
            .or(self.max_tokens)
            .or(self.max_output_tokens)
            .or(params.and_then(|p| p.max_new_tokens.or(p.max_tokens)))
            .or(self
                .n_predict
                .filter(|n| *n >= 0)
                .map(|n| n.min(i64::from(u32::MAX)) as u32))
            .or_else(|| self.sampling_u32("max_tokens"))
    }

    /// A whole-number field of Triton's vLLM `sampling_parameters` (a JSON string).
    fn sampling_u32(&self, key: &str) -> Option<u32> {
        let sp: serde_json::Value =
            serde_json::from_str(self.sampling_parameters.as_deref()?).ok()?;
        sp.get(key)?
            .as_u64()
            .map(|n| n.min(u64::from(u32::MAX)) as u32)
    }

    /// The client asked to generate past end-of-sequence, in its API's spelling.
    fn ignores_eos(&self) -> bool {
        self.ignore_eos
            || self
                .sampling_parameters
                .as_deref()
                .and_then(|sp| serde_json::from_str::<serde_json::Value>(sp).ok())
                .is_some_and(|sp| sp.get("ignore_eos") == Some(&serde_json::Value::Bool(true)))
    }

    /// The fewest tokens the client asked for, in its API's spelling.
    fn least_tokens(&self) -> Option<u32> {
        self.min_tokens
            .or(self.min_length)
            .or_else(|| self.sampling_u32("min_tokens"))
    }

    /// Output tokens to send, and whether that is fewer than asked (the
    /// modelled end-of-sequence came first).
    pub fn output_tokens(&self, config: &MockConfig) -> (u32, bool) {
        let asked = self
            .requested_tokens()
            .unwrap_or(config.output_tokens)
            .max(1);
        match config.eos_after_tokens {
            Some(eos) if !self.ignores_eos() => {
                let n = eos.max(self.least_tokens().unwrap_or(0)).max(1);
                if n < asked { (n, true) } else { (asked, false) }
            }
            _ => (asked, false),
        }
    }

    /// Role and content fingerprint of every chat message, in order.
    pub fn message_log(&self) -> Vec<LoggedMessage> {
        self.conversation()
            .into_iter()
            .flatten()
            .map(|(role, c)| {
                let mut text = String::new();
                push_content(&mut text, c);
                LoggedMessage {
                    role: role.to_string(),
                    fingerprint: fingerprint(&text),
                }
            })
            .collect()
    }

    /// Why Anthropic Messages servers would refuse the request with a 400,
    /// if they would: its `messages` take only user and assistant turns (the
    /// system prompt goes in `system`), and it requires `max_tokens`.
    pub fn messages_refusal(&self) -> Option<&'static str> {
        let roles = self
            .messages
            .iter()
            .flatten()
            .filter_map(|m| m.role.as_deref());
        if let Some(bad) = roles
            .into_iter()
            .find(|r| !matches!(*r, "user" | "assistant"))
        {
            return Some(if bad == "system" {
                "messages: unexpected role \"system\"; put the system prompt in the top-level system field"
            } else {
                "messages: roles must be user or assistant"
            });
        }
        self.max_tokens
            .is_none()
            .then_some("max_tokens: field required")
    }

    /// TGI: the client asked for `details`.
    pub fn wants_details(&self) -> bool {
        self.parameters.as_ref().is_some_and(|p| p.details)
    }
}

fn push_content(out: &mut String, v: &serde_json::Value) {
    match v {
        serde_json::Value::String(s) => out.push_str(s),
        serde_json::Value::Array(parts) => {
            for p in parts {
                match p {
                    serde_json::Value::String(s) => out.push_str(s),
                    serde_json::Value::Object(o) => {
                        if let Some(serde_json::Value::String(t)) = o.get("text") {
                            out.push_str(t);
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The mock's token count: whitespace-separated words (what cicada's
/// tokenizer-free prompts are built from, one word per token).
pub(crate) fn count_words(text: &str) -> u32 {
    text.split_whitespace().count() as u32
}

/// FNV-1a: a stable 64-bit fingerprint of a text, as the request log records
/// prompts, messages and answers.
pub fn fingerprint(text: &str) -> u64 {
    fnv1a(FNV_BASIS, text.as_bytes())
}

/// FNV-1a's starting value.
pub(crate) const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// Continue an FNV-1a hash over `bytes`.
pub(crate) fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_parts_and_strings_are_joined() {
        let r: IncomingRequest = serde_json::from_str(
            r#"{"messages":[{"role":"system","content":"a b"},{"role":"user","content":[{"type":"text","text":"c d e"}]}],"max_completion_tokens":7}"#,
        )
        .unwrap();
        assert_eq!(count_words(&r.prompt_text()), 5);
        assert_eq!(r.requested_tokens(), Some(7));
        assert!(!r.stream);
    }

    #[test]
    fn token_id_prompts_count_one_token_per_id() {
        let r: IncomingRequest =
            serde_json::from_str(r#"{"prompt":[5,0,151000,5],"max_tokens":3}"#).unwrap();
        assert_eq!(r.prompt_ids().map(<[_]>::len), Some(4));
        assert_eq!(count_words(&r.prompt_text()), 4);
        let text: IncomingRequest = serde_json::from_str(r#"{"prompt":"5 0"}"#).unwrap();
        assert!(text.prompt_ids().is_none());
    }

    #[test]
    fn every_api_spells_its_prompt_and_limit() {
        let tgi: IncomingRequest = serde_json::from_str(
            r#"{"inputs":"a b c","parameters":{"max_new_tokens":5,"details":true}}"#,
        )
        .unwrap();
        assert_eq!(count_words(&tgi.prompt_text()), 3);
        assert_eq!(tgi.requested_tokens(), Some(5));
        assert!(tgi.wants_details());
        let llama: IncomingRequest =
            serde_json::from_str(r#"{"prompt":"a b","n_predict":7,"stream":true}"#).unwrap();
        assert_eq!(llama.requested_tokens(), Some(7));
        let unlimited: IncomingRequest =
            serde_json::from_str(r#"{"prompt":"a","n_predict":-1}"#).unwrap();
        assert_eq!(unlimited.requested_tokens(), None);
        let triton: IncomingRequest = serde_json::from_str(
            r#"{"text_input":"x y","sampling_parameters":"{\"max_tokens\":9}"}"#,
        )
        .unwrap();
        assert_eq!(count_words(&triton.prompt_text()), 2);
        assert_eq!(triton.requested_tokens(), Some(9));
        let trt: IncomingRequest =
            serde_json::from_str(r#"{"text_input":"x","parameters":{"max_tokens":4}}"#).unwrap();
        assert_eq!(trt.requested_tokens(), Some(4));
    }

    #[test]
    fn eos_after_tokens_yields_to_ignore_eos_and_min_tokens() {
        let config = MockConfig {
            eos_after_tokens: Some(5),
            ..MockConfig::default()
        };
        let req = |body: &str| serde_json::from_str::<IncomingRequest>(body).unwrap();
        assert_eq!(
            req(r#"{"max_tokens": 20}"#).output_tokens(&config),
            (5, true)
        );
        assert_eq!(
            req(r#"{"max_tokens": 3}"#).output_tokens(&config),
            (3, false)
        );
        assert_eq!(
            req(r#"{"max_tokens": 20, "ignore_eos": true}"#).output_tokens(&config),
            (20, false)
        );
        assert_eq!(
            req(r#"{"max_tokens": 20, "min_tokens": 12}"#).output_tokens(&config),
            (12, true)
        );
        assert_eq!(
            req(r#"{"max_tokens": 20}"#).output_tokens(&MockConfig::default()),
            (20, false)
        );
        // the other APIs' spellings: TGI has no way to ignore end-of-sequence,
        // llama.cpp uses `ignore_eos`, Triton `min_length` or vLLM's sampling parameters
        assert_eq!(
            req(r#"{"inputs": "a", "parameters": {"max_new_tokens": 20}}"#).output_tokens(&config),
            (5, true)
        );
        assert_eq!(
            req(r#"{"prompt": "a", "n_predict": 20, "ignore_eos": true}"#).output_tokens(&config),
            (20, false)
        );
        assert_eq!(
            req(r#"{"text_input": "a", "max_tokens": 20, "min_length": 20}"#)
                .output_tokens(&config),
            (20, false)
        );
        assert_eq!(
            req(r#"{"text_input": "a", "sampling_parameters": "{\"max_tokens\":20,\"ignore_eos\":true}"}"#)
                .output_tokens(&config),
            (20, false)
        );
        assert_eq!(
            req(r#"{"text_input": "a", "sampling_parameters": "{\"max_tokens\":20,\"min_tokens\":7}"}"#)
                .output_tokens(&config),
            (7, true)
        );
        let chat = req(
            r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}]}"#,
        );
        let log = chat.message_log();
        assert_eq!(log[0].role, "user");
        assert_eq!(log[1].fingerprint, fingerprint("yo"));
    }

    #[test]
    fn responses_and_messages_spell_their_prompt_and_limit() {
        let text: IncomingRequest =
            serde_json::from_str(r#"{"input":"a b c","max_output_tokens":6}"#).unwrap();
        assert_eq!(count_words(&text.prompt_text()), 3);
        assert_eq!(text.requested_tokens(), Some(6));
        assert!(text.message_log().is_empty());
        let list: IncomingRequest = serde_json::from_str(
            r#"{"input":[{"role":"system","content":"s t"},{"role":"user","content":"u"}]}"#,
        )
        .unwrap();
        assert_eq!(count_words(&list.prompt_text()), 3);
        assert_eq!(list.message_log()[0].role, "system");
        let anthropic: IncomingRequest = serde_json::from_str(
            r#"{"system":"be brief","messages":[{"role":"user","content":"x y z"}],"max_tokens":4}"#,
        )
        .unwrap();
        assert_eq!(count_words(&anthropic.prompt_text()), 5);
        let log = anthropic.message_log();
        assert_eq!(
            (log[0].role.as_str(), log[1].role.as_str()),
            ("system", "user")
        );
        assert_eq!(log[0].fingerprint, fingerprint("be brief"));
        assert_eq!(anthropic.requested_tokens(), Some(4));
        assert_eq!(anthropic.messages_refusal(), None);
        let inline: IncomingRequest = serde_json::from_str(
            r#"{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"max_tokens":4}"#,
        )
        .unwrap();
        assert!(inline.messages_refusal().unwrap().contains("system"));
        let unlimited: IncomingRequest =
            serde_json::from_str(r#"{"messages":[{"role":"user","content":"u"}]}"#).unwrap();
        assert!(unlimited.messages_refusal().unwrap().contains("max_tokens"));
    }

    #[test]
    fn fingerprint_is_stable() {
        assert_eq!(fingerprint("hello"), fingerprint("hello"));
        assert_ne!(fingerprint("hello"), fingerprint("hellp"));
    }
}
