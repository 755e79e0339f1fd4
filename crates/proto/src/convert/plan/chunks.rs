//! The pool in pieces (`PoolChunk` after `Assign`, see `proto/cicada.proto`):
//! deflated once, cut into messages well under the message cap, and shared
//! by every worker that gets the same pool; on the worker, inflated on a
//! thread of its own as the pieces arrive, so neither side ever holds the
//! compressed pool as one message and no pool is too big to send.

use std::io::Read;
use std::sync::Arc;
use std::sync::mpsc;

use cicada_plan::pool::{OutputShape, PoolEntry};
use flate2::{Crc, Decompress, FlushDecompress, Status};
use prost::bytes::Bytes;

use super::PlanError;
use super::pool::{deflate_pool, inflate_from};
use crate::v1;

/// Most bytes of deflated pool one `PoolChunk` carries: a small part of
/// [`crate::MAX_MESSAGE_BYTES`], and few messages for any pool a machine
/// holds (a 3 GB text pool deflates to about 50 of them).
pub const POOL_CHUNK_BYTES: usize = 32 << 20;

/// A pool deflated for the wire, cut into pieces with their CRC-32. Cloning
/// it (and sending its pieces) shares the bytes: they are freed once the
/// last worker's stream has sent them.
#[derive(Debug, Clone)]
pub struct DeflatedPool {
    pieces: Arc<[(Bytes, u32)]>,
    bytes: u64,
}

impl DeflatedPool {
    /// `entries` and `shapes` deflated on every core, in pieces of at most
    /// [`POOL_CHUNK_BYTES`].
    pub fn new(entries: &[PoolEntry], shapes: &[OutputShape]) -> Self {
        Self::with_piece_bytes(entries, shapes, POOL_CHUNK_BYTES)
    }

    /// The same in pieces of at most `max` bytes (tests send a small pool
    /// in many pieces).
    pub fn with_piece_bytes(entries: &[PoolEntry], shapes: &[OutputShape], max: usize) -> Self {
        Self::cut(deflate_pool(entries, shapes), max)
    }

    /// The compressed chunks, in order, joined and cut into pieces of at
    /// most `max` bytes; each chunk is freed once copied.
    pub(super) fn cut(chunks: Vec<Vec<u8>>, max: usize) -> Self {
        let max = max.max(1);
        let total: usize = chunks.iter().map(Vec::len).sum();
        let mut pieces = Vec::with_capacity(total.div_ceil(max).max(1));
        let mut cur = Vec::with_capacity(max.min(total));
        for chunk in chunks {
            let mut rest = chunk.as_slice();
            while !rest.is_empty() {
                let take = rest.len().min(max - cur.len());
                cur.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if cur.len() == max {
                    let left = total - pieces.len() * max - max;
                    let full = std::mem::replace(&mut cur, Vec::with_capacity(max.min(left)));
                    pieces.push(piece(full));
                }
            }
        }
        if !cur.is_empty() || pieces.is_empty() {
            pieces.push(piece(cur));
        }
        Self {
            pieces: pieces.into(),
            bytes: total as u64,
        }
    }

    /// How many `PoolChunk` messages carry it (at least one).
    pub fn chunks(&self) -> u32 {
        u32::try_from(self.pieces.len()).unwrap_or(u32::MAX)
    }

    /// Its deflated size, bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The messages that carry it for `step`, in order (the bytes shared, not copied).
    pub fn messages(&self, step: u32) -> impl Iterator<Item = v1::PoolChunk> + '_ {
        self.pieces
            .iter()
            .zip(0u32..)
            .map(move |((data, crc32), seq)| v1::PoolChunk {
                step,
                seq,
                data: data.clone(),
                crc32: *crc32,
            })
    }
}

fn piece(data: Vec<u8>) -> (Bytes, u32) {
    let crc = crc32(&data);
    (data.into(), crc)
}

pub(super) fn crc32(data: &[u8]) -> u32 {
    let mut c = Crc::new();
    c.update(data);
    c.sum()
}

/// A pool read from the wire, for [`super::decode_plan`].
#[derive(Debug)]
pub struct ReceivedPool(pub(super) v1::Pool);

/// A pool arriving as `PoolChunk` messages: each piece is checked (its step,
/// its place, its CRC-32, the sizes the Assign announced) as it comes and
/// handed to a thread that inflates and reads the pool while the rest
/// arrives. Dropped before the end, the thread stops on its own.
#[derive(Debug)]
pub struct PoolReceiver {
    step: u32,
    chunks: u32,
    bytes: u64,
    next: u32,
    got: u64,
    feed: Option<mpsc::Sender<Bytes>>,
    reader: Option<std::thread::JoinHandle<Result<v1::Pool, PlanError>>>,
}

impl PoolReceiver {
    /// Ready for the `chunks` pieces (`bytes` in all) of `step`'s pool, as
    /// its Assign announced them.
    pub fn start(step: u32, chunks: u32, bytes: u64) -> Result<Self, PlanError> {
        if chunks == 0 {
            return Err(PlanError::Missing(
                "its pool (the assignment announces no pieces)",
            ));
        }
        let (feed, pieces) = mpsc::channel::<Bytes>();
        let reader = std::thread::Builder::new()
            .name("cicada-pool".into())
            .spawn(move || read_pool(pieces))
            .map_err(|e| PlanError::Pool(format!("cannot start its reader: {e}")))?;
        Ok(Self {
            step,
            chunks,
            bytes,
            next: 0,
            got: 0,
            feed: Some(feed),
            reader: Some(reader),
        })
    }

