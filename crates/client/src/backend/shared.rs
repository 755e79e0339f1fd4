//! A request body whose prompt text is shared, never copied per request:
//! the codec's JSON is built once around markers standing for the prompt's
//! texts, then cut at the markers, and each text goes between the pieces as
//! the pool (or a session's history) holds it. A text JSON would escape
//! (a quote, a backslash, a control character) goes as its escaped spelling,
//! made once where the body is.

use std::sync::Arc;

use bytes::Bytes;
use cicada_request::{ChatMessage, Prompt, WireApi};

use super::{ApiCodec, Ask};

/// A request body in pieces, written one after another: the codec's JSON
/// around the prompt's texts, which are the pool's own bytes (cheap to
/// clone: every piece is shared).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedBody {
    parts: Vec<Bytes>,
}

impl SharedBody {
    /// The pieces, in order.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// Bytes of the whole body.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// Whether the body has no byte.
    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(Bytes::is_empty)
    }

    /// The body as one buffer (a copy: for tests and logs, not for sending).
    pub fn to_vec(&self) -> Vec<u8> {
        self.parts.concat()
    }

    /// Bytes held by pieces of this body alone, not shared with a pool's
    /// texts (what prebuilding the body costs beside the pool).
    pub fn own_bytes(&self, shared: &[Arc<str>]) -> usize {
        self.parts
            .iter()
            .filter(|p| !shared.iter().any(|t| t.as_ptr() == p.as_ptr()))
            .map(Bytes::len)
            .sum()
    }
}

impl From<Vec<u8>> for SharedBody {
    fn from(bytes: Vec<u8>) -> Self {
        Self {
            parts: vec![Bytes::from(bytes)],
        }
    }
}

/// A shared text as the bytes of a body piece (no copy: the piece keeps
/// the text alive).
struct Text(Arc<str>);

impl AsRef<[u8]> for Text {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Opens a marker in the JSON: `\u0001`, which serde_json writes for U+0001.
const OPEN: &[u8] = b"\\u0001";
/// Closes a marker: `\u0002`.
const CLOSE: &[u8] = b"\\u0002";

/// The marker standing for text `i` in the body built around it.
fn marker(i: usize) -> Arc<str> {
    format!("\u{1}{i}\u{2}").into()
}

/// The ask with each of its prompt's texts replaced by a marker, and the
/// texts in marker order; `None` when it has no text to share (token ids,
/// batches, rerank lists stay in the JSON).
fn masked(ask: &Ask) -> Option<(Ask, Vec<Arc<str>>)> {
    let mut texts = Vec::new();
    let mut mark = |t: &Arc<str>| {
        texts.push(t.clone());
        marker(texts.len() - 1)
    };
    let prompt = match &ask.prompt {
        Prompt::Text(t) => Prompt::Text(mark(t)),
        Prompt::Chat(msgs) => Prompt::Chat(
            msgs.iter()
                .map(|m| ChatMessage::new(m.role.clone(), mark(&m.content)))
                .collect(),
        ),
        Prompt::Batch(_) | Prompt::Rerank { .. } | Prompt::Tokens(_) => return None,
    };
    Some((
        Ask {
            prompt,
            media: ask.media.clone(),
            output_tokens: ask.output_tokens,
            structured: ask.structured.clone(),
        },
        texts,
    ))
}

/// Whether JSON writes `s` as it is between its quotes (serde_json escapes
/// only `"`, `\` and control characters).
fn plain(s: &str) -> bool {
    !s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20)
}

/// `s` as JSON spells it between its quotes.
fn escaped(s: &str) -> Bytes {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    Bytes::copy_from_slice(
        quoted
            .as_bytes()
            .get(1..quoted.len() - 1)
            .unwrap_or_default(),
    )
}

