use serde::Deserialize;

/// The parts of a request the mock acts on, for every API it serves: OpenAI
/// (`prompt`/`messages`, `max_tokens`), TGI (`inputs`, `parameters`),
/// llama.cpp (`prompt`, `n_predict`) and Triton (`text_input`, `max_tokens`).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct IncomingRequest {
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
    pub content: Option<serde_json::Value>,
}

impl IncomingRequest {
    /// The prompt text as one string (chat messages joined by newlines).
    pub fn prompt_text(&self) -> String {
        if let Some(messages) = &self.messages {
            let mut out = String::new();
            for m in messages {
                if let Some(c) = &m.content {
                    push_content(&mut out, c);
                    out.push('\n');
                }
            }
            return out;
        }
        let mut out = String::new();
        if let Some(p) = &self.prompt {
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
            .or(params.and_then(|p| p.max_new_tokens.or(p.max_tokens)))
            .or(self
                .n_predict
                .filter(|n| *n >= 0)
                .map(|n| n.min(i64::from(u32::MAX)) as u32))
            .or_else(|| {
                let sp: serde_json::Value =
                    serde_json::from_str(self.sampling_parameters.as_deref()?).ok()?;
                sp.get("max_tokens")?
                    .as_u64()
                    .map(|n| n.min(u64::from(u32::MAX)) as u32)
            })
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

/// FNV-1a: a stable 64-bit fingerprint of the prompt for the request log.
pub(crate) fn fingerprint(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
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
    fn fingerprint_is_stable() {
        assert_eq!(fingerprint("hello"), fingerprint("hello"));
        assert_ne!(fingerprint("hello"), fingerprint("hellp"));
    }
}
