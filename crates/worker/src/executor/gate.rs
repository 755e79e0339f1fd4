//! The fleet's concurrency cap, as one FIFO semaphore over every worker.
//!
//! Requests are admitted in the order of their global index, which is the
//! order of their scheduled times. With one semaphore of `C` permits taken in
//! that order, request `i` (once due) may start exactly when `i < F + C`,
//! where `F` counts the requests of the step that have ended anywhere, with
//! any outcome: requests `0..F+C` have then been admitted and at most `C` of
//! them are still in flight. So a worker needs to know one number, `F`.
//!
//! It knows its own completions at once and the others' from the
//! coordinator, which sums every worker's progress and tells a waiting worker
//! when its next request's turn has come ([`Gate::admitted`]). A worker
//! that can see its request's turn from what it already knows sends it
//! without asking: on one worker that is every request, and the gate is a
//! plain local FIFO semaphore. Nothing here runs per token.
//!
//! The web UI can change the cap while the step runs ([`Gate::set_cap`]):
//! each worker switches at the change's instant on the step's clock, as the
//! coordinator does, and from then on every request not yet admitted waits
//! for `i < F + C'` (the semaphore's permits changed at that instant).
//! Around the instant the two sides may disagree for a moment (their clocks
//! differ by milliseconds): a word from the coordinator that does not yet
//! admit the waiting request makes the worker ask again, so neither side
//! waits for the other.

use std::sync::Mutex;

use tokio::sync::{Notify, mpsc};

/// What a worker tells the coordinator about the fleet cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateMessage {
    /// Requests of this worker that ended so far (any outcome), and those it
    /// sent: the coordinator's sum of the first is `F`.
    Progress { completed: u64, sent: u64 },
    /// This worker's next request, `index`, is due but not yet admitted.
    Waiting { index: u64 },
}

#[derive(Debug, Default)]
struct State {
    /// `F` as the coordinator last said it.
    fleet_completed: u64,
    /// This worker's completions the coordinator's `F` included.
    mine_included: u64,
    /// This worker's completions so far.
    mine: u64,
    /// Requests this worker sent.
    sent: u64,
    /// The index the coordinator was last told this worker waits for.
    asked_for: Option<u64>,
    /// The step ended: nothing waits any more.
    closed: bool,
    /// Requests in flight at most, fleet-wide, as of now.
    cap: u64,
}

impl State {
    /// The least `F` can be: what the coordinator said plus this worker's
    /// completions it had not yet counted.
    fn completed_at_least(&self) -> u64 {
        self.fleet_completed + self.mine.saturating_sub(self.mine_included)
    }
}

/// One worker's view of the fleet-wide cap of one step.
#[derive(Debug)]
pub struct Gate {
    state: Mutex<State>,
    changed: Notify,
    /// Where progress goes when other workers share the cap (`None`: this
    /// worker is the whole fleet).
    uplink: Option<mpsc::UnboundedSender<GateMessage>>,
}

impl Gate {
    /// A cap of `cap` requests in flight, shared with other workers through
    /// `uplink` when given.
    pub fn new(cap: u32, uplink: Option<mpsc::UnboundedSender<GateMessage>>) -> Gate {
        Gate {
            state: Mutex::new(State {
                cap: u64::from(cap.max(1)),
                ..State::default()
            }),
            changed: Notify::new(),
            uplink,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn tell(&self, m: GateMessage) {
        if let Some(up) = &self.uplink {
            // the link is gone only when the worker is stopping anyway
            let _ = up.send(m);
        }
    }

    /// Wait until request `index` may start; false if the gate closed first.
    /// Callers admit their requests in index order.
    pub async fn admit(&self, index: u64) -> bool {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut s = self.lock();
                if s.closed {
                    return false;
                }
                if index < s.completed_at_least() + s.cap {
                    s.sent += 1;
                    return true;
                }
                if s.asked_for != Some(index) {
                    s.asked_for = Some(index);
                    drop(s);
                    self.tell(GateMessage::Waiting { index });
                }
            }
            changed.await;
        }
    }

    /// One admitted request ended (any outcome).
    pub fn finished(&self) {
        let (completed, sent) = {
            let mut s = self.lock();
            s.mine += 1;
            (s.mine, s.sent)
        };
        self.tell(GateMessage::Progress { completed, sent });
        self.changed.notify_waiters();
    }

    /// The coordinator's word: `fleet_completed` requests of the step ended
    /// fleet-wide, `mine_included` of them this worker's.
    pub fn admitted(&self, fleet_completed: u64, mine_included: u64) {
        {
            let mut s = self.lock();
            if fleet_completed >= s.fleet_completed {
                s.fleet_completed = fleet_completed;
                s.mine_included = mine_included.max(s.mine_included);
            }
            // an answer that does not yet admit the waiting request (the
            // sides' caps differed for a moment at a change) is asked again
            s.asked_for = None;
        }
        self.changed.notify_waiters();
    }

