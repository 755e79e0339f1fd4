//! A simulated prefix cache. Prompts are split into 16-word blocks (vLLM's
//! default block size, one mock token per word), each named by the hash of
//! the prompt up to its end, as vLLM chains block hashes. A request's hit is
//! the run of leading blocks already cached; like vLLM, the last block of a
//! fully cached prompt is recomputed.

use std::collections::HashSet;
use std::sync::Mutex;

/// Tokens per cache block.
pub(crate) const BLOCK: usize = 16;
/// Blocks remembered before the cache is emptied (bounds the mock's memory).
const CAPACITY: usize = 1 << 20;

/// Block hashes seen so far.
#[derive(Debug, Default)]
pub(crate) struct PrefixCache {
    blocks: Mutex<HashSet<u64>>,
}

impl PrefixCache {
    /// Look a prompt up and cache its blocks; returns the prompt tokens served from the cache.
    pub fn lookup(&self, prompt: &str) -> u32 {
        let mut hashes = Vec::new();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut words = 0usize;
        for w in prompt.split_whitespace() {
            for b in w.bytes().chain(std::iter::once(b' ')) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            words += 1;
            if words.is_multiple_of(BLOCK) {
                hashes.push(h);
            }
        }
        let Ok(mut blocks) = self.blocks.lock() else {
            return 0;
        };
        let mut hits = hashes.iter().take_while(|b| blocks.contains(b)).count();
        if hits > 0 && hits * BLOCK >= words {
            hits -= 1;
        }
        if blocks.len() + hashes.len() > CAPACITY {
            blocks.clear();
        }
        blocks.extend(hashes);
        (hits * BLOCK) as u32
    }

    /// Forget every block, as a server's prefix-cache reset does.
    pub fn clear(&self) {
        if let Ok(mut blocks) = self.blocks.lock() {
            blocks.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: usize, tag: &str) -> String {
        (0..n).map(|i| format!("{tag}{i} ")).collect()
    }

    #[test]
    fn shared_leading_blocks_hit() {
        let c = PrefixCache::default();
        let prefix = words(40, "p");
        assert_eq!(c.lookup(&format!("{prefix}{}", words(10, "a"))), 0);
        // 40 shared words = 2 whole blocks (the third block differs after word 40)
        assert_eq!(c.lookup(&format!("{prefix}{}", words(10, "b"))), 32);
        assert_eq!(c.lookup(&words(50, "z")), 0);
        // an identical 32-word prompt: one block hit, the last recomputed
        let same = words(32, "q");
        assert_eq!(c.lookup(&same), 0);
        assert_eq!(c.lookup(&same), 16);
    }
}
