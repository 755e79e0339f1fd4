//! The plan's pool (prompts, conversations, media files and output shapes)
//! to and from the wire, deflated: it is most of a plan's bytes and is text.

use std::io::Read as _;
use std::sync::Arc;

use cicada_plan::pool::{
    Branch, ChatMessage, Conversation, MediaFile, OutputShape, PoolEntry, Prompt, Turn,
};
use prost::Message as _;

use super::PlanError;
use crate::convert::media::{Files, files_from, media_from};
use crate::convert::shape;
use crate::v1;

/// Raw pool bytes per independently compressed chunk.
pub(super) const CHUNK_BYTES: usize = 4 << 20;

/// The pool for the wire, deflated: each entry converted and encoded in
/// turn into chunks of about [`CHUNK_BYTES`], which are compressed on every
/// core, so the whole pool is never held a second time (as wire types) nor
/// a third (as one encoded buffer) beside the plan's own. A protobuf message
/// is the concatenation of its fields, so the entries (field 1) go first,
/// one at a time, and the files and shapes they gathered after them.
///
/// Each chunk is compressed on its own and ends with a full flush (pigz's
/// way): the chunks, concatenated, are one ordinary deflate stream, which
/// [`inflate_from`] reads. They are handed back in order, each on its own
/// (`chunks::DeflatedPool` cuts them into messages).
pub(super) fn deflate_pool(entries: &[PoolEntry], shapes: &[OutputShape]) -> Vec<Vec<u8>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(16));
    let (work, queue) = std::sync::mpsc::sync_channel::<(usize, Vec<u8>, bool)>(threads);
    let queue = std::sync::Mutex::new(queue);
    let done = std::sync::Mutex::new(Vec::<(usize, Vec<u8>)>::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = queue
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .recv();
                    let Ok((i, raw, last)) = next else { break };
                    let out = compress_chunk(&raw, last);
                    drop(raw);
                    done.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((i, out));
                }
            });
        }
        // the entries are encoded in order on this thread (media files are
        // numbered as they are met), the chunks compressed on the others
        let mut files = Files::default();
        let mut buf = Vec::with_capacity(CHUNK_BYTES + (64 << 10));
        let mut chunk = 0;
        for e in entries {
            encode_entry(e, &mut files, &mut buf);
            if buf.len() >= CHUNK_BYTES {
                let full =
                    std::mem::replace(&mut buf, Vec::with_capacity(CHUNK_BYTES + (64 << 10)));
                // the compressors only stop when this sender goes
                let _ = work.send((chunk, full, false));
                chunk += 1;
            }
        }
        let rest = v1::Pool {
            entries: Vec::new(),
            files: files.files,
            shapes: shapes.iter().map(shape::shape).collect(),
        };
        // writing into a Vec cannot fail
        let _ = rest.encode(&mut buf);
        let _ = work.send((chunk, buf, true));
        drop(work);
    });
    let mut done = done
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, c)| c).collect()
}

/// One entry as field 1 of the pool message; a text prompt is written from
/// the entry's own string (no copy of it as a wire type).
fn encode_entry(e: &PoolEntry, files: &mut Files, buf: &mut Vec<u8>) {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};
    /// `PoolEntry.text`'s field number.
    const TEXT: u32 = 2;
    let Prompt::Text(text) = &e.prompt else {
        prost::encoding::message::encode(1, &pool_entry(e, files), buf);
        return;
    };
    let fields = entry_fields(e, files);
    // a string field is its length and UTF-8 bytes, as prost writes a String
    let text = text.as_bytes();
    let text_len = key_len(TEXT) + encoded_len_varint(text.len() as u64) + text.len();
    encode_key(1, WireType::LengthDelimited, buf);
    encode_varint((fields.encoded_len() + text_len) as u64, buf);
    // writing into a Vec cannot fail
    let _ = fields.encode(buf);
    encode_key(TEXT, WireType::LengthDelimited, buf);
    encode_varint(text.len() as u64, buf);
    buf.extend_from_slice(text);
}

