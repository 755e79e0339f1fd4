//! The fleet's concurrency cap, coordinator side: `F`, the requests of the
//! step that ended anywhere, summed from the workers' progress, and the
//! workers waiting for their next request's turn (`index < F + C`; see the
//! worker's gate for why that one number is the whole semaphore).
//!
//! A worker that is gone (lost, dropped for a failed check, or done before
//! its share was) will send nothing more, and every request it held in the
//! global order must stop holding the count, or the survivors wait forever
//! for completions that never come. One rule: **every request of a gone
//! worker counts as ended** — those it sent (in flight or not), and those it
//! never sent. For a waiting request `i`, its gone requests with a smaller
//! index are exactly the ones the semaphore would have let go before `i`, so
//! `F(i) = Σ live workers' completions + Σ gone workers' requests below i`
//! (at least their reported completions). Nothing is handed to the
//! survivors: the gone share is lost, and the result says how much.
//!
//! The coordinator also checks what workers claim here: completions never
//! exceed sends, sends never exceed the worker's planned share, and a worker
//! never sent a request before the cap let it.
//!
//! The web UI can change the cap while the step runs: from the change's
//! instant every waiting request is judged against the new cap, on the
//! workers and here alike. The workers switch at that instant on their own
//! clocks, so a send is checked against the largest cap in effect since the
//! worker's previous word, widened by [`SWITCH_SKEW`] on both sides.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

/// How far apart the coordinator and a worker may switch to a changed cap
/// (their step clocks agree to milliseconds; this is generous).
pub const SWITCH_SKEW: Duration = Duration::from_millis(500);

/// What the coordinator tells a waiting worker: `F` for its waiting
/// request, and how many of those completions were that worker's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admit {
    pub worker: u32,
    pub fleet_completed: u64,
    pub mine_included: u64,
}

/// One worker's part of the global order: it owns the indices
/// `first + k·every` for `k < planned`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub first: u64,
    pub every: u64,
    /// Requests it owns (`None`: open-ended).
    pub planned: Option<u64>,
}

impl Share {
    /// How many of its indices lie below `index`.
    fn below(&self, index: u64) -> u64 {
        let every = self.every.max(1);
        let n = if index <= self.first {
            0
        } else {
            (index - self.first).div_ceil(every)
        };
        self.planned.map_or(n, |p| n.min(p))
    }

    /// The global index of its `k`-th request (from 0).
    fn index_of(&self, k: u64) -> u64 {
        self.first
            .saturating_add(k.saturating_mul(self.every.max(1)))
    }
}

/// Why a worker's word about the cap was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapViolation {
    #[error("cap progress says {completed} requests ended of {sent} sent")]
    EndedMoreThanSent { completed: u64, sent: u64 },
    #[error("cap progress says {sent} requests sent of its {planned} planned")]
    SentMoreThanPlanned { sent: u64, planned: u64 },
    #[error(
        "cap progress says request {index} was sent while the cap of {cap} allowed up to {allowed}"
    )]
    SentBeforeItsTurn { index: u64, cap: u64, allowed: u64 },
    #[error("it waits for request {index}, which is not one of its own")]
    NotItsRequest { index: u64 },
    #[error("it sent cap messages, but it has no share of the cap")]
    NoShare,
}

/// One worker's last word: completions, sends, and when it came (after the barrier).
#[derive(Debug, Clone, Copy, Default)]
struct Word {
    done: u64,
    sent: u64,
    at: Duration,
}

/// One step's cap over the fleet.
#[derive(Debug)]
pub struct FleetCap {
    /// (from, cap): the step's cap from the barrier, then each change's, in
    /// order (changes not yet due included).
    caps: Vec<(Duration, u64)>,
    /// How many of `caps` are in effect (the last of them is the cap now).
    applied: usize,
    shares: BTreeMap<u32, Share>,
    /// Per live worker: its last word.
    progress: BTreeMap<u32, Word>,
    /// Completions summed over live workers.
    live_completed: u64,
    /// Gone workers with their last reported completions.
    gone: BTreeMap<u32, u64>,
    /// Waiting workers by the index they wait for, smallest first.
    waiting: BinaryHeap<Reverse<(u64, u32)>>,
}

