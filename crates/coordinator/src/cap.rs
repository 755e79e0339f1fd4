//! The fleet's concurrency cap, coordinator side: `F`, the requests of the
//! step that ended anywhere, summed from the workers' progress, and the
//! workers waiting for their next request's turn (`index < F + C`; see the
//! worker's gate for why that one number is the whole semaphore).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// What the coordinator tells a waiting worker: `F`, and how many of those
/// completions were that worker's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admit {
    pub worker: u32,
    pub fleet_completed: u64,
    pub mine_included: u64,
}

/// One step's cap over the fleet.
#[derive(Debug)]
pub struct FleetCap {
    cap: u64,
    completed: u64,
    /// Per worker: completions and sends as last reported.
    progress: BTreeMap<u32, (u64, u64)>,
    /// Waiting workers by the index they wait for, smallest first.
    waiting: BinaryHeap<Reverse<(u64, u32)>>,
}

impl FleetCap {
    /// A cap of `cap` requests in flight over the whole fleet.
    pub fn new(cap: u32) -> FleetCap {
        FleetCap {
            cap: u64::from(cap.max(1)),
            completed: 0,
            progress: BTreeMap::new(),
            waiting: BinaryHeap::new(),
        }
    }

    /// Requests of the step that ended anywhere, as far as reported.
    #[cfg(test)]
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Worker `w` reports `completed` requests ended and `sent` sent so far.
    pub fn progress(&mut self, w: u32, completed: u64, sent: u64) -> Vec<Admit> {
        let entry = self.progress.entry(w).or_insert((0, 0));
        if completed > entry.0 {
            self.completed += completed - entry.0;
            entry.0 = completed;
        }
        entry.1 = entry.1.max(sent);
        self.release()
    }

    /// Worker `w`'s next request, `index`, is due and waits.
    pub fn waiting(&mut self, w: u32, index: u64) -> Vec<Admit> {
        self.waiting.push(Reverse((index, w)));
        self.release()
    }

    /// Worker `w` is gone: its requests still in flight will never report
    /// ending, so they count as ended (their slots free up for the rest).
    pub fn lost(&mut self, w: u32) -> Vec<Admit> {
        let (completed, sent) = self.progress.get(&w).copied().unwrap_or((0, 0));
        let in_flight = sent.saturating_sub(completed);
        self.completed += in_flight;
        self.progress.insert(w, (sent, sent));
        self.waiting.retain(|Reverse((_, who))| *who != w);
        self.release()
    }

    /// Every waiting worker whose request's turn has come.
    fn release(&mut self) -> Vec<Admit> {
        let mut out = Vec::new();
        while let Some(Reverse((index, w))) = self.waiting.peek().copied() {
            if index >= self.completed + self.cap {
                break;
            }
            self.waiting.pop();
            if out.iter().any(|a: &Admit| a.worker == w) {
                continue;
            }
            out.push(Admit {
                worker: w,
                fleet_completed: self.completed,
                mine_included: self.progress.get(&w).map_or(0, |p| p.0),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_slot_goes_to_the_oldest_waiting_request_anywhere() {
        // C = 2 over workers 0 and 1: requests 0 and 1 run; 2 (w0) and 3 (w1) wait
        let mut cap = FleetCap::new(2);
        assert!(cap.waiting(1, 3).is_empty());
        assert!(cap.waiting(0, 2).is_empty());
        // worker 1's request 1 ends: F = 1, request 2 (worker 0) goes, not 3
        let a = cap.progress(1, 1, 1);
        assert_eq!(
            a,
            [Admit {
                worker: 0,
                fleet_completed: 1,
                mine_included: 0
            }]
        );
        // worker 0's request 0 ends: F = 2, request 3 goes
        let a = cap.progress(0, 1, 2);
        assert_eq!(a.len(), 1);
        assert_eq!(
            (a[0].worker, a[0].fleet_completed, a[0].mine_included),
            (1, 2, 1)
        );
    }

    #[test]
    fn a_lost_workers_requests_in_flight_free_their_slots() {
        let mut cap = FleetCap::new(2);
        cap.progress(0, 0, 2);
        assert!(cap.waiting(1, 2).is_empty());
        let a = cap.lost(0);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].worker, 1);
        assert_eq!(cap.completed(), 2);
    }

    #[test]
    fn progress_never_counts_twice() {
        let mut cap = FleetCap::new(1);
        cap.progress(0, 3, 3);
        cap.progress(0, 3, 3);
        cap.progress(0, 2, 3);
        assert_eq!(cap.completed(), 3);
    }
}
