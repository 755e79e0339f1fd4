use serde::Deserialize;

use crate::MockConfig;
use crate::stats::LoggedMessage;

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
    #[serde(default)]
    pub ignore_eos: bool,
    #[serde(default)]
    pub min_tokens: Option<u32>,
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

    /// Output tokens to send, and whether that is fewer than asked (the
    /// modelled end-of-sequence came first).
    pub fn output_tokens(&self, config: &MockConfig) -> (u32, bool) {
        let asked = self
            .requested_tokens()
            .unwrap_or(config.output_tokens)
            .max(1);
        match config.eos_after_tokens {
            Some(eos) if !self.ignore_eos => {
                let n = eos.max(self.min_tokens.unwrap_or(0)).max(1);
                if n < asked { (n, true) } else { (asked, false) }
            }
            _ => (asked, false),
        }
    }

    /// Role and content fingerprint of every chat message, in order.
    pub fn message_log(&self) -> Vec<LoggedMessage> {
        self.messages
            .iter()
            .flatten()
            .map(|m| {
                let mut text = String::new();
                if let Some(c) = &m.content {
                    push_content(&mut text, c);
                }
                LoggedMessage {
                    role: m.role.clone().unwrap_or_default(),
                    fingerprint: fingerprint(&text),
                }
            })
            .collect()
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
        let chat = req(
            r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}]}"#,
        );
        let log = chat.message_log();
        assert_eq!(log[0].role, "user");
        assert_eq!(log[1].fingerprint, fingerprint("yo"));
    }

    #[tokio::test]
    async fn a_modelled_end_of_sequence_stops_with_reason_stop() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mock = crate::MockServer::start(
            MockConfig {
                ttft_ms: 0.0,
                itl_ms: 0.0,
                eos_after_tokens: Some(3),
                ..MockConfig::default()
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let url = format!("{}/v1/completions", mock.url());
        let c = reqwest::Client::new();
        for (ignore_eos, tokens, finish) in [(false, 3, "stop"), (true, 9, "length")] {
            let body =
                serde_json::json!({"prompt": "a", "max_tokens": 9, "ignore_eos": ignore_eos});
            let v: serde_json::Value = c
                .post(&url)
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(v["usage"]["completion_tokens"], tokens);
            assert_eq!(v["choices"][0]["finish_reason"], finish);
        }
        let log = mock.requests();
        assert_eq!((log[0].output_tokens, log[1].output_tokens), (3, 9));
    }

    #[test]
    fn fingerprint_is_stable() {
        assert_eq!(fingerprint("hello"), fingerprint("hello"));
        assert_ne!(fingerprint("hello"), fingerprint("hellp"));
    }
}
