//! Sharding arithmetic: one global run split over workers so that the server
//! sees the same load for any worker count.
//!
//! Open loop: request `i` goes to worker `i mod N` (striping); concurrency
//! slots split as evenly as integers allow. Closed loop: user `u` lives on
//! worker `u mod N`. Each worker receives only the pool entries it will use.

use std::collections::BTreeSet;

/// Workers that receive requests: all of them, or `max_concurrency` if that is fewer
/// (a worker with no concurrency slot could never send its stripe).
pub fn active_workers(workers: u32, max_concurrency: Option<u32>) -> u32 {
    match max_concurrency {
        Some(c) => workers.min(c).max(1),
        None => workers.max(1),
    }
}

/// Concurrency slots of stripe `index` of `count`: `⌊C/count⌋ + (index < C mod count)`.
pub fn slots_for(max_concurrency: u32, index: u32, count: u32) -> u32 {
    let count = count.max(1);
    max_concurrency / count + u32::from(index < max_concurrency % count)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Whether stripe `index` of `count` ever uses pool entry `id` of a pool of `pool_size`.
///
/// Request `i` uses entry `i mod P`, and the stripe holds `i ≡ index (mod count)`,
/// so it reaches exactly the entries congruent to `index` modulo `gcd(count, P)`.
pub fn stripe_uses(id: u64, index: u32, count: u32, pool_size: u64) -> bool {
    let g = gcd(u64::from(count.max(1)), pool_size.max(1));
    id % g == u64::from(index) % g
}

/// Pool entries stripe `index` of `count` uses when the run has `requests`
/// requests (`None`: cycling without end, as a duration-bound run may).
pub fn stripe_entries(
    index: u32,
    count: u32,
    requests: Option<u64>,
    pool_size: u64,
) -> BTreeSet<u64> {
    let (count, index, p) = (u64::from(count.max(1)), u64::from(index), pool_size.max(1));
    let g = gcd(count, p);
    let reachable = p / g;
    match requests {
        None => (0..p).filter(|id| id % g == index % g).collect(),
        Some(r) => {
            let mut out = BTreeSet::new();
            let mut i = index;
            while i < r && (out.len() as u64) < reachable {
                out.insert(i % p);
                i += count;
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_split_as_evenly_as_integers_allow() {
        for (c, n) in [(64u32, 8u32), (10, 3), (7, 7), (5, 2)] {
            let slots: Vec<u32> = (0..n).map(|w| slots_for(c, w, n)).collect();
            assert_eq!(slots.iter().sum::<u32>(), c);
            let (lo, hi) = (slots.iter().min().unwrap(), slots.iter().max().unwrap());
            assert!(hi - lo <= 1, "{slots:?}");
        }
        assert_eq!(active_workers(8, Some(3)), 3);
        assert_eq!(active_workers(8, None), 8);
        assert_eq!(active_workers(2, Some(64)), 2);
    }

    #[test]
    fn stripe_entries_are_exactly_the_ones_used() {
        for (count, p, r) in [
            (4u32, 10u64, Some(7u64)),
            (3, 9, Some(100)),
            (8, 1000, Some(1000)),
            (5, 7, None),
            (4, 23, Some(23)),
        ] {
            for index in 0..count {
                let limit = r.unwrap_or(u64::from(count) * p * 2);
                let brute: BTreeSet<u64> = (0..limit)
                    .filter(|i| i % u64::from(count) == u64::from(index))
                    .map(|i| i % p)
                    .collect();
                assert_eq!(
                    stripe_entries(index, count, r, p),
                    brute,
                    "count={count} p={p} r={r:?} index={index}"
                );
            }
        }
    }

    #[test]
    fn stripe_pool_needs_match_brute_force() {
        for (count, p) in [(4u32, 10u64), (3, 9), (8, 1000), (5, 7)] {
            for index in 0..count {
                let brute: BTreeSet<u64> = (0..count as u64 * p * 2)
                    .filter(|i| i % count as u64 == index as u64)
                    .map(|i| i % p)
                    .collect();
                let ours: BTreeSet<u64> = (0..p)
                    .filter(|id| stripe_uses(*id, index, count, p))
                    .collect();
                assert_eq!(brute, ours, "count={count} p={p} index={index}");
            }
        }
    }
}
