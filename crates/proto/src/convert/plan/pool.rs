//! The plan's pool (prompts, conversations, media files and output shapes)
//! to and from the wire, deflated: it is most of a plan's bytes and is text.

use std::io::{Read as _, Write as _};
use std::sync::Arc;

use cicada_plan::pool::{
    Branch, ChatMessage, Conversation, MediaFile, OutputShape, PoolEntry, Prompt, Turn,
};
use prost::Message as _;

use super::PlanError;
use crate::convert::media::{Files, files_from, media_from};
use crate::convert::shape;
use crate::v1;

/// The pool for the wire, deflated: each entry converted, encoded and
/// compressed in turn, so the whole pool is never held a second time (as
/// wire types) nor a third (as one encoded buffer) beside the plan's own.
/// A protobuf message is the concatenation of its fields, so the entries
/// (field 1) go first, one at a time, and the files and shapes they
/// gathered after them.
pub(super) fn deflate_pool(entries: &[PoolEntry], shapes: &[OutputShape]) -> Vec<u8> {
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut files = Files::default();
    let mut buf = Vec::new();
    // writing into a Vec cannot fail
    for e in entries {
        buf.clear();
        prost::encoding::message::encode(1, &pool_entry(e, &mut files), &mut buf);
        let _ = enc.write_all(&buf);
    }
    let rest = v1::Pool {
        entries: Vec::new(),
        files: files.files,
        shapes: shapes.iter().map(shape::shape).collect(),
    };
    let _ = enc.write_all(&rest.encode_to_vec());
    enc.finish().unwrap_or_default()
}

pub(super) fn inflate(bytes: &[u8]) -> Result<v1::Pool, PlanError> {
    let mut raw = Vec::new();
    flate2::read::DeflateDecoder::new(bytes)
        .read_to_end(&mut raw)
        .map_err(|e| PlanError::Pool(e.to_string()))?;
    v1::Pool::decode(raw.as_slice()).map_err(|e| PlanError::Pool(e.to_string()))
}

/// The pool for the wire, each file and each output shape once (what
/// [`deflate_pool`] streams).
#[cfg(test)]
pub(super) fn pool(entries: &[PoolEntry], shapes: &[OutputShape]) -> v1::Pool {
    let mut files = Files::default();
    let entries = entries.iter().map(|e| pool_entry(e, &mut files)).collect();
    v1::Pool {
        entries,
        files: files.files,
        shapes: shapes.iter().map(shape::shape).collect(),
    }
}

pub(super) fn pool_from(pool: v1::Pool) -> Result<Vec<PoolEntry>, PlanError> {
    let files = files_from(pool.files);
    pool.entries
        .into_iter()
        .map(|e| pool_entry_from(e, &files))
        .collect()
}

fn pool_entry(e: &PoolEntry, files: &mut Files) -> v1::PoolEntry {
    use v1::pool_entry::Prompt as P;
    let (images, audio) = files.media(&e.media);
    v1::PoolEntry {
        images,
        audio,
        id: e.id,
        prompt: Some(match &e.prompt {
            Prompt::Text(t) => P::Text(t.to_string()),
            Prompt::Chat(messages) => P::Chat(v1::Chat {
                messages: messages
                    .iter()
                    .map(|m| v1::ChatMessage {
                        role: m.role.to_string(),
                        content: m.content.to_string(),
                    })
                    .collect(),
            }),
            Prompt::Batch(texts) => P::Batch(v1::TextBatch {
                texts: texts.clone(),
            }),
            Prompt::Rerank { query, documents } => P::Rerank(v1::RerankPrompt {
                query: query.clone(),
                documents: documents.clone(),
            }),
            Prompt::Tokens(ids) => P::Tokens(v1::TokenIds { ids: ids.clone() }),
        }),
        input_tokens: e.input_tokens,
        output_tokens: e.output_tokens,
        conversation: e.conversation.as_ref().map(|c| v1::Conversation {
            system: c.system.as_deref().map(str::to_string),
            system_tokens: c.system_tokens,
            turns: c.turns.iter().map(turn).collect(),
        }),
        shape: e.shape,
    }
}

/// A turn for the wire, its sub-agents with it.
fn turn(t: &Turn) -> v1::Turn {
    v1::Turn {
        user: t.user.to_string(),
        input_tokens: t.input_tokens,
        output_tokens: t.output_tokens,
        think_ms: t.think_ms,
        tool_ms: t.tool_ms,
        forks: t
            .forks
            .iter()
            .map(|b| v1::Branch {
                turns: b.turns.iter().map(turn).collect(),
                fresh: b.fresh,
            })
            .collect(),
    }
}

fn turn_from(t: v1::Turn) -> Turn {
    Turn {
        user: t.user.into(),
        input_tokens: t.input_tokens,
        output_tokens: t.output_tokens,
        think_ms: t.think_ms,
        tool_ms: t.tool_ms,
        forks: t
            .forks
            .into_iter()
            .map(|b| Branch {
                turns: b.turns.into_iter().map(turn_from).collect(),
                fresh: b.fresh,
            })
            .collect(),
    }
}

fn pool_entry_from(e: v1::PoolEntry, files: &[Arc<MediaFile>]) -> Result<PoolEntry, PlanError> {
    use v1::pool_entry::Prompt as P;
    Ok(PoolEntry {
        media: media_from(e.images, e.audio, files).map_err(|e| PlanError::Pool(e.0))?,
        id: e.id,
        prompt: match e.prompt {
            Some(P::Chat(c)) => Prompt::Chat(
                c.messages
                    .into_iter()
                    .map(|m| ChatMessage::new(m.role, m.content))
                    .collect(),
            ),
            Some(P::Text(t)) => Prompt::Text(t.into()),
            Some(P::Batch(b)) => Prompt::Batch(b.texts),
            Some(P::Rerank(r)) => Prompt::Rerank {
                query: r.query,
                documents: r.documents,
            },
            Some(P::Tokens(t)) => Prompt::Tokens(t.ids),
            // an empty text prompt is sent as no field at all
            None => Prompt::Text("".into()),
        },
        input_tokens: e.input_tokens,
        output_tokens: e.output_tokens,
        conversation: e.conversation.map(|c| Conversation {
            system: c.system.map(Into::into),
            system_tokens: c.system_tokens,
            turns: c.turns.into_iter().map(turn_from).collect(),
        }),
        shape: e.shape,
    })
}
