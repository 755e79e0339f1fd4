//! Seeded shuffling of streams too large to hold: every record gets a key from
//! the seed and its position, and only the `n` smallest keys are kept. The
//! result is the first `n` records of a uniformly shuffled order, without
//! holding the rest.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Sort key of record `index`: a seeded hash (shuffled) or the position itself.
pub(crate) fn order_key(shuffle: bool, seed: u64, index: u64) -> (u64, u64) {
    if shuffle {
        (
            mix(seed ^ mix(index.wrapping_add(0x5851_f42d_4c95_7f2d))),
            index,
        )
    } else {
        (index, index)
    }
}

/// splitmix64's finaliser: a bijective 64-bit mix.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Keyed<T> {
    key: (u64, u64),
    item: T,
}

impl<T> PartialEq for Keyed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<T> Eq for Keyed<T> {}

impl<T> PartialOrd for Keyed<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Keyed<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

/// The `n` items with the smallest keys seen so far.
pub(crate) struct Smallest<T> {
    n: usize,
    heap: BinaryHeap<Keyed<T>>,
}

impl<T> Smallest<T> {
    /// Keep at most `n` items.
    pub fn new(n: u64) -> Self {
        Self {
            n: usize::try_from(n).unwrap_or(usize::MAX).max(1),
            heap: BinaryHeap::new(),
        }
    }

    /// Whether an item with `key` would be kept (so it is worth preparing).
    pub fn wants(&self, key: (u64, u64)) -> bool {
        self.heap.len() < self.n || self.heap.peek().is_some_and(|top| key < top.key)
    }

    /// Offer an item; returns true when one item (this one or an evicted one) left the selection.
    pub fn offer(&mut self, key: (u64, u64), item: T) -> bool {
        if self.heap.len() < self.n {
            self.heap.push(Keyed { key, item });
            return false;
        }
        if self.wants(key) {
            self.heap.pop();
            self.heap.push(Keyed { key, item });
        }
        true
    }

    /// The kept items in key order.
    pub fn into_sorted(self) -> Vec<T> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|k| k.item)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_n_of_the_shuffled_order() {
        for shuffle in [true, false] {
            let mut all: Vec<(u64, u64)> = (0..5000).map(|i| order_key(shuffle, 7, i)).collect();
            let mut s = Smallest::new(100);
            let mut dropped = 0;
            for k in &all {
                dropped += usize::from(s.offer(*k, k.1));
            }
            assert_eq!(dropped, 4900);
            all.sort_unstable();
            let want: Vec<u64> = all.iter().take(100).map(|k| k.1).collect();
            assert_eq!(s.into_sorted(), want);
        }
        let a: Vec<u64> = (0..50).map(|i| order_key(true, 1, i).0).collect();
        let b: Vec<u64> = (0..50).map(|i| order_key(true, 2, i).0).collect();
        assert_ne!(a, b, "the seed changes the order");
    }
}
