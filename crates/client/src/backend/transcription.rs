//! OpenAI audio transcriptions (`/v1/audio/transcriptions`, vLLM's
//! `openai-audio`): a multipart/form-data upload of the clip with `model`,
//! `stream` and the sampling fields as form fields. Streamed, vLLM answers
//! with chat-completion-like chunks (`choices[0].delta.content`, usage on the
//! last); whole, with `{"text": ..., "usage": ...}`.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    ApiCodec, Ask, DecodeError, EventInfo, Usage, common_sampling, decode, error_text, extra_body,
};

/// The form's part boundary: long and unlikely in audio (checked per body).
pub const BOUNDARY: &str = "cicada-form-6f1d93a0c4b2e857d1a36b9c0e4f27a5";

/// The `Content-Type` of every transcription body.
pub const CONTENT_TYPE: &str =
    "multipart/form-data; boundary=cicada-form-6f1d93a0c4b2e857d1a36b9c0e4f27a5";

/// The form fields besides the file, as vLLM's bench sends them.
fn fields(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("model".into(), Value::String(b.model.clone()));
    if let Some(n) = entry.output_tokens {
        m.insert("max_completion_tokens".into(), json!(n));
    }
    m.insert("stream".into(), Value::Bool(b.stream));
    // as vLLM's bench: without it vLLM first runs a language detection pass
    // (`sampling.extra_body.language` overrides)
    m.insert("language".into(), Value::String("en".into()));
    if b.stream {
        // vLLM flattens stream_options into form fields
        m.insert("stream_include_usage".into(), Value::Bool(true));
        m.insert("stream_continuous_usage_stats".into(), Value::Bool(true));
    }
    common_sampling(&mut m, &b.sampling);
    extra_body(&mut m, &b.sampling);
    m
}

/// The multipart body: the clip as `file`, then each field as text.
pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Vec<u8> {
    let (name, mime, bytes) = match &entry.media.audio {
        Some(a) => super::media::audio_file(a),
        None => ("audio.wav", "audio/wav", Cow::Borrowed(&[][..])),
    };
    if memchr::memmem::find(&bytes, BOUNDARY.as_bytes()).is_some() {
        tracing::warn!(
            file = name,
            "the audio holds the multipart boundary: the server will read it cut short"
        );
    }
    let mut out = Vec::with_capacity(bytes.len() + 1024);
    let mut head = String::new();
    let _ = write!(
        head,
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{}\"\r\nContent-Type: {mime}\r\n\r\n",
        name.replace(['"', '\r', '\n'], "_")
    );
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(&bytes);
    for (k, v) in fields(b, entry) {
        let text = match v {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let mut part = String::new();
        let _ = write!(
            part,
            "\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{}\"\r\n\r\n{text}",
            k.replace(['"', '\r', '\n'], "_")
        );
        out.extend_from_slice(part.as_bytes());
    }
    out.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    out
}

/// A whole (non-streamed) transcription.
#[derive(Deserialize)]
struct Whole<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// A whole response: its `text`, and token usage where the server counted
/// tokens (vLLM reports the audio's seconds instead: no counts then).
pub(super) fn parse_full(body: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    let w: Whole<'_> = decode(body)?;
    if let Some(e) = w.error {
        return Ok(EventInfo::failed(error_text(&e)));
    }
    let usage = w.usage.as_ref().and_then(|u| {
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        let completion = n("output_tokens").or(n("completion_tokens"));
        completion.map(|c| Usage {
            prompt_tokens: n("input_tokens").or(n("prompt_tokens")),
            completion_tokens: Some(c),
            cached_tokens: None,
            reasoning_tokens: None,
        })
    });
    Ok(EventInfo {
        finished: w.text.is_some(),
        content: w.text,
        usage,
        ..EventInfo::default()
    })
}

#[cfg(test)]
mod tests {
    use cicada_request::{Audio, Prompt, ServerFamily, WireApi};

    use super::*;
    use crate::backend::test_support::codec;

    /// The form carries the clip as `file` and each field as its own part.
    #[test]
    fn the_form_carries_the_clip_and_the_fields() {
        let b = codec(WireApi::Transcription, ServerFamily::Openai, true);
        let ask = Ask {
            prompt: Prompt::Text("".into()),
            media: cicada_request::Media {
                images: Vec::new(),
                audio: Some(Audio::Synthetic {
                    duration_ms: 100,
                    sample_rate: 8000,
                    seed: 1,
                }),
            },
            output_tokens: Some(7),
            structured: None,
        };
        let body = b.body(&ask);
        assert_eq!(b.content_type(), CONTENT_TYPE);
        assert!(CONTENT_TYPE.ends_with(BOUNDARY));
        let text = String::from_utf8_lossy(&body);
        assert!(text.starts_with(&format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF")));
        for (k, v) in [
            ("model", "m"),
            ("max_completion_tokens", "7"),
            ("stream", "true"),
            ("stream_include_usage", "true"),
            ("language", "en"),
            ("temperature", "0.0"),
            ("seed", "3"),
        ] {
            let part = format!("name=\"{k}\"\r\n\r\n{v}\r\n--{BOUNDARY}");
            assert!(text.contains(&part), "{k}: {text:.300}");
        }
        assert!(text.ends_with(&format!("--{BOUNDARY}--\r\n")));
        let wav = 44 + 800 * 2;
        assert!(body.len() > wav && body.len() < wav + 2000);
    }

    /// Streamed chunks read as chat chunks; a whole answer by its `text`.
    #[test]
    fn chunks_and_whole_answers() {
        let b = codec(WireApi::Transcription, ServerFamily::Openai, true);
        let e = b
            .parse_event(br#"{"choices":[{"delta":{"content":" hello"}}]}"#)
            .unwrap();
        assert_eq!(e.content.as_deref(), Some(" hello"));
        let whole = codec(WireApi::Transcription, ServerFamily::Openai, false);
        let e = whole
            .parse_full(br#"{"text":"hi there","usage":{"type":"duration","seconds":2}}"#)
            .unwrap();
        assert_eq!(e.content.as_deref(), Some("hi there"));
        assert!(e.usage.is_none() && e.done);
        let e = whole.parse_full(br#"{"error":{"message":"no"}}"#).unwrap();
        assert_eq!(e.error.as_deref(), Some("no"));
    }
}
