//! From scrapes to figures: the raw changes over a run (counter deltas,
//! histogram deltas, gauge peaks and means), how replicas add up, and the
//! derived rates users read today from server logs. A metric the server
//! does not expose is simply absent.

use std::collections::BTreeMap;

use cicada_results::server::{Bucket, HistFigures, ServerFigures, ServerView};

use super::names::{family, first};
use super::text::{Exposition, Histogram};

/// The gauges tracked on every scrape.
#[derive(Debug, Clone, Copy, Default)]
pub struct GaugeTrack {
    pub kv_peak: Option<f64>,
    pub running_peak: Option<f64>,
    pub waiting_peak: Option<f64>,
    /// Sums and counts of scrapes, for running-average gauges.
    pub accept_rate: (f64, u32),
    pub accept_length: (f64, u32),
}

fn peak(old: Option<f64>, new: Option<f64>) -> Option<f64> {
    match (old, new) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl GaugeTrack {
    /// Fold one scrape in; `during` scrapes (not the one before the run) feed the averages.
    pub fn observe(&mut self, e: &Exposition, during: bool) {
        let Some(f) = family(e) else { return };
        self.kv_peak = peak(self.kv_peak, first(f.kv_usage, |n| e.max(n)));
        self.running_peak = peak(self.running_peak, first(f.running, |n| e.sum(n)));
        self.waiting_peak = peak(self.waiting_peak, first(f.waiting, |n| e.sum(n)));
        if during {
            if let Some(v) = first(f.accept_rate_gauge, |n| e.max(n)) {
                self.accept_rate.0 += v;
                self.accept_rate.1 += 1;
            }
            if let Some(v) = first(f.accept_length_gauge, |n| e.max(n)) {
                self.accept_length.0 += v;
                self.accept_length.1 += 1;
            }
        }
    }
}

/// What changed on one server (or several, added) over a run.
#[derive(Debug, Clone, Default)]
pub struct Raw {
    pub source: &'static str,
    pub scrapes: u32,
    counters: BTreeMap<&'static str, f64>,
    per_position: BTreeMap<u32, f64>,
    histograms: BTreeMap<&'static str, Histogram>,
    gauges: GaugeTrack,
}

fn add_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, y) => x.or(y),
    }
}

