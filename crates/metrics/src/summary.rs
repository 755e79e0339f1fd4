use crate::{Counter, LatencyHistogram, Metric, MetricSet, TokenSource};

/// Distribution figures of one metric, in display units (ms, or tok/s).
#[derive(Debug, Clone, PartialEq)]
pub struct DistributionStats {
    /// Samples.
    pub count: u64,
    /// Exact mean.
    pub mean: f64,
    /// 50th percentile.
    pub median: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Smallest sample (bucket-rounded).
    pub min: f64,
    /// Largest sample (bucket-rounded).
    pub max: f64,
    /// Requested percentiles as (percent, value).
    pub percentiles: Vec<(f64, f64)>,
}

impl DistributionStats {
    /// Figures of one histogram, scaled by `scale` into display units.
    pub fn of(h: &LatencyHistogram, scale: f64, percentiles: &[f64]) -> Self {
        Self {
            count: h.count(),
            mean: h.mean() * scale,
            median: h.quantile(0.5) as f64 * scale,
            std: h.std_dev() * scale,
            min: h.min() as f64 * scale,
            max: h.max() as f64 * scale,
            percentiles: percentiles
                .iter()
                .map(|p| (*p, h.percentile(*p) as f64 * scale))
                .collect(),
        }
    }

    /// Value at percentile `p` if it was requested.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(q, _)| (q - p).abs() < 1e-9)
            .map(|(_, v)| *v)
    }
}

/// The run-level figures every report prints, derived from a merged [`MetricSet`].
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Requests sent (sum of every outcome class).
    pub sent: u64,
    /// Successful requests.
    pub completed: u64,
    /// Failed requests (every class but ok).
    pub failed: u64,
    /// Seconds from the start barrier to the last request's end.
    pub duration_s: f64,
    /// Prompt tokens of successful requests as `vllm bench serve` counts
    /// them: per request the server's count when it says, else the client's.
    pub total_input_tokens: u64,
    /// Prompt tokens of successful requests as the client counted them (the
    /// tokenizer's count of each prompt, or the dataset's lengths).
    pub client_input_tokens: u64,
    /// Prompt tokens of successful requests as the servers counted them (chat
    /// template and BOS included), when every one of them said.
    pub server_input_tokens: Option<u64>,
    /// Output tokens of successful requests.
    pub total_output_tokens: u64,
    /// Successful requests per second of duration.
    pub request_throughput: f64,
    /// Requests meeting every SLO per second (None without SLOs).
    pub request_goodput: Option<f64>,
    /// Output tokens per second of duration.
    pub output_throughput: f64,
    /// Input plus output tokens per second of duration.
    pub total_token_throughput: f64,
    /// Requests sent per second over the sending window (None if all were sent at once).
    pub achieved_request_rate: Option<f64>,
    /// Most output tokens received in one second.
    pub max_output_tokens_per_s: u64,
    /// `vllm bench serve`'s peak concurrency: the most successful requests
    /// active at any moment of one second (1 s buckets from the barrier).
    pub max_concurrent_requests: u64,
    /// Highest average number of requests in flight (every outcome) over any
    /// 100 ms slice: cicada's finer view of the peak.
    pub peak_concurrent_requests_100ms: f64,
    /// Average number of requests in flight over the measured window.
    pub mean_concurrent_requests: f64,
    /// Where output token counts came from: the source used by most requests.
    pub token_source: Option<TokenSource>,
    /// Items (embedding inputs) of successful pooling requests.
    pub total_items: u64,
    /// Items per second of duration.
    pub item_throughput: f64,
    /// Input tokens (`total_input_tokens`) per second of duration.
    pub input_throughput: f64,
    /// Per-metric distributions, for every metric with samples.
    pub metrics: Vec<(Metric, DistributionStats)>,
}

