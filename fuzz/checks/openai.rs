//! Checks for OpenAI event parsing, shared by the `openai_events` fuzz target
//! and the workspace test that replays its corpus.

use cicada_client::backend::{ApiCodec, EventInfo};
use cicada_request::{ResolvedSampling, ServerFamily, WireApi};

fn codec(api: WireApi) -> ApiCodec {
    ApiCodec::new(
        api,
        ServerFamily::Vllm,
        "m".to_string(),
        ResolvedSampling {
            temperature: None,
            top_p: None,
            top_k: None,
            ignore_eos: false,
            min_tokens: None,
            extra_body: Default::default(),
        },
        true,
    )
}

fn sane(info: &EventInfo<'_>) {
    if let Some(c) = &info.content {
        assert!(!c.is_empty(), "content is never Some(\"\")");
    }
    if info.error.is_some() {
        assert!(
            info.content.is_none() && info.usage.is_none() && !info.finished,
            "an error event carries nothing else: {info:?}"
        );
    }
}

/// Error text quotes at most 200 bytes of the payload, so it stays short.
const MAX_ERROR_LEN: usize = 1200;

/// Any bytes as an SSE data payload or a whole body, for both APIs: an
/// interpretation or a short error, never a panic.
pub fn check(data: &[u8]) {
    for api in [WireApi::Completions, WireApi::Chat] {
        let b = codec(api);
        match b.parse_event(data) {
            Ok(info) => {
                sane(&info);
                if info.done {
                    assert_eq!(data.trim_ascii(), b"[DONE]");
                    assert_eq!(
                        info,
                        EventInfo {
                            done: true,
                            ..EventInfo::default()
                        }
                    );
                }
            }
            Err(e) => assert!(
                e.0.len() < MAX_ERROR_LEN,
                "error text is {} bytes",
                e.0.len()
            ),
        }
        match b.parse_full(data) {
            Ok(info) => {
                sane(&info);
                assert!(
                    info.done || info.error.is_some(),
                    "a whole body is complete: {info:?}"
                );
            }
            Err(e) => assert!(
                e.0.len() < MAX_ERROR_LEN,
                "error text is {} bytes",
                e.0.len()
            ),
        }
    }
}