    /// The cap changed (the web UI's Edit, at its instant): requests not yet
    /// admitted wait for `i < F + cap` from now on. The coordinator hears
    /// this worker's counts at once, so its `F` is fresh for the new cap.
    pub fn set_cap(&self, cap: u32) {
        let (completed, sent) = {
            let mut s = self.lock();
            s.cap = u64::from(cap.max(1));
            s.asked_for = None;
            (s.mine, s.sent)
        };
        self.tell(GateMessage::Progress { completed, sent });
        self.changed.notify_waiters();
    }

    /// The step is over: release every waiter.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    async fn soon(gate: &Gate, index: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(50), gate.admit(index))
            .await
            .unwrap_or(false)
    }

    #[tokio::test]
    async fn alone_it_is_a_fifo_semaphore_of_cap_permits() {
        let gate = Gate::new(2, None);
        assert!(soon(&gate, 0).await);
        assert!(soon(&gate, 1).await);
        assert!(!soon(&gate, 2).await, "two in flight");
        gate.finished();
        assert!(soon(&gate, 2).await);
        assert!(!soon(&gate, 3).await);
    }

    #[tokio::test]
    async fn shared_it_asks_once_and_waits_for_the_coordinator() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        // worker 1 of 2: its requests are 1, 3, 5, ...
        let gate = Arc::new(Gate::new(2, Some(tx)));
        assert!(soon(&gate, 1).await, "1 < 0 + 2");
        let waiting = {
            let g = gate.clone();
            tokio::spawn(async move { g.admit(3).await })
        };
        assert_eq!(rx.recv().await, Some(GateMessage::Waiting { index: 3 }));
        // its own request ends: F >= 1, 3 < 1 + 2 is still false
        gate.finished();
        assert_eq!(
            rx.recv().await,
            Some(GateMessage::Progress {
                completed: 1,
                sent: 1
            })
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        // the coordinator: 2 ended fleet-wide, 1 of them this worker's
        gate.admitted(2, 1);
        assert!(waiting.await.unwrap());
        assert!(rx.try_recv().is_err(), "asked once only");
    }

    #[tokio::test]
    async fn its_own_completions_count_before_the_coordinator_hears_of_them() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let gate = Gate::new(1, Some(tx));
        gate.admitted(5, 2);
        // F >= 5: index 5 may go (5 < 5 + 1)
        assert!(soon(&gate, 5).await);
        assert!(!soon(&gate, 6).await);
        // mine now 1 (but the coordinator counted 2 already: no double count)
        gate.finished();
        assert!(!soon(&gate, 6).await);
        gate.finished();
        gate.finished();
        // mine 3, 2 included: F >= 5 + 1
        assert!(soon(&gate, 6).await);
        // a stale word never moves F back
        gate.admitted(4, 1);
        assert!(soon(&gate, 6).await);
    }

    #[tokio::test]
    async fn a_changed_cap_holds_from_its_instant_for_every_request_not_yet_admitted() {
        let gate = Arc::new(Gate::new(2, None));
        assert!(soon(&gate, 0).await);
        assert!(soon(&gate, 1).await);
        let g = gate.clone();
        let waiting = tokio::spawn(async move { g.admit(2).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished(), "two in flight of 2");
        // a larger cap admits the waiting request at once
        gate.set_cap(4);
        assert!(waiting.await.unwrap());
        assert!(soon(&gate, 3).await);
        assert!(!soon(&gate, 4).await, "four in flight of 4");
        // a smaller one: the four in flight drain to below 1 before the next goes
        gate.set_cap(1);
        for _ in 0..3 {
            gate.finished();
            assert!(!soon(&gate, 4).await, "still more in flight than 1");
        }
        gate.finished();
        assert!(soon(&gate, 4).await);
    }

    #[tokio::test]
    async fn an_answer_that_does_not_admit_is_asked_again() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gate = Arc::new(Gate::new(1, Some(tx)));
        let g = gate.clone();
        let waiting = tokio::spawn(async move { g.admit(3).await });
        assert_eq!(rx.recv().await, Some(GateMessage::Waiting { index: 3 }));
        // the coordinator, on a larger cap for a moment, says F = 1: 3 < 1 + 1 is false here
        gate.admitted(1, 0);
        assert_eq!(rx.recv().await, Some(GateMessage::Waiting { index: 3 }));
        gate.admitted(3, 0);
        assert!(waiting.await.unwrap());
    }

    #[tokio::test]
    async fn closing_releases_waiters() {
        let gate = Arc::new(Gate::new(1, None));
        assert!(soon(&gate, 0).await);
        let g = gate.clone();
        let waiting = tokio::spawn(async move { g.admit(1).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        gate.close();
        assert!(!waiting.await.unwrap());
    }
}