impl FleetCap {
    /// A cap of `cap` requests in flight over the workers owning `shares`.
    pub fn new(cap: u32, shares: BTreeMap<u32, Share>) -> FleetCap {
        FleetCap {
            caps: vec![(Duration::ZERO, u64::from(cap.max(1)))],
            applied: 1,
            shares,
            progress: BTreeMap::new(),
            live_completed: 0,
            gone: BTreeMap::new(),
            waiting: BinaryHeap::new(),
        }
    }

    /// The load changed while it ran (an open loop's rate): no share has a
    /// count any more.
    pub fn open_ended(&mut self) {
        for s in self.shares.values_mut() {
            s.planned = None;
        }
    }

    /// The cap changes to `cap` at `at` after the barrier (the web UI's Edit).
    pub fn change(&mut self, at: Duration, cap: u32) {
        self.caps.push((at, u64::from(cap.max(1))));
    }

    /// When the next change is due, if one is waiting.
    pub fn next_switch(&self) -> Option<Duration> {
        self.caps.get(self.applied).map(|(at, _)| *at)
    }

    /// Put the changes due by `now` in effect; the waiting requests a larger
    /// cap lets go.
    pub fn switch_due(&mut self, now: Duration) -> Vec<Admit> {
        while self
            .caps
            .get(self.applied)
            .is_some_and(|(at, _)| *at <= now)
        {
            self.applied += 1;
        }
        self.release()
    }

    /// The cap in effect now.
    fn cap(&self) -> u64 {
        self.caps[..self.applied].last().map_or(1, |(_, c)| *c)
    }

    /// The largest cap in effect at some moment from `from` to `to`.
    fn largest_between(&self, from: Duration, to: Duration) -> u64 {
        let ends = self.caps.iter().skip(1).map(|(at, _)| Some(*at));
        self.caps
            .iter()
            .zip(ends.chain(std::iter::once(None)))
            .filter(|((start, _), end)| *start <= to && end.is_none_or(|e| e > from))
            .map(|((_, c), _)| *c)
            .max()
            .unwrap_or(1)
    }

    /// `F` as request `index` sees it: live completions, and every request
    /// of a gone worker below `index` (at least its reported completions).
    pub fn completed_for(&self, index: u64) -> u64 {
        let gone: u64 = self
            .gone
            .iter()
            .map(|(w, &done)| {
                let below = self.shares.get(w).map_or(0, |s| s.below(index));
                below.max(done)
            })
            .fold(0, u64::saturating_add);
        self.live_completed.saturating_add(gone)
    }

    /// Worker `w` reports, `now` after the barrier, `completed` requests
    /// ended and `sent` sent so far. Refused (nothing changes) when the
    /// claim cannot be true.
    pub fn progress(
        &mut self,
        w: u32,
        completed: u64,
        sent: u64,
        now: Duration,
    ) -> Result<Vec<Admit>, CapViolation> {
        if self.gone.contains_key(&w) {
            return Ok(Vec::new());
        }
        let share = *self.shares.get(&w).ok_or(CapViolation::NoShare)?;
        if completed > sent {
            return Err(CapViolation::EndedMoreThanSent { completed, sent });
        }
        if let Some(planned) = share.planned
            && sent > planned
        {
            return Err(CapViolation::SentMoreThanPlanned { sent, planned });
        }
        let before = self.progress.get(&w).copied().unwrap_or_default();
        let done = completed.max(before.done);
        if sent > before.sent {
            // its newest request went out after its previous word and before
            // this one: its turn had come under a cap in effect then
            let index = share.index_of(sent - 1);
            let cap = self.largest_between(
                before.at.saturating_sub(SWITCH_SKEW),
                now.saturating_add(SWITCH_SKEW),
            );
            let allowed = self.completed_for(index) - before.done + done + cap;
            if index >= allowed {
                return Err(CapViolation::SentBeforeItsTurn {
                    index,
                    cap,
                    allowed: allowed - 1,
                });
            }
        }
        self.live_completed += done - before.done;
        let word = Word {
            done,
            sent: sent.max(before.sent),
            at: now.max(before.at),
        };
        self.progress.insert(w, word);
        Ok(self.release())
    }

