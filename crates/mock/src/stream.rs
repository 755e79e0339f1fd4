//! The timed response body: every token at an absolute deadline from arrival.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::{Instant, Sleep};

use crate::Fault;
use crate::clock::{PreciseClock, Wait};
use crate::stats::{State, StreamLateness};
use crate::wire::{Api, Reply};

/// Timing of one response, fixed at arrival.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub start: Instant,
    pub ttft: Duration,
    pub event_gap: Duration,
    pub jitter: Duration,
}

/// Everything one response needs.
pub(crate) struct StreamSpec {
    /// What its events share, in its API's format.
    pub reply: Reply,
    pub timing: Timing,
    pub fault: Option<Fault>,
    pub seed: u64,
    /// A readiness probe: kept out of the run's ground truth.
    pub probe: bool,
    /// KV-cache tokens reserved at arrival, released at the end.
    pub kv_reserved: u64,
    pub kv_capacity: u64,
    /// Speculative tokens proposed per step (0 = none).
    pub spec_tokens: u32,
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
    opening_pending: bool,
    phase: Phase,
    /// tokio's timer: for a stall, and for deadlines when there is no precise clock.
    sleep: Pin<Box<Sleep>>,
    clock: PreciseClock,
    wait: Wait,
    rng: Option<ChaCha8Rng>,
    lateness: StreamLateness,
    state: Arc<State>,
}

impl TokenStream {
    pub fn new(spec: StreamSpec, state: Arc<State>, clock: PreciseClock) -> Self {
        let per = spec.reply.tokens_per_event.max(1);
        let events_total = if spec.fault == Some(Fault::Empty) {
            0
        } else {
            spec.reply.total_tokens.div_ceil(per).max(1)
        };
        let fault_at_event = match spec.fault {
            Some(Fault::Stall) => 1,
            Some(_) => (events_total / 2).max(1),
            None => u32::MAX,
        };
        let rng = (!spec.timing.jitter.is_zero()).then(|| {
            ChaCha8Rng::seed_from_u64(
                spec.seed ^ spec.reply.seq.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            )
        });
        state.stream_opened();
        let start = spec.timing.start;
        Self {
            opening_pending: true,
            spec,
            events_total,
            next_event: 0,
            sent_tokens: 0,
            fault_at_event,
            next_deadline: None,
            prev_deadline: start,
            phase: Phase::Running,
            sleep: Box::pin(tokio::time::sleep_until(start)),
            clock,
            wait: Wait::default(),
            rng,
            lateness: StreamLateness::default(),
            state,
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

    /// Append every event due by `now` to `out`; returns Err to reset the connection.
    fn emit_due(&mut self, out: &mut String, now: Instant) -> Result<(), io::Error> {
        if self.events_total == 0 {
            self.spec.reply.empty(out);
            self.finish(now, false);
            return Ok(());
        }
        while self.next_event < self.events_total && self.deadline() <= now {
            if self.next_event == self.fault_at_event {
                match self.spec.fault {
                    Some(Fault::Reset) => return Err(self.reset()),
                    Some(Fault::Malformed) => {
                        self.spec.reply.malformed(out);
                        self.phase = Phase::Finished;
                        return Ok(());
                    }
                    Some(Fault::ErrorEvent) => {
                        self.spec.reply.error_event(out);
                        self.phase = Phase::Finished;
                        return Ok(());
                    }
                    // Triton streams have no end marker: the only early end a
                    // client can tell from completion is a broken connection
                    Some(Fault::Truncate) if self.spec.reply.api == Api::Triton => {
                        return Err(self.reset());
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
                self.state
                    .server
                    .ttft
                    .observe(now.saturating_duration_since(self.spec.timing.start));
            }
            self.lateness.values.push(late);
            let n = self
                .spec
                .reply
                .tokens_per_event
                .max(1)
                .min(self.spec.reply.total_tokens - self.sent_tokens)
                .max(1);
            let first = self.sent_tokens;
            self.sent_tokens += n;
            self.next_event += 1;
            self.prev_deadline = deadline;
            self.next_deadline = None;
            let last = self.next_event == self.events_total;
            self.spec.reply.step(out, first, n, last);
            self.count_step(n, first > 0);
            if last {
                self.spec.reply.close(out);
                self.finish(now, !self.spec.reply.eos);
            }
        }
        Ok(())
    }

    fn reset(&mut self) -> io::Error {
        self.phase = Phase::Finished;
        io::Error::new(
            io::ErrorKind::ConnectionReset,
            "mock injected connection reset",
        )
    }

    /// Counters for `n` tokens just sent; steps after the first are speculative ones.
    fn count_step(&self, n: u32, decode: bool) {
        let st = &self.state;
        st.kv_change(u64::from(n), true, self.spec.kv_capacity);
        st.server
            .generation_tokens
            .fetch_add(u64::from(n), Ordering::Relaxed);
        if decode {
            st.server.all.spec_step(n, self.spec.spec_tokens);
        }
        if !self.spec.probe {
            st.output_tokens.fetch_add(u64::from(n), Ordering::Relaxed);
            if decode {
                st.run.spec_step(n, self.spec.spec_tokens);
            }
        }
    }

    fn finish(&mut self, now: Instant, length: bool) {
        self.phase = Phase::Finished;
        let st = &self.state;
        st.server
            .e2e
            .observe(now.saturating_duration_since(self.spec.timing.start));
        let reason = if length {
            &st.server.finished_length
        } else {
            &st.server.finished_stop
        };
        reason.fetch_add(1, Ordering::Relaxed);
        if !self.spec.probe {
            st.completed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for TokenStream {
    fn drop(&mut self) {
        if !self.spec.probe {
            self.state.merge_lateness(&self.lateness);
        }
        let held = u64::from(self.spec.reply.prompt_tokens) + u64::from(self.sent_tokens);
        self.state.kv_change(held, false, self.spec.kv_capacity);
        self.state
            .kv_reserved
            .fetch_sub(self.spec.kv_reserved, Ordering::Relaxed);
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
            if this.opening_pending {
                this.opening_pending = false;
                let mut out = String::with_capacity(256);
                this.spec.reply.opening(&mut out);
                if !out.is_empty() {
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                }
            }
            let deadline = if this.events_total == 0 {
                this.spec.timing.start + this.spec.timing.ttft
            } else {
                this.deadline()
            };
            if this
                .wait
                .poll_until(&this.clock, &mut this.sleep, deadline, cx)
                .is_pending()
            {
                return Poll::Pending;
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