/// Cut `json` at its markers and put each marker's text in its place;
/// `None` when a marker is missing or malformed (the caller then sends the
/// body built whole).
fn splice(json: Vec<u8>, texts: &[Arc<str>]) -> Option<Vec<Bytes>> {
    let json = Bytes::from(json);
    let mut parts = Vec::with_capacity(2 * texts.len() + 1);
    let mut used = vec![false; texts.len()];
    let (mut from, mut at) = (0, 0);
    while let Some(k) = find(&json[at..], OPEN) {
        let start = at + k;
        let digits = start + OPEN.len();
        let end = digits
            + json[digits..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
        if end == digits || !json[end..].starts_with(CLOSE) {
            return None;
        }
        let i: usize = std::str::from_utf8(&json[digits..end]).ok()?.parse().ok()?;
        let text = texts.get(i)?;
        parts.push(json.slice(from..start));
        parts.push(if plain(text) {
            Bytes::from_owner(Text(text.clone()))
        } else {
            escaped(text)
        });
        used[i] = true;
        from = end + CLOSE.len();
        at = from;
    }
    parts.push(json.slice(from..));
    used.iter().all(|u| *u).then_some(parts)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl ApiCodec {
    /// The body of [`ApiCodec::body`], byte for byte, with the prompt's
    /// texts shared rather than copied: its pieces point at the texts of
    /// `entry` (a pool's prompt, a session's messages). Bodies of token ids,
    /// batches, rerank lists and uploads are one piece, built whole.
    pub fn shared_body(&self, entry: &Ask) -> SharedBody {
        let whole = || SharedBody::from(self.body(entry));
        if self.api == WireApi::Transcription {
            return whole();
        }
        let Some((ask, texts)) = masked(entry) else {
            return whole();
        };
        // a text holding a marker's opening would be cut wrongly: built whole
        if texts.iter().any(|t| t.contains('\u{1}')) {
            return whole();
        }
        match splice(self.body(&ask), &texts) {
            Some(parts) => SharedBody { parts },
            None => whole(),
        }
    }
}

#[cfg(test)]
mod tests {
    use cicada_request::{Image, MediaFile, ServerFamily};

    use super::super::test_support::codec;
    use super::*;

    /// Every API that takes text, streamed or not.
    const APIS: [WireApi; 13] = [
        WireApi::Completions,
        WireApi::Chat,
        WireApi::Tgi,
        WireApi::LlamaCpp,
        WireApi::Triton,
        WireApi::Responses,
        WireApi::Messages,
        WireApi::Embeddings,
        WireApi::Rerank,
        WireApi::TeiEmbed,
        WireApi::TeiRerank,
        WireApi::Pooling,
        WireApi::Score,
    ];

    fn ask(prompt: Prompt) -> Ask {
        Ask {
            prompt,
            media: Default::default(),
            output_tokens: Some(7),
            structured: None,
        }
    }

    fn prompts() -> Vec<Prompt> {
        vec![
            Prompt::Text("hi there".into()),
            Prompt::Text("".into()),
            Prompt::Text("say \"hi\"".into()),
            Prompt::Text("a \\ backslash".into()),
            Prompt::Text("a \"quoted\" \\ line\nnext\ttab ünïcødé \u{7f}".into()),
            Prompt::Text("looks like a marker: \\u0001 0 \\u0002".into()),
            Prompt::Text("holds the marker \u{1}0\u{2} itself".into()),
            Prompt::Chat(vec![
                ChatMessage::new("system", "be brief"),
                ChatMessage::new("user", "first \"turn\"\n"),
                ChatMessage::new("assistant", "an answer"),
                ChatMessage::new("user", "second turn"),
            ]),
            Prompt::Tokens(vec![1, 22, 333]),
            Prompt::Batch(vec!["a".into(), "b\"c".into()]),
            Prompt::Rerank {
                query: "q".into(),
                documents: vec!["d1".into(), "d2".into()],
            },
        ]
    }

    /// The shared body is the whole body, byte for byte, for every API,
    /// prompt kind, escape and stream setting, with images too.
    #[test]
    fn shared_bodies_are_the_bodies_byte_for_byte() {
        let file = Arc::new(MediaFile {
            mime: "image/png".into(),
            name: "x.png".into(),
            bytes: vec![137, 80, 78, 71].into(),
        });
        for api in APIS {
            for family in [
                ServerFamily::Vllm,
                ServerFamily::Openai,
                ServerFamily::LlamaCpp,
            ] {
                for stream in [true, false] {
                    let c = codec(api, family, stream).with_lora(Some((1, 0.5)));
                    for p in prompts() {
                        for images in [vec![], vec![Image::File(file.clone())]] {
                            let mut a = ask(p.clone());
                            a.media.images = images;
                            let shared = c.shared_body(&a);
                            assert_eq!(
                                String::from_utf8_lossy(&shared.to_vec()),
                                String::from_utf8_lossy(&c.body(&a)),
                                "{api:?} {family:?} stream {stream} {p:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A plain prompt's text goes in the body as the pool's own bytes: the
    /// piece points where the prompt lies, and nothing prompt-sized is held
    /// by the body itself.
    #[test]
    fn the_prompt_is_shared_not_copied() {
        let text: Arc<str> = "word ".repeat(10_000).into();
        let c = codec(WireApi::Completions, ServerFamily::Vllm, true);
        let body = c.shared_body(&ask(Prompt::Text(text.clone())));
        assert!(
            body.parts().iter().any(|p| p.as_ptr() == text.as_ptr()),
            "the prompt was copied into the body"
        );
        assert!(body.own_bytes(std::slice::from_ref(&text)) < 1_000);
        assert_eq!(body.len(), c.body(&ask(Prompt::Text(text.clone()))).len());
        // a session's messages too, each from where its history holds it
        let said: Arc<str> = "an answer ".repeat(500).into();
        let chat = Prompt::Chat(vec![
            ChatMessage::new("user", text.clone()),
            ChatMessage::new("assistant", said.clone()),
        ]);
        let c = codec(WireApi::Chat, ServerFamily::Vllm, true);
        let body = c.shared_body(&ask(chat));
        for t in [&text, &said] {
            assert!(body.parts().iter().any(|p| p.as_ptr() == t.as_ptr()));
        }
    }
}