impl Summary {
    /// Derive every figure; `percentiles` are in percent (e.g. `[50.0, 90.0, 99.0]`).
    /// Durations run from `window_start_us` after the barrier (the end of the
    /// warm-up, or the start of a stage) to the last request's end.
    pub fn of(set: &MetricSet, slo_set: bool, percentiles: &[f64], window_start_us: u64) -> Self {
        let sent = set.outcomes.sent();
        let completed = set.outcomes.ok();
        let duration_s = set
            .span
            .last_end_us
            .map_or(0, |e| e.saturating_sub(window_start_us)) as f64
            / 1e6;
        let per_s = |x: f64| {
            if duration_s > 0.0 {
                x / duration_s
            } else {
                0.0
            }
        };
        let input = set.counter(Counter::InputTokens);
        let output = set.counter(Counter::OutputTokens);
        let achieved_request_rate = match set.span.last_send_us {
            Some(last) if last > window_start_us => {
                Some(sent as f64 / ((last - window_start_us) as f64 / 1e6))
            }
            _ => None,
        };
        let sources = [
            (TokenSource::Usage, set.counter(Counter::TokensFromUsage)),
            (
                TokenSource::Tokenizer,
                set.counter(Counter::TokensFromTokenizer),
            ),
            (TokenSource::Events, set.counter(Counter::TokensFromEvents)),
        ];
        let token_source = sources
            .iter()
            .filter(|(_, n)| *n > 0)
            .max_by_key(|(_, n)| *n)
            .map(|(s, _)| *s);
        Self {
            sent,
            completed,
            failed: set.outcomes.failed(),
            duration_s,
            total_input_tokens: input,
            client_input_tokens: set.counter(Counter::ClientInputTokens),
            server_input_tokens: (set.counter(Counter::ServerInputRequests) == completed
                && completed > 0)
                .then(|| set.counter(Counter::ServerInputTokens)),
            total_output_tokens: output,
            request_throughput: per_s(completed as f64),
            request_goodput: slo_set.then(|| per_s(set.counter(Counter::Goodput) as f64)),
            output_throughput: per_s(output as f64),
            total_token_throughput: per_s((input + output) as f64),
            achieved_request_rate,
            max_output_tokens_per_s: set.seconds.peak_output_tokens(),
            max_concurrent_requests: set.seconds.peak_active_requests(),
            peak_concurrent_requests_100ms: set.concurrency.peak(),
            mean_concurrent_requests: set
                .concurrency
                .mean(window_start_us, set.span.last_end_us.unwrap_or(0)),
            token_source,
            total_items: set.counter(Counter::Items),
            item_throughput: per_s(set.counter(Counter::Items) as f64),
            input_throughput: per_s(input as f64),
            metrics: set
                .non_empty()
                .map(|(m, h)| {
                    (
                        m,
                        DistributionStats::of(h, m.unit().display_scale(), percentiles),
                    )
                })
                .collect(),
        }
    }

    /// Distribution of one metric, if it has samples.
    pub fn metric(&self, metric: Metric) -> Option<&DistributionStats> {
        self.metrics
            .iter()
            .find(|(m, _)| *m == metric)
            .map(|(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentEvent, Outcome, RequestRecord, Slo};

    #[test]
    fn throughputs_divide_by_duration_to_last_end() {
        let mut set = MetricSet::default();
        for i in 0..4u64 {
            set.observe(
                &RequestRecord {
                    index: i,
                    target: 0,
                    outcome: Outcome::Ok,
                    error: None,
                    scheduled_us: i * 500_000,
                    sent_us: i * 500_000,
                    ended_us: i * 500_000 + 500_000,
                    events: vec![
                        ContentEvent {
                            at_us: i * 500_000 + 100_000,
                            tokens: 1,
                        },
                        ContentEvent {
                            at_us: i * 500_000 + 500_000,
                            tokens: 1,
                        },
                    ],
                    output_tokens: 2,
                    token_source: TokenSource::Usage,
                    input_tokens: 10,
                    server_input_tokens: None,
                    cached_tokens: None,
                    requested_output_tokens: None,
                    token_count_mismatch: false,
                    streamed: true,
                    resends: Default::default(),
                    http2: false,
                    reused: false,
                    address: None,
                    inexact_stamps: 0,
                    server_prompt_us: None,
                    server_per_token_us: None,
                    reasoning: None,
                    media: Default::default(),
                },
                &Slo::default(),
            );
        }
        let s = Summary::of(&set, false, &[99.0], 0);
        assert_eq!(s.duration_s, 2.0);
        assert_eq!(s.completed, 4);
        assert_eq!(s.request_throughput, 2.0);
        assert_eq!(s.output_throughput, 4.0);
        assert_eq!(s.total_token_throughput, 24.0);
        assert_eq!(s.achieved_request_rate, Some(4.0 / 1.5));
        assert_eq!(s.token_source, Some(TokenSource::Usage));
        assert_eq!(s.request_goodput, None);
        let ttft = s.metric(Metric::Ttft).unwrap();
        assert_eq!(ttft.mean, 100.0);
        assert!(ttft.percentile(99.0).is_some());
    }
}
