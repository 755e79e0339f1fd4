//! Order-preserving parallel map over scoped std threads: tokenising a dataset
//! uses every core without another dependency, and the result does not depend
//! on the number of threads.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

thread_local! {
    /// A thread count set for what this thread builds (tests: the serial
    /// build beside the parallel one).
    static THREADS: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Threads to use: every core this process may use, at most 32.
pub(crate) fn threads() -> usize {
    THREADS
        .with(Cell::get)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(32)))
}

/// `f` run with [`map`] using `n` threads on this thread (1: serially).
#[cfg(test)]
pub(crate) fn with_threads<R>(n: usize, f: impl FnOnce() -> R) -> R {
    let before = THREADS.with(|t| t.replace(Some(n.max(1))));
    let out = f();
    THREADS.with(|t| t.set(before));
    out
}

/// `f` applied to every item, results in the items' order. Items are handed
/// out in small chunks so uneven costs (long and short prompts) stay balanced.
pub(crate) fn map<T, R, F>(items: &[T], f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    let threads = threads().min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads * 8).max(1);
    let chunks: Vec<&[T]> = items.chunks(chunk).collect();
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Vec<R>)>> = Mutex::new(Vec::with_capacity(chunks.len()));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(c) = chunks.get(i) else { break };
                    let out: Vec<R> = c.iter().map(&f).collect();
                    done.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((i, out));
                }
            });
        }
    });
    let mut done = done
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().flat_map(|(_, v)| v).collect()
}

/// Like [`map`] for fallible `f`: the first error in item order wins.
pub(crate) fn try_map<T, R, E, F>(items: &[T], f: F) -> Result<Vec<R>, E>
where
    T: Sync,
    R: Send,
    E: Send,
    F: Fn(&T) -> Result<R, E> + Sync,
{
    map(items, f).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_reports_the_first_error() {
        let items: Vec<u64> = (0..10_000).collect();
        let out = map(&items, |x| x * 2);
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        let r: Result<Vec<u64>, u64> =
            try_map(&items, |x| if x % 3000 == 2999 { Err(*x) } else { Ok(*x) });
        assert_eq!(r, Err(2999));
        assert!(map(&[] as &[u8], |x| *x).is_empty());
    }
}
