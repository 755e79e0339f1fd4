//! Checks for the HTTP/1.1 response decoder (`cicada_client::http::wire`),
//! shared by the `http_response` fuzz target and the workspace test that
//! replays its corpus (`crates/client/tests/fuzz_corpus.rs`).
//!
//! Input layout: the first byte picks where the rest is cut into two reads;
//! the rest is what a server sent. Whatever the bytes, decoding never panics,
//! never loops, and the head and body come out the same for one read as for
//! two: a read boundary never changes what a response says.

use cicada_client::http::wire::{Framing, Head, Step, decode, parse_head};

/// A decoded body and whether it ended, or a framing error's text.
type Body = Result<(Vec<u8>, bool), String>;

/// The head and body of `reads` taken in order; `None` when the head is
/// malformed or incomplete, else the head, the body bytes and whether the
/// body ended (or a framing error text).
fn decode_reads(reads: &[&[u8]]) -> Option<(Head, Body)> {
    let mut pending: Vec<u8> = Vec::new();
    let mut rest = reads.iter();
    let head = loop {
        if let Ok(Some(h)) = parse_head(&pending) {
            break h;
        }
        if parse_head(&pending).is_err() {
            return None;
        }
        pending.extend_from_slice(rest.next()?);
    };
    pending.drain(..head.len);
    let mut framing = head.framing;
    let mut body = Vec::new();
    // every step consumes bytes or asks for more: bound the loop anyway
    for _ in 0..100_000 {
        match decode(&mut framing, &pending) {
            Err(e) => return Some((head, Err(e.to_string()))),
            Ok(Step::Data { range, consumed }) => {
                body.extend_from_slice(&pending[range]);
                pending.drain(..consumed);
            }
            Ok(Step::Skip(n)) => {
                assert!(n > 0, "a skip must consume");
                pending.drain(..n);
            }
            Ok(Step::End(n)) => {
                pending.drain(..n);
                return Some((head, Ok((body, true))));
            }
            Ok(Step::NeedMore) => match rest.next() {
                Some(r) => pending.extend_from_slice(r),
                None => return Some((head, Ok((body, framing == Framing::Done)))),
            },
        }
    }
    panic!("the decoder did not finish 100,000 steps")
}

/// Decode the input as one read and as two; both must agree.
pub fn check(data: &[u8]) {
    let Some((&cut, wire)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cut) * wire.len() / 256;
    let whole = decode_reads(&[wire]);
    let split = decode_reads(&[&wire[..cut], &wire[cut..]]);
    match (&whole, &split) {
        (Some((h1, Ok(b1))), Some((h2, Ok(b2)))) => {
            assert_eq!(h1, h2);
            assert_eq!(b1, b2);
        }
        // an error may surface at a different point, but both must see one
        (Some((_, Err(_))), Some((_, Err(_)))) | (None, None) => {}
        _ => panic!("one read and two reads disagree: {whole:?} vs {split:?}"),
    }
}
