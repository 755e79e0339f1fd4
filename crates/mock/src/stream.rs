//! The timed response body: every token at an absolute deadline from arrival.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::{Instant, Sleep};

use crate::Fault;
use crate::format::{self, Api, ChunkHeader, Usage};
use crate::stats::{State, StreamLateness};

/// Timing of one response, fixed at arrival.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub start: Instant,
    pub ttft: Duration,
    pub event_gap: Duration,
    pub jitter: Duration,
}

/// Everything one streamed response needs.
pub(crate) struct StreamSpec {
    pub api: Api,
    pub seq: u64,
    pub created: u64,
    pub model_json: Arc<str>,
    pub timing: Timing,
    pub total_tokens: u32,
    pub tokens_per_event: u32,
    pub prompt_tokens: u32,
    pub role_chunk: bool,
    pub include_usage: bool,
    pub continuous_usage: bool,
    pub fault: Option<Fault>,
    pub seed: u64,
    /// Finish reason of the last chunk ("length", or "stop" after a modelled end-of-sequence).
    pub finish: &'static str,
    /// Cached prompt tokens to report in usage.
    pub cached_tokens: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Stalled,
    Finished,
}

/// A streaming body that emits SSE events on schedule.
pub(crate) struct TokenStream {
    spec: StreamSpec,
    events_total: u32,
    next_event: u32,
    sent_tokens: u32,
    fault_at_event: u32,
    next_deadline: Option<Instant>,
    prev_deadline: Instant,
    role_pending: bool,
    phase: Phase,
    sleep: Pin<Box<Sleep>>,
    rng: Option<ChaCha8Rng>,
    lateness: StreamLateness,
    state: Arc<State>,
}

impl TokenStream {
    pub fn new(spec: StreamSpec, state: Arc<State>) -> Self {
        let per = spec.tokens_per_event.max(1);
        let events_total = if spec.fault == Some(Fault::Empty) {
            0
        } else {
            spec.total_tokens.div_ceil(per).max(1)
        };
        let fault_at_event = match spec.fault {
            Some(Fault::Stall) => 1,
            Some(_) => (events_total / 2).max(1),
            None => u32::MAX,
        };
        let rng = (!spec.timing.jitter.is_zero()).then(|| {
            ChaCha8Rng::seed_from_u64(spec.seed ^ spec.seq.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        });
        state.stream_opened();
        let start = spec.timing.start;
        Self {
            role_pending: spec.role_chunk && spec.api == Api::Chat,
            spec,
            events_total,
            next_event: 0,
            sent_tokens: 0,
            fault_at_event,
            next_deadline: None,
            prev_deadline: start,
            phase: Phase::Running,
            sleep: Box::pin(tokio::time::sleep_until(start)),
            rng,
            lateness: StreamLateness::default(),
            state,
        }
    }

    fn header(&self) -> ChunkHeader<'_> {
        ChunkHeader {
            api: self.spec.api,
            seq: self.spec.seq,
            created: self.spec.created,
            model_json: &self.spec.model_json,
        }
    }

    /// Deadline of event `k`: arrival + TTFT + k event gaps (+ jitter), never before the previous one.
    fn deadline(&mut self) -> Instant {
        if let Some(d) = self.next_deadline {
            return d;
        }
        let t = &self.spec.timing;
        let mut d = t.start + t.ttft + t.event_gap * self.next_event;
        if let Some(rng) = &mut self.rng {
            let j = t.jitter.as_micros() as i64;
            let offset = rng.random_range(-j..=j);
            d = if offset >= 0 {
                d + Duration::from_micros(offset as u64)
            } else {
                d.checked_sub(Duration::from_micros(offset.unsigned_abs()))
                    .unwrap_or(t.start)
            };
        }
        let d = d.max(self.prev_deadline).max(t.start);
        self.next_deadline = Some(d);
        d
    }

    fn usage(&self) -> Usage {
        Usage {
            prompt: self.spec.prompt_tokens,
            completion: self.sent_tokens,
            cached: self.spec.cached_tokens,
        }
    }

