//! Checks for the SSE framer, shared by the `sse_framer` fuzz target and the
//! workspace test that replays its corpus (`crates/worker/tests/fuzz_corpus.rs`).
//!
//! Input layout: the first 8 bytes seed how the rest is cut into reads
//! (lengths 0 to 16, empty reads included); the rest is the stream.

use cicada_client::sse::{SseEvent, SseFramer};

type Events = Vec<(Vec<u8>, Vec<u8>)>;

/// Feed `stream` as the given reads; stop after `limit` events if given.
fn frame(reads: &[&[u8]], limit: Option<usize>) -> Events {
    let mut framer = SseFramer::new();
    let mut out = Events::new();
    let mut on_event = |e: SseEvent<'_>| {
        out.push((e.event.to_vec(), e.data.to_vec()));
        limit.is_none_or(|l| out.len() < l)
    };
    for read in reads {
        // a framer without a limit never refuses
        if framer.push(read, &mut on_event) != Ok(true) {
            return out;
        }
    }
    let _ = framer.finish(&mut on_event);
    out
}

/// The framer's documented rules, written the slow, obvious way on the whole
/// stream: lines end at `\r\n`, `\n` or `\r`; a blank line dispatches; `:`
/// starts a comment; `data` lines join with `\n`; a last line without its end
/// and a last event without its blank line still count; llama.cpp's
/// non-standard `error:` line adds its value to the data of an `error` event.
fn reference(stream: &[u8]) -> Events {
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < stream.len() {
        match stream[i] {
            b'\n' => {
                lines.push(&stream[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&stream[start..i]);
                if stream.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < stream.len() {
        lines.push(&stream[start..]);
    }
    lines.push(b"");
    let mut out = Events::new();
    let (mut event, mut data, mut has_data) = (Vec::new(), Vec::new(), false);
    for line in lines {
        if line.is_empty() {
            if has_data {
                out.push((std::mem::take(&mut event), std::mem::take(&mut data)));
            }
            event.clear();
            has_data = false;
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                has_data = true;
            }
            b"event" => event = value.to_vec(),
            // llama.cpp's non-standard `error: {json}` line
            b"error" => {
                event = b"error".to_vec();
                if has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                has_data = true;
            }
            _ => {}
        }
    }
    out
}

/// Cut `stream` into reads of 0 to 16 bytes chosen by `seed` (xorshift).
fn cut(stream: &[u8], mut seed: u64) -> Vec<&[u8]> {
    let mut reads = Vec::new();
    let mut rest = stream;
    seed |= 1;
    while !rest.is_empty() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let n = ((seed % 17) as usize).min(rest.len());
        let (read, tail) = rest.split_at(n);
        reads.push(read);
        rest = tail;
    }
    reads
}

/// Any bytes, cut into any reads, give the reference's events and never panic;
/// a callback that stops after k events has seen exactly the first k.
pub fn check(data: &[u8]) {
    let (seed, stream) = if data.len() >= 8 {
        let (s, rest) = data.split_at(8);
        (u64::from_le_bytes(s.try_into().unwrap_or_default()), rest)
    } else {
        (0, data)
    };
    let whole = frame(&[stream], None);
    assert_eq!(whole, reference(stream), "one read vs the reference");
    let reads = cut(stream, seed);
    assert_eq!(frame(&reads, None), whole, "reads {reads:?}");
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(frame(&bytes, None), whole, "byte by byte");
    for (event, data) in &whole {
        assert!(!event.contains(&b'\n') && !event.contains(&b'\r'));
        assert!(!data.contains(&b'\r'));
    }
    if !whole.is_empty() {
        let k = (seed as usize % whole.len()) + 1;
        assert_eq!(frame(&reads, Some(k)), whole[..k], "stopping after {k}");
    }
}