impl Raw {
    /// The changes between the scrape before and the one after the run.
    pub fn between(
        before: &Exposition,
        after: &Exposition,
        gauges: GaugeTrack,
        scrapes: u32,
    ) -> Option<Raw> {
        let f = family(after)?;
        let mut raw = Raw {
            source: f.source,
            scrapes,
            gauges,
            ..Raw::default()
        };
        let counters: [(&'static str, &[&str]); 8] = [
            ("finished", f.finished),
            ("prompt", f.prompt),
            ("generation", f.generation),
            ("prefix_queries", f.prefix_queries),
            ("prefix_hits", f.prefix_hits),
            ("preemptions", f.preemptions),
            ("drafts", f.drafts),
            ("draft_tokens", f.draft_tokens),
        ];
        for (key, names) in counters.into_iter().chain([("accepted", f.accepted)]) {
            if let Some(v) = first(names, |n| after.sum(n)) {
                let was = first(names, |n| before.sum(n)).unwrap_or(0.0);
                raw.counters.insert(key, (v - was).max(0.0));
            }
        }
        if let Some(name) = f.per_position.first() {
            let was = before.by_label(name, "position");
            for (pos, v) in after.by_label(name, "position") {
                if let Ok(p) = pos.parse::<u32>() {
                    let d = v - was.get(&pos).copied().unwrap_or(0.0);
                    raw.per_position.insert(p, d.max(0.0));
                }
            }
        }
        for (key, names) in [
            ("ttft", f.ttft),
            ("queue", f.queue),
            ("e2e", f.e2e),
            ("tpot", f.tpot),
            ("itl", f.itl),
        ] {
            if let Some(h) = first(names, |n| after.histogram(n)) {
                let was = first(names, |n| before.histogram(n)).unwrap_or_default();
                raw.histograms.insert(key, h.minus(&was));
            }
        }
        Some(raw)
    }

    /// Add another server's changes (a fleet of replicas).
    pub fn merge(&mut self, other: &Raw) {
        if self.source.is_empty() {
            self.source = other.source;
        } else if self.source != other.source {
            self.source = "mixed";
        }
        self.scrapes += other.scrapes;
        for (k, v) in &other.counters {
            *self.counters.entry(k).or_insert(0.0) += v;
        }
        for (k, v) in &other.per_position {
            *self.per_position.entry(*k).or_insert(0.0) += v;
        }
        for (k, h) in &other.histograms {
            match self.histograms.get(k) {
                None => {
                    self.histograms.insert(k, h.clone());
                }
                Some(mine) => match mine.plus(h) {
                    Some(sum) => {
                        self.histograms.insert(k, sum);
                    }
                    // different bucket layouts cannot be added
                    None => {
                        self.histograms.remove(k);
                    }
                },
            }
        }
        let (a, b) = (&mut self.gauges, &other.gauges);
        a.kv_peak = peak(a.kv_peak, b.kv_peak);
        a.running_peak = add_opt(a.running_peak, b.running_peak);
        a.waiting_peak = add_opt(a.waiting_peak, b.waiting_peak);
        a.accept_rate = (
            a.accept_rate.0 + b.accept_rate.0,
            a.accept_rate.1 + b.accept_rate.1,
        );
        a.accept_length = (
            a.accept_length.0 + b.accept_length.0,
            a.accept_length.1 + b.accept_length.1,
        );
    }

    /// The figures users read.
    pub fn figures(&self) -> ServerFigures {
        let c = |k: &str| self.counters.get(k).copied();
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let mean = |(sum, n): (f64, u32)| (n > 0).then(|| sum / f64::from(n));
        let drafts = c("drafts");
        let accepted = c("accepted");
        let acceptance_length = match (accepted, drafts) {
            (Some(a), Some(d)) if d > 0.0 => Some(1.0 + a / d),
            _ => mean(self.gauges.accept_length),
        };
        let per_position = match drafts {
            Some(d) if d > 0.0 && !self.per_position.is_empty() => {
                Some(self.per_position.values().map(|a| a / d).collect())
            }
            _ => None,
        };
        let hist = |k: &str| self.histograms.get(k).and_then(hist_figures);
        ServerFigures {
            source: self.source.to_string(),
            scrapes: self.scrapes,
            requests_finished: c("finished"),
            prompt_tokens: c("prompt"),
            generation_tokens: c("generation"),
            prefix_cache_queries: c("prefix_queries"),
            prefix_cache_hits: c("prefix_hits"),
            prefix_cache_hit_rate: ratio(c("prefix_hits"), c("prefix_queries")),
            preemptions: c("preemptions"),
            kv_cache_usage_peak: self.gauges.kv_peak,
            running_requests_peak: self.gauges.running_peak,
            waiting_requests_peak: self.gauges.waiting_peak,
            spec_decode_num_drafts: drafts,
            spec_decode_draft_tokens: c("draft_tokens"),
            spec_decode_accepted_tokens: accepted,
            spec_decode_acceptance_rate: ratio(accepted, c("draft_tokens"))
                .or_else(|| mean(self.gauges.accept_rate)),
            spec_decode_acceptance_length: acceptance_length,
            spec_decode_per_position_acceptance_rates: per_position,
            ttft: hist("ttft"),
            queue_time: hist("queue"),
            e2el: hist("e2e"),
            tpot: hist("tpot"),
            itl: hist("itl"),
        }
    }
}

/// A histogram's change as the figures users read (none when empty).
fn hist_figures(h: &Histogram) -> Option<HistFigures> {
    if h.count <= 0.0 {
        return None;
    }
    let q = |p: f64| {
        let (above, at_most) = h.bucket_of(p).unwrap_or((0.0, None));
        Bucket {
            above: above * 1000.0,
            at_most: at_most.map(|s| s * 1000.0),
        }
    };
    Some(HistFigures {
        count: h.count,
        mean_ms: h.sum / h.count * 1000.0,
        p50_ms: q(0.5),
        p90_ms: q(0.9),
        p99_ms: q(0.99),
    })
}

/// Figures of each replica's changes, and of their sum for the fleet
/// (`replicas` targets, in `target.urls` order).
pub fn view_of(raws: &[Option<Raw>], replicas: usize) -> ServerView {
    let mut view = ServerView {
        targets: vec![None; replicas],
        total: None,
    };
    let mut fleet: Option<Raw> = None;
    for (slot, raw) in view.targets.iter_mut().zip(raws) {
        if let Some(raw) = raw {
            *slot = Some(raw.figures());
            fleet.get_or_insert_with(Raw::default).merge(raw);
        }
    }
    view.total = fleet.map(|f| f.figures());
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vllm(accepted: f64, drafts: f64, hits: f64, kv: f64, ttft_count: f64) -> Exposition {
        Exposition::parse(&format!(
            "vllm:spec_decode_num_drafts_total{{engine=\"0\"}} {drafts}\n\
             vllm:spec_decode_num_draft_tokens_total{{engine=\"0\"}} {}\n\
             vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\"}} {accepted}\n\
             vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine=\"0\",position=\"0\"}} {}\n\
             vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine=\"0\",position=\"1\"}} {}\n\
             vllm:prefix_cache_queries_total{{engine=\"0\"}} {}\n\
             vllm:prefix_cache_hits_total{{engine=\"0\"}} {hits}\n\
             vllm:num_preemptions_total{{engine=\"0\"}} 2\n\
             vllm:kv_cache_usage_perc{{engine=\"0\"}} {kv}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"0.1\"}} {ttft_count}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {ttft_count}\n\
             vllm:time_to_first_token_seconds_sum {}\n\
             vllm:time_to_first_token_seconds_count {ttft_count}\n",
            drafts * 4.0,
            accepted * 0.6,
            accepted * 0.4,
            hits * 4.0,
            ttft_count * 0.05,
        ))
    }

    #[test]
    fn vllm_deltas_give_rates_lengths_and_hit_rate() {
        let before = vllm(100.0, 100.0, 10.0, 0.1, 5.0);
        let during = vllm(150.0, 120.0, 30.0, 0.7, 8.0);
        let after = vllm(300.0, 200.0, 50.0, 0.2, 15.0);
        let mut g = GaugeTrack::default();
        for (e, d) in [(&before, false), (&during, true), (&after, true)] {
            g.observe(e, d);
        }
        let f = Raw::between(&before, &after, g, 3).unwrap().figures();
        assert_eq!(f.source, "vllm");
        assert_eq!(f.spec_decode_num_drafts, Some(100.0));
        assert_eq!(f.spec_decode_accepted_tokens, Some(200.0));
        // 200 accepted of 400 proposed; 1 + 200/100 tokens per step
        assert_eq!(f.spec_decode_acceptance_rate, Some(0.5));
        assert_eq!(f.spec_decode_acceptance_length, Some(3.0));
        let pos = f.spec_decode_per_position_acceptance_rates.unwrap();
        assert!((pos[0] - 1.2).abs() < 1e-9 && (pos[1] - 0.8).abs() < 1e-9);
        assert_eq!(f.prefix_cache_hit_rate, Some(0.25));
        // preemptions did not change during the run
        assert_eq!(f.preemptions, Some(0.0));
        assert_eq!(f.kv_cache_usage_peak, Some(0.7));
        let t = f.ttft.unwrap();
        assert_eq!(t.count, 10.0);
        assert!((t.mean_ms - 50.0).abs() < 1e-6);
        // every sample sits in (0, 100 ms]: the median is only known to be
        // below 100 ms, never a point inside the bucket
        let below_100 = Bucket {
            above: 0.0,
            at_most: Some(100.0),
        };
        assert_eq!((t.p50_ms, t.p99_ms), (below_100, below_100));
        assert_eq!(t.p50_ms.to_string(), "< 100");
        assert!(f.queue_time.is_none(), "missing metrics are skipped");
    }

    #[test]
    fn server_tpot_and_itl_are_read() {
        let text = |n: f64| {
            format!(
                "vllm:request_time_per_output_token_seconds_bucket{{le=\"0.01\"}} 0\n\
                 vllm:request_time_per_output_token_seconds_bucket{{le=\"0.025\"}} {n}\n\
                 vllm:request_time_per_output_token_seconds_bucket{{le=\"+Inf\"}} {n}\n\
                 vllm:request_time_per_output_token_seconds_sum {}\n\
                 vllm:request_time_per_output_token_seconds_count {n}\n\
                 vllm:inter_token_latency_seconds_bucket{{le=\"+Inf\"}} {}\n\
                 vllm:inter_token_latency_seconds_sum {}\n\
                 vllm:inter_token_latency_seconds_count {}\n",
                n * 0.02,
                n * 10.0,
                n * 0.2,
                n * 10.0
            )
        };
        let (before, after) = (Exposition::parse(&text(2.0)), Exposition::parse(&text(6.0)));
        let f = Raw::between(&before, &after, GaugeTrack::default(), 2)
            .unwrap()
            .figures();
        let tpot = f.tpot.unwrap();
        assert_eq!(tpot.count, 4.0);
        assert!((tpot.mean_ms - 20.0).abs() < 1e-9);
        assert_eq!(tpot.p50_ms.to_string(), "10-25");
        let itl = f.itl.unwrap();
        assert_eq!(itl.count, 40.0);
        assert!((itl.mean_ms - 20.0).abs() < 1e-9);
        assert_eq!(itl.p99_ms.to_string(), "> 0");
    }

    #[test]
    fn replicas_add_and_sglang_gauges_average() {
        let a = Exposition::parse(
            "sglang:spec_accept_rate 0.5\nsglang:cached_tokens_total 10\nsglang:prompt_tokens_total 100\nsglang:token_usage 0.3\n",
        );
        let b = Exposition::parse(
            "sglang:spec_accept_rate 0.7\nsglang:cached_tokens_total 30\nsglang:prompt_tokens_total 140\nsglang:token_usage 0.6\n",
        );
        let mut g = GaugeTrack::default();
        g.observe(&a, false);
        g.observe(&b, true);
        let one = Raw::between(&a, &b, g, 2).unwrap();
        let f = one.figures();
        assert_eq!(f.spec_decode_acceptance_rate, Some(0.7));
        assert_eq!(f.prefix_cache_hit_rate, Some(0.5));
        let mut fleet = Raw::default();
        fleet.merge(&one);
        fleet.merge(&one);
        let f = fleet.figures();
        assert_eq!(f.prefix_cache_hits, Some(40.0));
        assert_eq!(f.prefix_cache_hit_rate, Some(0.5));
        assert_eq!(f.kv_cache_usage_peak, Some(0.6));
        assert_eq!(f.scrapes, 4);
        assert!(Raw::between(&a, &Exposition::parse("other 1\n"), g, 1).is_none());
    }
}
