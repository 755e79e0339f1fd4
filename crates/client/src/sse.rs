//! Server-sent events framing.
//!
//! Our own framer rather than a general SSE crate because it sits on the hot
//! path of every token: it works on bytes in place, reuses its buffers (no
//! allocation per event once warm), and hands each event's data to a callback
//! as a borrowed slice. It follows the WHATWG rules that matter for inference
//! servers: `\n`, `\r\n` and `\r` line ends (including a `\r\n` split across
//! reads), `data:` with or without the space, multi-line data joined by `\n`,
//! comment lines (`:`) ignored, events split across reads or packed several
//! to a read, and a final event without its blank line flushed at the end.
//! One server quirk is kept: llama.cpp's old `error: {json}` line is an
//! `error` event.
//!
//! Memory is bounded: a line, or an event's joined data, longer than the
//! framer's limit stops it with [`TooLarge`] instead of growing a buffer for
//! as long as a server cares to send.

/// One dispatched event: its type (`event:` field, empty if none) and data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    pub event: &'a [u8],
    pub data: &'a [u8],
}

/// A line or an event passed the framer's limit; nothing more is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an SSE {what} passed {limit} bytes")]
pub struct TooLarge {
    /// `line` or `event`.
    pub what: &'static str,
    /// The limit, in bytes.
    pub limit: usize,
}

/// Incremental SSE parser.
#[derive(Debug)]
pub struct SseFramer {
    /// Bytes of an incomplete line carried over from the previous read.
    line: Vec<u8>,
    data: Vec<u8>,
    event: Vec<u8>,
    has_data: bool,
    /// The previous read ended in `\r`: a leading `\n` now belongs to it.
    after_cr: bool,
    /// Longest line, and longest joined event data, accepted.
    limit: usize,
}

impl Default for SseFramer {
    fn default() -> Self {
        Self::with_limit(usize::MAX)
    }
}

