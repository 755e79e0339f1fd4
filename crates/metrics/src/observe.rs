//! The metric definitions: one finished request turned into samples and counts.

use crate::record::tpot_us;
use crate::{Counter, EventLog, Events, Metric, MetricSet, RequestRecord, Slo};

const MICROS_PER_SECOND: u64 = 1_000_000;

impl MetricSet {
    /// Turn one finished request into samples and counts (the metric definitions live here).
    ///
    /// Every request counts towards its outcome class and schedule lag; only
    /// successful requests enter latency histograms and token counters.
    pub fn observe<E: Events>(&mut self, rec: &RequestRecord<E>, slo: &Slo) {
        self.count_outcome(rec.outcome, rec.error.as_deref());
        let r = &rec.resends;
        for (counter, n) in [
            (Counter::Resends, r.total()),
            (Counter::ResendsUnsent, r.unsent),
            (Counter::ResendsCrossedClose, r.crossed_close),
            (Counter::ResendsRefusedStream, r.refused_stream),
            (Counter::ResendsGoAway, r.goaway),
            (Counter::RequestsHttp2, u32::from(rec.http2)),
            (Counter::RequestsReused, u32::from(rec.reused)),
            (Counter::InexactStamps, rec.inexact_stamps),
        ] {
            self.counters.add(counter, u64::from(n));
        }
        let m = &rec.media;
        for (counter, n) in [
            (Counter::Images, u64::from(m.images)),
            (Counter::ImageBytes, m.image_bytes),
            (Counter::AudioBytes, m.audio_bytes),
        ] {
            self.counters.add(counter, n);
        }
        if let Some(addr) = &rec.address {
            *self.addresses.entry(addr.clone()).or_default() += 1;
        }
        self.histogram_mut(Metric::ScheduleLag)
            .record(rec.sent_us.saturating_sub(rec.scheduled_us));
        self.span
            .include(rec.sent_us, rec.ended_us.max(rec.sent_us));
        if !rec.outcome.is_ok() {
            return;
        }
        let log = rec.events.log();
        let (Some(first), Some(last_at)) = (log.first(), log.last_at()) else {
            return;
        };
        let ttft = first.at_us.saturating_sub(rec.sent_us);
        let e2el = last_at.saturating_sub(rec.sent_us);
        self.histogram_mut(Metric::E2el).record(e2el);
        self.histogram_mut(Metric::E2elCo)
            .record(last_at.saturating_sub(rec.scheduled_us));
        if rec.streamed {
            self.histogram_mut(Metric::Ttft).record(ttft);
            self.histogram_mut(Metric::TtftCo)
                .record(first.at_us.saturating_sub(rec.scheduled_us));
        }

        let tpot = tpot_us(&log, rec.sent_us, rec.output_tokens).filter(|_| rec.streamed);
        if let Some(tpot) = tpot {
            self.histogram_mut(Metric::Tpot).record(tpot);
            if tpot > 0 {
                // tokens/s = 1e6 / tpot_us; recorded in thousandths of a token/s
                self.histogram_mut(Metric::OutputTpsPerRequest)
                    .record((1e9 / tpot as f64).round() as u64);
            }
        }
        self.observe_server_timing(
            rec.server_prompt_us,
            rec.server_per_token_us,
            rec.streamed,
            ttft,
        );
        if rec.output_tokens > 0 {
            self.histogram_mut(Metric::TokenLatency)
                .record((e2el as f64 / rec.output_tokens as f64).round() as u64);
        }
        let max_itl = if rec.streamed {
            self.observe_gaps(&log)
        } else {
            None
        };
        self.observe_seconds(&log, rec);
        self.observe_counts(rec, log.len());
        if rec.media.items > 0 {
            self.histogram_mut(Metric::BatchSize)
                .record(u64::from(rec.media.items));
        }
        let first_token = if rec.streamed { ttft } else { e2el };
        // a request that did not reason answered with its first token
        let first_answer = match &rec.reasoning {
            Some(r) => self.observe_reasoning(r, rec.sent_us, rec.streamed),
            None => Some(first_token),
        };
        if slo.is_set() && slo.met(first_token, tpot, e2el, max_itl) && slo.answer_met(first_answer)
        {
            self.counters.add(Counter::Goodput, 1);
        }
    }

