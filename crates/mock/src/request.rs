use serde::Deserialize;

/// The parts of an OpenAI completions or chat request the mock acts on.
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
        }
        out
    }

    /// Output tokens the client asked for, if any.
    pub fn requested_tokens(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
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
    fn fingerprint_is_stable() {
        assert_eq!(fingerprint("hello"), fingerprint("hello"));
        assert_ne!(fingerprint("hello"), fingerprint("hellp"));
    }
}
