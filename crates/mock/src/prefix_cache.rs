//! A model of a server's prefix cache, so prefix-cache workloads can be tested
//! end to end: prompts are cut into blocks of `block` words (the mock's
//! tokens), each block is identified by a hash of every word up to its end,
//! and a request's cached tokens are its leading blocks seen before, as vLLM's
//! automatic prefix caching counts whole blocks. Reported as
//! `usage.prompt_tokens_details.cached_tokens`.

use std::collections::HashSet;
use std::sync::Mutex;

/// Blocks remembered before the cache is emptied (a crude eviction bound).
const MAX_BLOCKS: usize = 4_000_000;

/// Seen prefix blocks.
pub(crate) struct PrefixCache {
    block: usize,
    seen: Mutex<HashSet<u64>>,
}

impl PrefixCache {
    /// A cache of `block`-word blocks.
    pub fn new(block: u32) -> Self {
        Self {
            block: block.max(1) as usize,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// Cached tokens of `prompt` (its leading blocks seen before), then remember its blocks.
    pub fn lookup_and_insert(&self, prompt: &str) -> u32 {
        let mut keys = Vec::new();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (i, word) in prompt.split_whitespace().enumerate() {
            for b in word.as_bytes().iter().chain(b" ") {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            if (i + 1) % self.block == 0 {
                keys.push(h);
            }
        }
        let Ok(mut seen) = self.seen.lock() else {
            return 0;
        };
        let hits = keys.iter().take_while(|k| seen.contains(*k)).count();
        if seen.len() + keys.len() > MAX_BLOCKS {
            seen.clear();
        }
        seen.extend(keys);
        u32::try_from(hits * self.block).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MockConfig, MockServer};

    #[test]
    fn leading_blocks_seen_before_are_cached() {
        let c = PrefixCache::new(4);
        let a = "a b c d e f g h i j";
        assert_eq!(c.lookup_and_insert(a), 0);
        assert_eq!(
            c.lookup_and_insert(a),
            8,
            "two whole blocks; the rest is partial"
        );
        assert_eq!(c.lookup_and_insert("a b c d e f g x y z w"), 4);
        assert_eq!(
            c.lookup_and_insert("z b c d e f g h"),
            0,
            "a changed first word breaks every block"
        );
        assert_eq!(c.lookup_and_insert("a  b\nc d"), 4, "words, not spacing");
    }

    #[tokio::test]
    async fn usage_reports_cached_tokens_and_the_log_records_them() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mock = MockServer::start(
            MockConfig {
                ttft_ms: 0.0,
                itl_ms: 0.0,
                prefix_cache_block: 2,
                ..MockConfig::default()
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let url = format!("{}/v1/chat/completions", mock.url());
        let mut cached = Vec::new();
        for content in ["one two three four five", "one two three four six"] {
            let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": content}],
                "max_tokens": 2, "stream": true, "stream_options": {"include_usage": true}});
            let text = reqwest::Client::new()
                .post(&url)
                .json(&body)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let usage = text
                .split("\n\n")
                .filter_map(|e| e.strip_prefix("data: "))
                .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
                .find(|v| v["choices"].as_array().is_some_and(Vec::is_empty))
                .unwrap();
            cached.push(usage["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64());
        }
        assert_eq!(cached, [Some(0), Some(4)]);
        let log: Vec<Option<u32>> = mock.requests().iter().map(|r| r.cached_tokens).collect();
        assert_eq!(log, [Some(0), Some(4)]);
    }
}