    /// ICL and ITL from the gaps between content events; returns the
    /// largest per-token ITL. An entry standing for several events (a log
    /// past its exact length) spreads its gap evenly over them.
    fn observe_gaps(&mut self, log: &EventLog) -> Option<u64> {
        let mut max_itl: Option<u64> = None;
        let mut prev_at = log.first()?.at_us;
        for s in log.stretches() {
            let gap = s.at_us.saturating_sub(prev_at);
            prev_at = s.at_us;
            // each split keeps the gap's exact sum (so exact means); its
            // samples are the share rounded to the µs
            self.histogram_mut(Metric::Icl)
                .record_split(gap, u64::from(s.events.max(1)));
            let n = u64::from(s.weight.max(1));
            self.histogram_mut(Metric::Itl).record_split(gap, n);
            let per_token = (gap as f64 / n as f64).round() as u64;
            max_itl = Some(max_itl.map_or(per_token, |m| m.max(per_token)));
        }
        max_itl
    }

    /// Output tokens by the second they arrived in, completions, and
    /// vLLM's per-second activity.
    fn observe_seconds<E>(&mut self, log: &EventLog, rec: &RequestRecord<E>) {
        let (Some(first), Some(last_at)) = (log.first(), log.last_at()) else {
            return;
        };
        self.seconds
            .bucket(first.at_us / MICROS_PER_SECOND)
            .output_tokens += u64::from(first.tokens);
        for s in log.stretches() {
            self.seconds
                .bucket(s.at_us / MICROS_PER_SECOND)
                .output_tokens += u64::from(s.tokens);
        }
        // Tokens the events did not account for (usage said more) land with the last event.
        if rec.output_tokens > log.tokens() {
            self.seconds
                .bucket(last_at / MICROS_PER_SECOND)
                .output_tokens += rec.output_tokens - log.tokens();
        }
        self.seconds
            .bucket(rec.ended_us / MICROS_PER_SECOND)
            .completed += 1;
        // vLLM's per-second concurrency: active from the send to the end of
        // its E2EL (the last content event), in every second it touches
        let active_until = last_at.max(rec.sent_us);
        for second in rec.sent_us / MICROS_PER_SECOND..=active_until / MICROS_PER_SECOND {
            self.seconds.bucket(second).active_requests += 1;
        }
    }

    /// Token and request counters of a successful request with `events` content events.
    fn observe_counts<E: Events>(&mut self, rec: &RequestRecord<E>, events: u64) {
        let over_usage = rec.events_over_usage();
        let c = &mut self.counters;
        // vLLM's total: the server's count when it says, else the client's
        c.add(
            Counter::InputTokens,
            rec.server_input_tokens.unwrap_or(rec.input_tokens),
        );
        c.add(Counter::ClientInputTokens, rec.input_tokens);
        if let Some(n) = rec.server_input_tokens {
            c.add(Counter::ServerInputTokens, n);
            c.add(Counter::ServerInputRequests, 1);
        }
        c.add(Counter::OutputTokens, rec.output_tokens);
        c.add(Counter::ContentEvents, events);
        c.add(Counter::Items, u64::from(rec.media.items));
        if over_usage {
            c.add(Counter::EventsOverUsage, 1);
        }
        c.add(
            match rec.token_source {
                crate::TokenSource::Usage => Counter::TokensFromUsage,
                crate::TokenSource::Tokenizer => Counter::TokensFromTokenizer,
                crate::TokenSource::Events => Counter::TokensFromEvents,
            },
            1,
        );
        if let Some(cached) = rec.cached_tokens {
            c.add(Counter::CachedTokens, cached);
        }
        if let Some(asked) = rec.requested_output_tokens {
            c.add(Counter::RequestedOutputTokens, asked);
            if rec.output_tokens < asked {
                c.add(Counter::ShortOutputs, 1);
            }
        }
        if rec.token_count_mismatch {
            c.add(Counter::TokenCountMismatch, 1);
        }
    }
}

