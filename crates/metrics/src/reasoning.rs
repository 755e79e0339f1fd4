//! A reasoning model's request, measured apart: when it thought, how much,
//! and when its answer began (docs/METRICS.md, "Reasoning").
//!
//! TTFT, ITL, TPOT and the output token count keep vLLM's meaning (reasoning
//! tokens are output tokens, the first reasoning delta is the first token);
//! the figures here look at the answer alone.

use crate::{Counter, EventLog, Events, Metric, MetricSet, Reasoning, TokenSource};

impl<E: Events> Reasoning<E> {
    /// Arrival of the first answer event, µs since the barrier.
    pub fn first_answer_us(&self) -> Option<u64> {
        self.answer.log().first().map(|e| e.at_us)
    }

    /// Reasoning duration, µs: first reasoning event to the first answer
    /// event, or to the last reasoning event when no answer came.
    pub fn duration_us(&self) -> u64 {
        self.first_answer_us()
            .unwrap_or(self.last_us)
            .saturating_sub(self.first_us)
    }

    /// Time to first answer token (TTFA), µs after `sent_us`.
    pub fn ttfa_us(&self, sent_us: u64) -> Option<u64> {
        self.first_answer_us().map(|at| at.saturating_sub(sent_us))
    }

    /// The answer's time per output token after its first, µs: first to last
    /// answer event over its tokens less one, for two or more answer tokens.
    pub fn answer_tpot_us(&self) -> Option<u64> {
        let log = self.answer.log();
        let (first, last) = (log.first()?.at_us, log.last_at()?);
        let tokens = log.tokens();
        (tokens >= 2)
            .then(|| (last.saturating_sub(first) as f64 / (tokens - 1) as f64).round() as u64)
    }
}

impl MetricSet {
    /// The reasoning figures of one successful request that reasoned (times
    /// only when streamed); returns its TTFA for the goodput bound (without
    /// streaming, the one body's arrival: E2EL), `None` without an answer.
    pub(crate) fn observe_reasoning<E: Events>(
        &mut self,
        r: &Reasoning<E>,
        sent_us: u64,
        streamed: bool,
    ) -> Option<u64> {
        let c = &mut self.counters;
        c.add(Counter::ReasoningRequests, 1);
        c.add(Counter::ReasoningTokens, r.tokens);
        c.add(
            match r.token_source {
                TokenSource::Usage => Counter::ReasoningTokensFromUsage,
                TokenSource::Tokenizer => Counter::ReasoningTokensFromTokenizer,
                TokenSource::Events => Counter::ReasoningTokensFromEvents,
            },
            1,
        );
        let log = r.answer.log();
        if log.is_empty() {
            c.add(Counter::ReasoningWithoutAnswer, 1);
        }
        let ttfa = r.ttfa_us(sent_us);
        if !streamed {
            return ttfa;
        }
        self.histogram_mut(Metric::ReasoningTime)
            .record(r.duration_us());
        if let Some(ttfa) = ttfa {
            self.histogram_mut(Metric::Ttfa).record(ttfa);
        }
        if let Some(tpot) = r.answer_tpot_us() {
            self.histogram_mut(Metric::AnswerTpot).record(tpot);
        }
        self.answer_gaps(&log);
        ttfa
    }

    /// Answer ITL: each gap between answer events spread over its tokens,
    /// as ITL is (an entry standing for several events spreads evenly).
    fn answer_gaps(&mut self, log: &EventLog) {
        let Some(first) = log.first() else {
            return;
        };
        let mut prev_at = first.at_us;
        for s in log.stretches() {
            let gap = s.at_us.saturating_sub(prev_at);
            prev_at = s.at_us;
            self.histogram_mut(Metric::AnswerItl)
                .record_split(gap, u64::from(s.weight.max(1)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ContentEvent;

    fn reasoning(answer: &[(u64, u32)]) -> Reasoning {
        Reasoning {
            first_us: 1_100,
            last_us: 1_500,
            events: 5,
            tokens: 5,
            token_source: TokenSource::Usage,
            answer: answer
                .iter()
                .map(|&(at_us, tokens)| ContentEvent { at_us, tokens })
                .collect(),
        }
    }

    #[test]
    fn the_answer_is_measured_apart_from_the_thinking() {
        // sent at 1000; thinking 1100..1500; answer at 2000, 2100, 2400 (1, 1, 2 tokens)
        let r = reasoning(&[(2_000, 1), (2_100, 1), (2_400, 2)]);
        assert_eq!(r.ttfa_us(1_000), Some(1_000));
        assert_eq!(r.duration_us(), 900);
        // 400 µs over 3 tokens after the first
        assert_eq!(r.answer_tpot_us(), Some(133));
        let mut set = MetricSet::default();
        assert_eq!(set.observe_reasoning(&r, 1_000, true), Some(1_000));
        let itl = set.histogram(Metric::AnswerItl);
        // one 100 µs gap, then a 300 µs gap spread over 2 tokens
        assert_eq!((itl.count(), itl.sum()), (3, 400));
        assert_eq!(set.counter(Counter::ReasoningTokens), 5);
        assert_eq!(set.counter(Counter::ReasoningTokensFromUsage), 1);
        assert_eq!(set.counter(Counter::ReasoningWithoutAnswer), 0);
    }

    #[test]
    fn without_an_answer_the_thinking_ends_at_its_last_event() {
        let r = reasoning(&[]);
        assert_eq!(r.ttfa_us(1_000), None);
        assert_eq!(r.duration_us(), 400);
        let mut set = MetricSet::default();
        assert_eq!(set.observe_reasoning(&r, 1_000, true), None);
        assert!(set.histogram(Metric::Ttfa).is_empty());
        assert!(set.histogram(Metric::AnswerItl).is_empty());
        assert_eq!(set.histogram(Metric::ReasoningTime).sum(), 400);
        assert_eq!(set.counter(Counter::ReasoningWithoutAnswer), 1);
        // not streamed: counts only, no timing
        let mut set = MetricSet::default();
        let ttfa = set.observe_reasoning(&reasoning(&[(2_000, 3)]), 1_000, false);
        assert_eq!(ttfa, Some(1_000));
        assert!(set.histogram(Metric::ReasoningTime).is_empty());
        assert_eq!(set.counter(Counter::ReasoningRequests), 1);
    }
}
