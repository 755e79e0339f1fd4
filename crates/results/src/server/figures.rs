//! The servers' view of a run as results hold it: per-replica and fleet
//! figures (speculative decoding, prefix cache, preemptions, KV-cache peak,
//! server-side latency histograms), as `cicada-target` reads them from the
//! servers' `/metrics`.

use serde::{Deserialize, Serialize};

/// A server-side latency histogram's change over the run, in milliseconds.
/// The mean is exact (the histogram's sum over its count); a percentile is
/// only known to lie in one of the server's buckets, so it is given as that
/// bucket's bounds, never as a point the buckets cannot support.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistFigures {
    pub count: f64,
    pub mean_ms: f64,
    pub p50_ms: Bucket,
    pub p90_ms: Bucket,
    pub p99_ms: Bucket,
}

/// The server bucket a percentile falls in: above `above`, at most `at_most`
/// (Prometheus's `le`; `None` for the `+Inf` bucket), milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    pub above: f64,
    pub at_most: Option<f64>,
}

impl std::fmt::Display for Bucket {
    /// `< 300`, `300-500`, or `> 20000` (milliseconds).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |v: f64| {
            let s = format!("{v:.3}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        };
        match self.at_most {
            None => write!(f, "> {}", n(self.above)),
            Some(hi) if self.above <= 0.0 => write!(f, "< {}", n(hi)),
            Some(hi) => write!(f, "{}-{}", n(self.above), n(hi)),
        }
    }
}

/// The server-side view of a run; absent fields were not exposed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerFigures {
    /// Metric family read: vllm, sglang, tgi, llamacpp (or mixed across replicas).
    pub source: String,
    /// Scrapes taken (before, during and after the run).
    pub scrapes: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_finished: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache_queries: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hits: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage_peak: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running_requests_peak: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_requests_peak: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_decode_num_drafts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_decode_draft_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_decode_accepted_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_decode_acceptance_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_decode_acceptance_length: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_decode_per_position_acceptance_rates: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft: Option<HistFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_time: Option<HistFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2el: Option<HistFigures>,
    /// The server's per-request time per output token (vLLM's
    /// `request_time_per_output_token`), to set beside the client's TPOT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot: Option<HistFigures>,
    /// The gaps between tokens as the server emitted them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl: Option<HistFigures>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_print_as_their_bounds() {
        let b = |above: f64, at_most: Option<f64>| Bucket { above, at_most }.to_string();
        assert_eq!(b(0.0, Some(300.0)), "< 300");
        assert_eq!(b(300.0, Some(500.0)), "300-500");
        assert_eq!(b(2.5, Some(5.0)), "2.5-5");
        assert_eq!(b(7680000.0, None), "> 7680000");
    }
}