    /// The next piece; `true` once it was the last.
    pub fn push(&mut self, c: v1::PoolChunk) -> Result<bool, PlanError> {
        let bad = |why: String| PlanError::Chunk {
            seq: c.seq,
            of: self.chunks,
            why,
        };
        if c.step != self.step {
            return Err(bad(format!(
                "it belongs to step {}, not to step {} being assigned",
                c.step, self.step
            )));
        }
        if c.seq != self.next {
            return Err(bad(format!("it came where piece {} was due", self.next)));
        }
        let sum = crc32(&c.data);
        if sum != c.crc32 {
            return Err(bad(format!(
                "its CRC-32 is {sum:08x}, not the {:08x} it was sent with (damaged on the way)",
                c.crc32
            )));
        }
        self.got += c.data.len() as u64;
        let last = self.next + 1 == self.chunks;
        if self.got > self.bytes || (last && self.got != self.bytes) {
            return Err(bad(format!(
                "the pieces so far carry {} bytes, the assignment announced {}",
                self.got, self.bytes
            )));
        }
        self.next += 1;
        let sent = self.feed.as_ref().is_some_and(|f| f.send(c.data).is_ok());
        if !sent {
            // the reader stopped early: it found the pool bad
            return Err(self.join().err().unwrap_or_else(|| {
                PlanError::Pool("its deflate stream ended before its last piece".into())
            }));
        }
        if last {
            self.feed = None;
        }
        Ok(last)
    }

    /// Pieces received so far, and how many the pool has.
    pub fn progress(&self) -> (u32, u32) {
        (self.next, self.chunks)
    }

    /// The pool, once every piece came (waits for the reader: call it off
    /// the async runtime); cut short when some did not.
    pub fn finish(mut self) -> Result<ReceivedPool, PlanError> {
        if self.next < self.chunks {
            self.feed = None;
            return Err(PlanError::Truncated {
                got: self.next,
                of: self.chunks,
            });
        }
        self.join().map(ReceivedPool)
    }

    fn join(&mut self) -> Result<v1::Pool, PlanError> {
        self.feed = None;
        match self.reader.take().map(std::thread::JoinHandle::join) {
            Some(Ok(read)) => read,
            Some(Err(_)) => Err(PlanError::Pool("its reader panicked".into())),
            None => Err(PlanError::Pool("it was already read".into())),
        }
    }
}

/// The reader thread: the pool inflated from the pieces as they come; the
/// deflate stream must end exactly with the last piece.
fn read_pool(pieces: mpsc::Receiver<Bytes>) -> Result<v1::Pool, PlanError> {
    let mut stream = Inflate::new(pieces.into_iter());
    let pool = inflate_from(&mut stream)?;
    if !stream.ended {
        return Err(PlanError::Pool("it ends inside a field".into()));
    }
    if !stream.rest.is_empty() || stream.pieces.any(|p| !p.is_empty()) {
        return Err(PlanError::Pool(
            "bytes follow the end of its deflate stream".into(),
        ));
    }
    Ok(pool)
}

/// A raw deflate stream read from pieces as they come; unlike a plain
/// decoder, pieces that stop before the stream's final block are an error,
/// not a shorter pool.
pub(super) struct Inflate<I> {
    pieces: I,
    rest: Bytes,
    z: Decompress,
    ended: bool,
}

impl<I: Iterator<Item = Bytes>> Inflate<I> {
    pub(super) fn new(pieces: I) -> Self {
        Self {
            pieces,
            rest: Bytes::new(),
            z: Decompress::new(false),
            ended: false,
        }
    }
}

impl<I: Iterator<Item = Bytes>> Read for Inflate<I> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::{Error, ErrorKind};
        while !self.ended && !buf.is_empty() {
            if self.rest.is_empty() {
                match self.pieces.next() {
                    Some(p) => self.rest = p,
                    None => {
                        return Err(Error::new(
                            ErrorKind::UnexpectedEof,
                            "its deflate stream stops before its end",
                        ));
                    }
                }
            }
            let (before_in, before_out) = (self.z.total_in(), self.z.total_out());
            let status = self
                .z
                .decompress(&self.rest, buf, FlushDecompress::None)
                .map_err(|e| Error::new(ErrorKind::InvalidData, e))?;
            let used = usize::try_from(self.z.total_in() - before_in).unwrap_or(usize::MAX);
            let made = usize::try_from(self.z.total_out() - before_out).unwrap_or(usize::MAX);
            let _ = self.rest.split_to(used.min(self.rest.len()));
            self.ended = status == Status::StreamEnd;
            if made > 0 {
                return Ok(made);
            }
            if used == 0 && !self.rest.is_empty() && !self.ended {
                return Err(Error::new(
                    ErrorKind::InvalidData,
                    "its deflate stream makes no progress",
                ));
            }
        }
        Ok(0)
    }
}