impl MetricSet {
    /// The server's own timing beside the client's (successful requests):
    /// TTFT minus the server's prompt time is what queueing, the network
    /// and the client added (only streamed requests have a TTFT).
    fn observe_server_timing(
        &mut self,
        prompt_us: Option<u64>,
        per_token_us: Option<u64>,
        streamed: bool,
        ttft: u64,
    ) {
        if let Some(prompt) = prompt_us {
            self.histogram_mut(Metric::ServerPromptTime).record(prompt);
            if streamed {
                self.histogram_mut(Metric::TtftMinusServerPrompt)
                    .record(ttft.saturating_sub(prompt));
                if ttft < prompt {
                    self.counters.add(Counter::TtftBelowServerPrompt, 1);
                }
            }
        }
        if let Some(per_token) = per_token_us {
            self.histogram_mut(Metric::ServerTpot).record(per_token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentEvent, Outcome, TokenSource};

    /// A request sent at 1 s (scheduled at 0.9 s) with TTFT 50 ms, then events every
    /// `gap` µs carrying `per_event` tokens each.
    fn record(events: usize, per_event: u32, gap: u64) -> RequestRecord {
        let sent = 1_000_000;
        let evs: Vec<ContentEvent> = (0..events)
            .map(|k| ContentEvent {
                at_us: sent + 50_000 + k as u64 * gap,
                tokens: per_event,
            })
            .collect();
        let ended = evs.last().unwrap().at_us + 100;
        RequestRecord {
            index: 0,
            target: 0,
            outcome: Outcome::Ok,
            error: None,
            scheduled_us: 900_000,
            sent_us: sent,
            ended_us: ended,
            output_tokens: events as u64 * u64::from(per_event),
            token_source: TokenSource::Usage,
            input_tokens: 100,
            server_input_tokens: None,
            cached_tokens: Some(10),
            requested_output_tokens: Some(events as u64 * u64::from(per_event)),
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
            events: evs,
        }
    }

    #[test]
    fn single_token_events_give_the_textbook_numbers() {
        let mut set = MetricSet::default();
        set.observe(&record(128, 1, 10_000), &Slo::default());
        assert_eq!(set.histogram(Metric::Ttft).mean(), 50_000.0);
        assert_eq!(
            set.histogram(Metric::E2el).mean(),
            50_000.0 + 127.0 * 10_000.0
        );
        assert_eq!(set.histogram(Metric::Tpot).mean(), 10_000.0);
        assert_eq!(set.histogram(Metric::Itl).mean(), 10_000.0);
        assert_eq!(set.histogram(Metric::Itl).count(), 127);
        assert_eq!(set.histogram(Metric::Icl).count(), 127);
        assert_eq!(set.histogram(Metric::TtftCo).mean(), 150_000.0);
        assert_eq!(set.histogram(Metric::ScheduleLag).mean(), 100_000.0);
        assert_eq!(set.histogram(Metric::OutputTpsPerRequest).mean(), 100_000.0);
        assert_eq!(set.counter(Counter::OutputTokens), 128);
        assert_eq!(set.counter(Counter::InputTokens), 100);
        assert_eq!(set.counter(Counter::CachedTokens), 10);
        assert_eq!(set.outcomes.ok(), 1);
    }

    /// A record whose clock readings came out of order (a last event stamped
    /// before the first) is still recorded, with no negative span in it.
    #[test]
    fn events_out_of_order_never_give_a_negative_span() {
        let mut rec = record(3, 1, 10);
        rec.events.swap(0, 2);
        assert_eq!(rec.tpot_us(), Some(0));
        let mut set = MetricSet::default();
        set.observe(&rec, &Slo::default());
        assert_eq!(set.histogram(Metric::Tpot).count(), 1);
        assert_eq!(set.histogram(Metric::Tpot).max(), 0);
    }

    #[test]
    fn multi_token_events_split_itl_but_not_icl() {
        let mut set = MetricSet::default();
        // 32 events of 4 tokens, 40 ms apart: per-token gap 10 ms
        set.observe(&record(32, 4, 40_000), &Slo::default());
        assert_eq!(set.histogram(Metric::Icl).mean(), 40_000.0);
        assert_eq!(set.histogram(Metric::Icl).count(), 31);
        assert_eq!(set.histogram(Metric::Itl).mean(), 10_000.0);
        assert_eq!(set.histogram(Metric::Itl).count(), 31 * 4);
        // TPOT = 31*40ms / 127
        let tpot = set.histogram(Metric::Tpot).mean();
        assert!((tpot - (31.0 * 40_000.0 / 127.0)).abs() <= 1.0, "{tpot}");
    }

    /// A gap that its tokens do not divide (10 µs over 3 tokens) keeps its
    /// exact sum: ITL's mean is total gap over tokens, not a mean of
    /// shares rounded to the µs; ICL's too where one entry stands for
    /// several events.
    #[test]
    fn itl_mean_is_the_exact_gap_over_tokens() {
        let mut set = MetricSet::default();
        // 11 events of 3 tokens, 10 µs apart: 10 gaps over 30 tokens
        set.observe(&record(11, 3, 10), &Slo::default());
        let itl = set.histogram(Metric::Itl);
        assert_eq!((itl.count(), itl.sum()), (30, 100));
        assert_eq!(itl.mean(), 100.0 / 30.0);
        // every share is 3.33 µs: the spread is 0 up to the rounding of squares
        assert!(itl.std_dev() < 0.5, "{}", itl.std_dev());
        let mut answer = MetricSet::default();
        let mut r = record(3, 1, 7);
        r.reasoning = Some(crate::Reasoning {
            first_us: 1_000,
            last_us: 1_001,
            events: 1,
            tokens: 1,
            token_source: TokenSource::Usage,
            answer: vec![
                ContentEvent {
                    at_us: 2_000,
                    tokens: 1,
                },
                ContentEvent {
                    at_us: 2_007,
                    tokens: 2,
                },
            ],
        });
        answer.observe(&r, &Slo::default());
        let a = answer.histogram(Metric::AnswerItl);
        assert_eq!((a.count(), a.mean()), (2, 3.5));
    }

    #[test]
    fn failures_count_but_never_enter_latency_histograms() {
        let mut set = MetricSet::default();
        let mut r = record(10, 1, 1_000);
        r.outcome = Outcome::StreamTruncated;
        r.error = Some("eof".into());
        set.observe(&r, &Slo::default());
        assert_eq!(set.outcomes.failed(), 1);
        assert!(set.histogram(Metric::Ttft).is_empty());
        assert!(set.histogram(Metric::Itl).is_empty());
        assert_eq!(set.counter(Counter::OutputTokens), 0);
        // lag is a client metric: recorded for every sent request
        assert_eq!(set.histogram(Metric::ScheduleLag).count(), 1);
    }

    #[test]
    fn goodput_needs_every_bound() {
        let mut set = MetricSet::default();
        let slo = Slo {
            ttft_ms: Some(60.0),
            itl_ms: Some(10.0),
            ..Slo::default()
        };
        set.observe(&record(8, 1, 10_000), &slo);
        set.observe(&record(8, 1, 12_000), &slo);
        assert_eq!(set.counter(Counter::Goodput), 1);
    }

    #[test]
    fn per_second_buckets_hold_tokens() {
        let mut set = MetricSet::default();
        // 200 single-token events 10 ms apart from t = 1.05 s: spans seconds 1..=3
        set.observe(&record(200, 1, 10_000), &Slo::default());
        let total: u64 = set.seconds.iter().map(|(_, b)| b.output_tokens).sum();
        assert_eq!(total, 200);
        assert_eq!(set.seconds.peak_output_tokens(), 100);
    }

    #[test]
    fn a_request_is_active_in_every_second_it_touches_as_vllm_counts() {
        let mut set = MetricSet::default();
        // sent at 1.0 s, last event at 1.05 + 199 x 10 ms = 3.04 s: seconds 1..=3
        set.observe(&record(200, 1, 10_000), &Slo::default());
        // sent at 1.0 s, last event at 1.05 s: second 1 only
        set.observe(&record(1, 1, 10_000), &Slo::default());
        let active: Vec<(u64, u64)> = set
            .seconds
            .iter()
            .filter(|(_, b)| b.active_requests > 0)
            .map(|(s, b)| (s, b.active_requests))
            .collect();
        assert_eq!(active, [(1, 2), (2, 1), (3, 1)]);
        assert_eq!(set.seconds.peak_active_requests(), 2);
        // a failure is never active
        let mut failed = record(5, 1, 10_000);
        failed.outcome = Outcome::Timeout;
        set.observe(&failed, &Slo::default());
        assert_eq!(set.seconds.peak_active_requests(), 2);
    }
}

#[cfg(test)]
mod long_stream_tests {
    use super::*;
    use crate::{EVENTS_OVER_USAGE_MIN, EXACT_EVENTS, Outcome, TokenSource};

    /// A record holding `events` single-token events `gap` µs apart in a log.
    fn logged(events: u64, gap: u64, output_tokens: u64) -> RequestRecord<EventLog> {
        let mut log = EventLog::new();
        for k in 0..events {
            log.push(1_000_000 + k * gap, 1);
        }
        RequestRecord {
            index: 0,
            target: 0,
            outcome: Outcome::Ok,
            error: None,
            scheduled_us: 1_000_000,
            sent_us: 1_000_000,
            ended_us: 1_000_000 + events * gap,
            events: log,
            output_tokens,
            token_source: TokenSource::Usage,
            input_tokens: 8,
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
        }
    }

    /// Past the exact bound the log merges entries, yet every count, the
    /// ends and (for evenly spaced events) every gap come out as before.
    #[test]
    fn a_stream_past_the_exact_bound_keeps_counts_and_means() {
        let n = 5 * EXACT_EVENTS as u64 + 3;
        let rec = logged(n, 10, n);
        assert!(rec.events.merged());
        let mut set = MetricSet::default();
        set.observe(&rec, &Slo::default());
        assert_eq!(set.histogram(Metric::Icl).count(), n - 1);
        assert_eq!(set.histogram(Metric::Itl).count(), n - 1);
        assert_eq!(set.histogram(Metric::Icl).mean(), 10.0);
        assert_eq!(set.histogram(Metric::Itl).max(), 10);
        assert_eq!(set.histogram(Metric::Ttft).mean(), 0.0);
        assert_eq!(set.histogram(Metric::E2el).mean(), ((n - 1) * 10) as f64);
        assert_eq!(set.counter(Counter::ContentEvents), n);
        let tokens: u64 = set.seconds.iter().map(|(_, b)| b.output_tokens).sum();
        assert_eq!(tokens, n);
        assert_eq!(set.counter(Counter::EventsOverUsage), 0);
    }

    /// Millions of events for a usage of 8 tokens are flagged; a stream of
    /// a few events more than tokens, or a short one, is not.
    #[test]
    fn events_far_beyond_the_usage_count_are_flagged() {
        let mut set = MetricSet::default();
        let flood = logged(EVENTS_OVER_USAGE_MIN + 1, 10, 8);
        assert!(flood.events_over_usage());
        set.observe(&flood, &Slo::default());
        assert_eq!(set.counter(Counter::EventsOverUsage), 1);
        assert!(!logged(EVENTS_OVER_USAGE_MIN, 10, 8).events_over_usage());
        assert!(!logged(4_000, 10, 1_000).events_over_usage());
        let mut by_events = logged(4_000, 10, 8);
        by_events.token_source = TokenSource::Events;
        assert!(
            !by_events.events_over_usage(),
            "no usage count to compare with"
        );
    }
}

#[cfg(test)]
mod non_streaming_tests {
    use super::*;
    use crate::{ContentEvent, Outcome, TokenSource};

    #[test]
    fn non_streamed_requests_record_only_e2el_and_tokens() {
        let mut set = MetricSet::default();
        set.observe(
            &RequestRecord {
                index: 0,
                target: 0,
                outcome: Outcome::Ok,
                error: None,
                scheduled_us: 0,
                sent_us: 0,
                ended_us: 500_000,
                events: vec![ContentEvent {
                    at_us: 500_000,
                    tokens: 40,
                }],
                output_tokens: 40,
                token_source: TokenSource::Usage,
                input_tokens: 10,
                server_input_tokens: None,
                cached_tokens: None,
                requested_output_tokens: Some(40),
                token_count_mismatch: false,
                streamed: false,
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
        assert_eq!(set.histogram(Metric::E2el).mean(), 500_000.0);
        assert!(set.histogram(Metric::Ttft).is_empty());
        assert!(set.histogram(Metric::Tpot).is_empty());
        assert!(set.histogram(Metric::Itl).is_empty());
        assert_eq!(set.counter(Counter::OutputTokens), 40);
    }

    /// A non-streamed answer arrives whole: the TTFT bound judges its E2EL,
    /// the TPOT and ITL bounds cannot fail.
    #[test]
    fn goodput_of_non_streamed_requests_judges_ttft_by_e2el() {
        let rec = |e2el_us: u64| RequestRecord {
            index: 0,
            target: 0,
            outcome: Outcome::Ok,
            error: None,
            scheduled_us: 0,
            sent_us: 0,
            ended_us: e2el_us,
            events: vec![ContentEvent {
                at_us: e2el_us,
                tokens: 40,
            }],
            output_tokens: 40,
            token_source: TokenSource::Usage,
            input_tokens: 10,
            server_input_tokens: None,
            cached_tokens: None,
            requested_output_tokens: Some(40),
            token_count_mismatch: false,
            streamed: false,
            resends: Default::default(),
            http2: false,
            reused: false,
            address: None,
            inexact_stamps: 0,
            server_prompt_us: None,
            server_per_token_us: None,
            reasoning: None,
            media: Default::default(),
        };
        let slo = Slo {
            ttft_ms: Some(100.0),
            tpot_ms: Some(0.001),
            itl_ms: Some(0.001),
            ..Slo::default()
        };
        let mut set = MetricSet::default();
        set.observe(&rec(99_000), &slo);
        set.observe(&rec(101_000), &slo);
        assert_eq!(
            set.counter(Counter::Goodput),
            1,
            "only the one within 100 ms"
        );
    }
}