impl SseFramer {
    /// A framer with empty buffers and no limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// A framer that refuses a line or an event's data over `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            data: Vec::new(),
            event: Vec::new(),
            has_data: false,
            after_cr: false,
            limit,
        }
    }

    /// Feed one read; `on_event` is called for every complete event. If it
    /// returns `false`, parsing stops and the rest of the read is dropped
    /// (`Ok(false)`). A line or event over the limit stops it too, with the error.
    pub fn push(
        &mut self,
        mut chunk: &[u8],
        on_event: &mut impl FnMut(SseEvent<'_>) -> bool,
    ) -> Result<bool, TooLarge> {
        if chunk.is_empty() {
            // an empty read says nothing, not even whether a `\n` follows a `\r`
            return Ok(true);
        }
        if self.after_cr {
            self.after_cr = false;
            if chunk.first() == Some(&b'\n') {
                chunk = &chunk[1..];
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', chunk) {
            let (line_part, rest) = chunk.split_at(pos);
            let mut rest = &rest[1..];
            if chunk[pos] == b'\r' {
                if rest.first() == Some(&b'\n') {
                    rest = &rest[1..];
                } else if rest.is_empty() {
                    self.after_cr = true;
                }
            }
            self.check_line(line_part.len())?;
            let keep_going = if self.line.is_empty() {
                self.process_line(line_part, on_event)?
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(line_part);
                let r = self.process_line(&line, on_event);
                line.clear();
                self.line = line;
                r?
            };
            if !keep_going {
                return Ok(false);
            }
            chunk = rest;
        }
        self.check_line(chunk.len())?;
        self.line.extend_from_slice(chunk);
        Ok(true)
    }

    /// The line carried over, with `more` bytes added, stays within the limit.
    fn check_line(&self, more: usize) -> Result<(), TooLarge> {
        if self.line.len().saturating_add(more) > self.limit {
            return Err(TooLarge {
                what: "line",
                limit: self.limit,
            });
        }
        Ok(())
    }

    /// End of stream: dispatch a final event that lacked its blank line.
    pub fn finish(
        &mut self,
        on_event: &mut impl FnMut(SseEvent<'_>) -> bool,
    ) -> Result<bool, TooLarge> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            if !self.process_line(&line, on_event)? {
                return Ok(false);
            }
        }
        Ok(self.dispatch(on_event))
    }

    fn process_line(
        &mut self,
        line: &[u8],
        on_event: &mut impl FnMut(SseEvent<'_>) -> bool,
    ) -> Result<bool, TooLarge> {
        if line.is_empty() {
            return Ok(self.dispatch(on_event));
        }
        if line[0] == b':' {
            return Ok(true);
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => self.add_data(value)?,
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            // older llama.cpp servers write an in-band error as a non-standard
            // `error: {json}` line: surface it as an `error` event
            b"error" => {
                self.event.clear();
                self.event.extend_from_slice(b"error");
                self.add_data(value)?;
            }
            _ => {}
        }
        Ok(true)
    }

    /// Join one `data` value to the event's data, within the limit.
    fn add_data(&mut self, value: &[u8]) -> Result<(), TooLarge> {
        let joined = self.data.len() + usize::from(self.has_data) + value.len();
        if joined > self.limit {
            return Err(TooLarge {
                what: "event",
                limit: self.limit,
            });
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
        Ok(())
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(SseEvent<'_>) -> bool) -> bool {
        if !self.has_data {
            self.event.clear();
            return true;
        }
        let keep_going = on_event(SseEvent {
            event: &self.event,
            data: &self.data,
        });
        self.data.clear();
        self.event.clear();
        self.has_data = false;
        keep_going
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        let mut cb = |e: SseEvent<'_>| {
            out.push((
                String::from_utf8_lossy(e.event).into_owned(),
                String::from_utf8_lossy(e.data).into_owned(),
            ));
            true
        };
        for c in chunks {
            f.push(c, &mut cb).unwrap();
        }
        f.finish(&mut cb).unwrap();
        out
    }

    fn d(s: &str) -> (String, String) {
        (String::new(), s.to_string())
    }

    const STREAM: &[u8] = b"data: {\"a\":1}\n\n: keep-alive\n\ndata:{\"b\":2}\r\n\r\nevent: msg\ndata: x\ndata: y\n\ndata: [DONE]\n\n";

    #[test]
    fn whole_stream_in_one_read() {
        let got = collect(&[STREAM]);
        assert_eq!(
            got,
            vec![
                d("{\"a\":1}"),
                d("{\"b\":2}"),
                ("msg".to_string(), "x\ny".to_string()),
                d("[DONE]")
            ]
        );
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let whole = collect(&[STREAM]);
        for i in 0..=STREAM.len() {
            let (a, b) = STREAM.split_at(i);
            assert_eq!(collect(&[a, b]), whole, "split at {i}");
        }
        let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(collect(&bytes), whole, "byte by byte");
    }

    #[test]
    fn bare_cr_line_ends_and_missing_final_blank_line() {
        assert_eq!(
            collect(&[b"data: a\r\rdata: b\r", b"\r"]),
            vec![d("a"), d("b")]
        );
        assert_eq!(collect(&[b"data: tail"]), vec![d("tail")]);
        assert_eq!(collect(&[b"data\n\n"]), vec![d("")]);
        assert!(collect(&[b"id: 4\nretry: 10\n\n"]).is_empty());
    }

    #[test]
    fn llamacpp_error_lines_become_error_events() {
        assert_eq!(
            collect(&[b"data: {\"content\":\"a\"}\n\nerror: {\"code\":500}\n\n"]),
            vec![
                d("{\"content\":\"a\"}"),
                ("error".to_string(), "{\"code\":500}".to_string())
            ]
        );
    }

    #[test]
    fn empty_reads_between_cr_and_lf_change_nothing() {
        // found by the sse_framer fuzz target: `\r`, an empty read, then `\n`
        // was taken as two line ends, dispatching the event early
        assert_eq!(
            collect(&[b"data: a\r", b"", b"\ndata: b\n\n"]),
            vec![d("a\nb")]
        );
    }

    #[test]
    fn callback_can_stop_parsing() {
        let mut f = SseFramer::new();
        let mut n = 0;
        let go_on = f.push(b"data: 1\n\ndata: 2\n\n", &mut |_| {
            n += 1;
            false
        });
        assert_eq!(go_on, Ok(false));
        assert_eq!(n, 1);
    }

    /// Events up to the limit pass; a longer line (in one read or carried
    /// across many) or longer joined data stops the framer, and its buffers
    /// never hold more than the limit.
    #[test]
    fn lines_and_events_over_the_limit_are_refused() {
        let mut seen = Vec::new();
        let mut f = SseFramer::with_limit(16);
        let mut cb = |e: SseEvent<'_>| {
            seen.push(e.data.len());
            true
        };
        assert_eq!(f.push(b"data: 0123456789\n\n", &mut cb), Ok(true));
        let line = TooLarge {
            what: "line",
            limit: 16,
        };
        assert_eq!(f.push(b"data: 0123456789a\n\n", &mut cb), Err(line));
        let mut f = SseFramer::with_limit(16);
        let mut refused = None;
        for _ in 0..100 {
            if let Err(e) = f.push(b"data: 01", &mut cb) {
                refused = Some(e);
                break;
            }
            assert!(f.line.len() <= 16);
        }
        assert_eq!(refused, Some(line));
        let mut f = SseFramer::with_limit(16);
        let event = TooLarge {
            what: "event",
            limit: 16,
        };
        assert_eq!(
            f.push(b"data: 01234567\ndata: 01234567\n\n", &mut cb),
            Err(event)
        );
        assert_eq!(seen, [10]);
    }
}