    /// Worker `w`'s next request, `index`, is due and waits.
    pub fn waiting(&mut self, w: u32, index: u64) -> Result<Vec<Admit>, CapViolation> {
        if self.gone.contains_key(&w) {
            return Ok(Vec::new());
        }
        let share = *self.shares.get(&w).ok_or(CapViolation::NoShare)?;
        let k = index
            .checked_sub(share.first)
            .map(|d| d / share.every.max(1));
        let owned =
            k.is_some_and(|k| share.index_of(k) == index && share.planned.is_none_or(|p| k < p));
        if !owned {
            return Err(CapViolation::NotItsRequest { index });
        }
        self.waiting.push(Reverse((index, w)));
        Ok(self.release())
    }

    /// Worker `w` is gone: every request it held counts as ended.
    pub fn gone(&mut self, w: u32) -> Vec<Admit> {
        if self.gone.contains_key(&w) {
            return Vec::new();
        }
        let done = self.progress.remove(&w).map_or(0, |p| p.done);
        self.live_completed -= done;
        self.gone.insert(w, done);
        self.waiting.retain(|Reverse((_, who))| *who != w);
        self.release()
    }

    /// Every waiting worker whose request's turn has come.
    fn release(&mut self) -> Vec<Admit> {
        let mut out = Vec::new();
        let cap = self.cap();
        while let Some(Reverse((index, w))) = self.waiting.peek().copied() {
            let completed = self.completed_for(index);
            if index >= completed.saturating_add(cap) {
                break;
            }
            self.waiting.pop();
            if out.iter().any(|a: &Admit| a.worker == w) {
                continue;
            }
            out.push(Admit {
                worker: w,
                fleet_completed: completed,
                mine_included: self.progress.get(&w).map_or(0, |p| p.done),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Duration = Duration::ZERO;

    /// `n` workers striping an `requests`-request run.
    fn striped(n: u64, requests: Option<u64>) -> BTreeMap<u32, Share> {
        (0..n)
            .map(|w| {
                let planned = requests.map(|r| r / n + u64::from(r % n > w));
                (
                    w as u32,
                    Share {
                        first: w,
                        every: n,
                        planned,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_freed_slot_goes_to_the_oldest_waiting_request_anywhere() {
        // C = 2 over workers 0 and 1: requests 0 and 1 run; 2 (w0) and 3 (w1) wait
        let mut cap = FleetCap::new(2, striped(2, None));
        assert!(cap.waiting(1, 3).unwrap().is_empty());
        assert!(cap.waiting(0, 2).unwrap().is_empty());
        // worker 1's request 1 ends: F = 1, request 2 (worker 0) goes, not 3
        let a = cap.progress(1, 1, 1, T0).unwrap();
        assert_eq!(
            a,
            [Admit {
                worker: 0,
                fleet_completed: 1,
                mine_included: 0
            }]
        );
        // worker 0's request 0 ends: F = 2, request 3 goes
        let a = cap.progress(0, 1, 2, T0).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(
            (a[0].worker, a[0].fleet_completed, a[0].mine_included),
            (1, 2, 1)
        );
    }

    #[test]
    fn a_gone_workers_requests_in_flight_free_their_slots() {
        let mut cap = FleetCap::new(2, striped(2, Some(100)));
        // worker 0 sent request 0; worker 1 sent 1 and waits for 3
        cap.progress(0, 0, 1, T0).unwrap();
        cap.progress(1, 0, 1, T0).unwrap();
        assert!(cap.waiting(1, 3).unwrap().is_empty());
        let a = cap.gone(0);
        // below 3, worker 0 owns 0 and 2: both count as ended
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].worker, a[0].fleet_completed), (1, 2));
    }

    /// The hang of issue 28: a survivor of a lost worker must get through
    /// the whole run, never waiting for the lost stripe's requests.
    #[test]
    fn survivors_run_to_the_end_after_a_worker_is_gone() {
        let (n, requests, c) = (2u64, 200u64, 8u32);
        let mut cap = FleetCap::new(c, striped(n, Some(requests)));
        cap.gone(1);
        // worker 0 runs its whole stripe one request at a time: every one is
        // admitted by what it ended itself plus the lost stripe below it
        let mut done = 0;
        for k in 0..requests / n {
            let index = k * n;
            if index >= cap.completed_for(index) + u64::from(c) {
                let a = cap.waiting(0, index).unwrap();
                assert_eq!(a.len(), 1, "request {index} never admitted");
            }
            cap.progress(0, done, k + 1, T0).unwrap();
            done += 1;
            cap.progress(0, done, k + 1, T0).unwrap();
        }
        // without the rule, F stays at worker 0's completions and index
        // 2·k waits forever once 2·k ≥ k + 8: here F is its 100 and the
        // lost stripe's 99 requests below 198
        assert_eq!(cap.completed_for(198), 100 + 99);
    }

    #[test]
    fn a_larger_cap_lets_the_waiting_go_at_its_instant() {
        let s = Duration::from_secs;
        // C = 2 over workers 0 and 1: requests 0 and 1 run; 2 and 3 wait
        let mut cap = FleetCap::new(2, striped(2, None));
        cap.progress(0, 0, 1, s(1)).unwrap();
        cap.progress(1, 0, 1, s(1)).unwrap();
        assert!(cap.waiting(0, 2).unwrap().is_empty());
        assert!(cap.waiting(1, 3).unwrap().is_empty());
        cap.change(s(10), 4);
        assert_eq!(cap.next_switch(), Some(s(10)));
        assert!(cap.switch_due(s(9)).is_empty(), "not yet");
        let a = cap.switch_due(s(10));
        assert_eq!(a.len(), 2, "{a:?}");
        assert!(a.iter().all(|a| a.fleet_completed == 0));
        assert_eq!(cap.next_switch(), None);
    }

    #[test]
    fn after_a_smaller_cap_sends_are_checked_against_it_once_every_side_switched() {
        let s = Duration::from_secs;
        let mut cap = FleetCap::new(4, striped(2, None));
        // by 5 s each worker sent its first request (indices 0 and 1)
        cap.progress(0, 0, 1, s(5)).unwrap();
        cap.progress(1, 0, 1, s(5)).unwrap();
        cap.change(s(10), 1);
        assert!(cap.switch_due(s(10)).is_empty());
        // index 2 went out between 5 s and 12 s: the cap of 4 was in effect then
        assert!(cap.progress(0, 0, 2, s(12)).is_ok());
        // index 4 went out after 12 s: only the cap of 1 (nothing ended: 4 ≥ 0 + 1)
        assert!(matches!(
            cap.progress(0, 0, 3, s(13)),
            Err(CapViolation::SentBeforeItsTurn {
                index: 4,
                cap: 1,
                ..
            })
        ));
        // a worker whose word came just before the change may have sent
        // under the old cap until its clock reached the instant
        let mut cap = FleetCap::new(4, striped(2, None));
        cap.progress(0, 0, 1, s(9) + Duration::from_millis(900))
            .unwrap();
        cap.change(s(10), 1);
        cap.switch_due(s(10));
        assert!(
            cap.progress(0, 0, 2, s(10) + Duration::from_millis(1))
                .is_ok()
        );
    }

    #[test]
    fn progress_never_counts_twice() {
        let mut cap = FleetCap::new(1, striped(1, None));
        cap.progress(0, 3, 3, T0).unwrap();
        cap.progress(0, 3, 3, T0).unwrap();
        cap.progress(0, 2, 3, T0).unwrap();
        assert_eq!(cap.completed_for(u64::MAX), 3);
    }

    #[test]
    fn impossible_claims_are_refused_and_change_nothing() {
        let mut cap = FleetCap::new(8, striped(2, Some(400)));
        assert_eq!(
            cap.progress(0, 5, 4, T0),
            Err(CapViolation::EndedMoreThanSent {
                completed: 5,
                sent: 4
            })
        );
        assert_eq!(
            cap.progress(0, 1 << 62, 1 << 62, T0),
            Err(CapViolation::SentMoreThanPlanned {
                sent: 1 << 62,
                planned: 200
            })
        );
        // 8 in flight fleet-wide at most: worker 0's 5th request is index 8,
        // allowed only once a request ended
        assert!(cap.progress(0, 0, 4, T0).is_ok());
        assert!(matches!(
            cap.progress(0, 0, 5, T0),
            Err(CapViolation::SentBeforeItsTurn { index: 8, .. })
        ));
        assert_eq!(
            cap.waiting(1, 4),
            Err(CapViolation::NotItsRequest { index: 4 })
        );
        assert_eq!(
            cap.waiting(1, 401),
            Err(CapViolation::NotItsRequest { index: 401 })
        );
        assert_eq!(cap.completed_for(u64::MAX), 0);
        assert_eq!(cap.progress(7, 0, 0, T0), Err(CapViolation::NoShare));
    }
}