    /// Append every event due by `now` to `out`; returns Err to reset the connection.
    fn emit_due(&mut self, out: &mut String, now: Instant) -> Result<(), io::Error> {
        if self.events_total == 0 {
            // empty completion: a finish chunk without content
            let usage = self.spec.include_usage.then(|| self.usage());
            self.header().content(out, "", Some("stop"), None);
            if let Some(u) = usage {
                self.header().usage_only(out, u);
            }
            out.push_str(format::DONE);
            self.finish();
            return Ok(());
        }
        while self.next_event < self.events_total && self.deadline() <= now {
            if self.next_event == self.fault_at_event {
                match self.spec.fault {
                    Some(Fault::Reset) => {
                        self.phase = Phase::Finished;
                        return Err(io::Error::new(
                            io::ErrorKind::ConnectionReset,
                            "mock injected connection reset",
                        ));
                    }
                    Some(Fault::Malformed) => {
                        out.push_str(format::MALFORMED_EVENT);
                        out.push_str(format::DONE);
                        self.phase = Phase::Finished;
                        return Ok(());
                    }
                    Some(Fault::ErrorEvent) => {
                        out.push_str(format::ERROR_EVENT);
                        out.push_str(format::DONE);
                        self.phase = Phase::Finished;
                        return Ok(());
                    }
                    Some(Fault::Truncate) => {
                        self.phase = Phase::Finished;
                        return Ok(());
                    }
                    Some(Fault::Stall) => {
                        self.phase = Phase::Stalled;
                        let far = now + Duration::from_secs(24 * 3600);
                        self.sleep.as_mut().reset(far);
                        return Ok(());
                    }
                    _ => {}
                }
            }
            let deadline = self.deadline();
            let late = now.saturating_duration_since(deadline).as_micros() as u64;
            if self.next_event == 0 {
                self.lateness.first = Some(late);
            }
            self.lateness.values.push(late);
            let n = self
                .spec
                .tokens_per_event
                .max(1)
                .min(self.spec.total_tokens - self.sent_tokens)
                .max(1);
            let mut text = String::with_capacity(8 * n as usize);
            format::token_text(&mut text, self.spec.seq, self.sent_tokens, n);
            self.sent_tokens += n;
            self.next_event += 1;
            self.prev_deadline = deadline;
            self.next_deadline = None;
            let last = self.next_event == self.events_total;
            let usage = self.spec.continuous_usage.then(|| self.usage());
            self.header()
                .content(out, &text, last.then_some(self.spec.finish), usage);
            self.state
                .output_tokens
                .fetch_add(u64::from(n), std::sync::atomic::Ordering::Relaxed);
            if last {
                if self.spec.include_usage {
                    let u = self.usage();
                    self.header().usage_only(out, u);
                }
                out.push_str(format::DONE);
                self.finish();
            }
        }
        Ok(())
    }

    fn finish(&mut self) {
        self.phase = Phase::Finished;
        self.state
            .completed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for TokenStream {
    fn drop(&mut self) {
        self.state.merge_lateness(&self.lateness);
        self.state.stream_closed();
    }
}

impl Body for TokenStream {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        loop {
            match this.phase {
                Phase::Finished => return Poll::Ready(None),
                Phase::Stalled => {
                    // hold the connection open until the client gives up
                    return match this.sleep.as_mut().poll(cx) {
                        Poll::Ready(()) => {
                            this.phase = Phase::Finished;
                            Poll::Ready(None)
                        }
                        Poll::Pending => Poll::Pending,
                    };
                }
                Phase::Running => {}
            }
            if this.role_pending {
                this.role_pending = false;
                let mut out = String::with_capacity(256);
                this.header().role(&mut out);
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
            let deadline = if this.events_total == 0 {
                this.spec.timing.start + this.spec.timing.ttft
            } else {
                this.deadline()
            };
            if Instant::now() < deadline {
                this.sleep.as_mut().reset(deadline);
                if this.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            let mut out = String::with_capacity(320);
            if let Err(e) = this.emit_due(&mut out, Instant::now()) {
                return Poll::Ready(Some(Err(e)));
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.phase == Phase::Finished
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