/// `raw` deflated on its own: ended by a full flush (byte-aligned, no
/// back-references out of it), or as the stream's final block when `last`.
fn compress_chunk(raw: &[u8], last: bool) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress, Status};
    let mut c = Compress::new(Compression::fast(), false);
    let mut out = Vec::with_capacity(raw.len() / 2 + 1024);
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Full
    };
    loop {
        if out.capacity() - out.len() < 1024 {
            out.reserve(out.capacity().max(64 << 10));
        }
        let read = usize::try_from(c.total_in()).map_or(raw.len(), |n| n.min(raw.len()));
        // compressing into a Vec with room left cannot fail
        let Ok(status) = c.compress_vec(&raw[read..], &mut out, flush) else {
            break;
        };
        let all_read = usize::try_from(c.total_in()).map_or(true, |n| n >= raw.len());
        // a flush is complete once a call leaves output room unused
        let flushed = all_read && out.len() < out.capacity();
        if status == Status::StreamEnd || (!last && flushed) {
            break;
        }
    }
    out
}

/// The pool back from the wire, read field by field as it inflates from
/// `r` (the deflate stream, whole or arriving in pieces): the inflated bytes
/// are never held whole beside the entries decoded from them (a worker's
/// peak is its share once, not twice).
pub(super) fn inflate_from(r: impl std::io::Read) -> Result<v1::Pool, PlanError> {
    use prost::encoding::encode_varint;
    let corrupt = |e: &dyn std::fmt::Display| PlanError::Pool(e.to_string());
    let mut r = std::io::BufReader::with_capacity(256 << 10, r);
    let mut pool = v1::Pool::default();
    let mut field = Vec::new();
    while let Some(key) = read_varint(&mut r).map_err(|e| corrupt(&e))? {
        field.clear();
        encode_varint(key, &mut field);
        let value = read_varint(&mut r)
            .map_err(|e| corrupt(&e))?
            .ok_or_else(|| corrupt(&"it ends inside a field"))?;
        encode_varint(value, &mut field);
        // every field of a Pool is a message (length-delimited); a varint
        // is taken whole, anything else is not a pool
        match key & 7 {
            0 => {}
            2 => {
                let len = usize::try_from(value).map_err(|e| corrupt(&e))?;
                field.reserve(len);
                let read = (&mut r)
                    .take(value)
                    .read_to_end(&mut field)
                    .map_err(|e| corrupt(&e))?;
                if read < len {
                    return Err(corrupt(&"it ends inside a field"));
                }
            }
            other => return Err(corrupt(&format!("wire type {other} in the pool"))),
        }
        pool.merge(field.as_slice()).map_err(|e| corrupt(&e))?;
    }
    Ok(pool)
}

/// A protobuf varint from `r`; `None` at the end of the stream before its first byte.
fn read_varint(r: &mut impl std::io::Read) -> std::io::Result<Option<u64>> {
    let mut value = 0u64;
    for i in 0..10 {
        let mut byte = [0u8; 1];
        if r.read(&mut byte)? == 0 {
            return if i == 0 {
                Ok(None)
            } else {
                Err(std::io::ErrorKind::UnexpectedEof.into())
            };
        }
        value |= u64::from(byte[0] & 0x7f) << (7 * i);
        if byte[0] & 0x80 == 0 {
            return Ok(Some(value));
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "a varint longer than 10 bytes",
    ))
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
    let mut out = entry_fields(e, files);
    out.prompt = Some(match &e.prompt {
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
    });
    out
}

/// An entry for the wire without its prompt.
fn entry_fields(e: &PoolEntry, files: &mut Files) -> v1::PoolEntry {
    let (images, audio) = files.media(&e.media);
    v1::PoolEntry {
        images,
        audio,
        id: e.id,
        prompt: None,
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
