//! Choosing a replica for each request.
//!
//! Round robin and random depend only on the request's global index (and the
//! scenario seed), so every worker count sends each request to the same
//! replica. Least-in-flight looks at this worker's own requests in flight per
//! replica: workers do not share counts, so with N workers each balances its
//! own share (N times the imbalance of one global view at most).

use cicada_plan::Routing;

use crate::inflight::ScopeTrackers;

/// splitmix64: a well-mixed 64-bit hash of a request index.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The replica for request `index` among `in_flight.targets()` replicas.
pub(super) fn pick(routing: Routing, index: u64, seed: u64, in_flight: &ScopeTrackers) -> usize {
    let n = in_flight.targets().max(1);
    match routing {
        Routing::RoundRobin => (index % n as u64) as usize,
        Routing::Random => (mix(seed ^ mix(index)) % n as u64) as usize,
        Routing::LeastInFlight => {
            // ties go round robin, so an idle fleet still spreads evenly
            let start = (index % n as u64) as usize;
            (0..n)
                .map(|k| (start + k) % n)
                .min_by_key(|t| in_flight.load(*t))
                .unwrap_or(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trackers(n: usize) -> ScopeTrackers {
        ScopeTrackers::new(n, 2)
    }

    #[test]
    fn round_robin_and_random_depend_only_on_the_index() {
        let t = trackers(3);
        let rr: Vec<usize> = (0..6)
            .map(|i| pick(Routing::RoundRobin, i, 0, &t))
            .collect();
        assert_eq!(rr, vec![0, 1, 2, 0, 1, 2]);
        let a: Vec<usize> = (0..300).map(|i| pick(Routing::Random, i, 7, &t)).collect();
        let b: Vec<usize> = (0..300).map(|i| pick(Routing::Random, i, 7, &t)).collect();
        assert_eq!(a, b);
        for r in 0..3 {
            let share = a.iter().filter(|x| **x == r).count();
            assert!((70..130).contains(&share), "replica {r} got {share} of 300");
        }
        let other: Vec<usize> = (0..300).map(|i| pick(Routing::Random, i, 8, &t)).collect();
        assert_ne!(a, other, "the seed changes the choice");
    }

    #[test]
    fn least_in_flight_avoids_busy_replicas() {
        let t = trackers(3);
        t.get(0, 0).change(0, true, false);
        t.get(0, 1).change(0, true, false);
        t.get(1, 0).change(0, true, false);
        assert_eq!(pick(Routing::LeastInFlight, 0, 0, &t), 2);
        t.get(2, 1).change(0, true, false);
        t.get(2, 1).change(0, true, false);
        assert_eq!(pick(Routing::LeastInFlight, 0, 0, &t), 1);
        // ties rotate with the index
        let idle = trackers(2);
        assert_eq!(pick(Routing::LeastInFlight, 0, 0, &idle), 0);
        assert_eq!(pick(Routing::LeastInFlight, 1, 0, &idle), 1);
    }
}
