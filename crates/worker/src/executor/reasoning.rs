//! A reasoning request's figures for its record: how many tokens it spent
//! thinking, and its answer's events with their token counts.

use cicada_client::exchange::Exchange;
use cicada_metrics::{EventLog, Reasoning, TokenSource};

use super::tokens::Tokenizer;

/// The record's reasoning part, `None` when no event carried reasoning.
///
/// Reasoning tokens: the server's `completion_tokens_details.reasoning_tokens`,
/// else the tokenizer's count of the reasoning text, else the reasoning
/// events' tokens (one per event unless continuous usage counted them). The
/// answer's events carry the tokens continuous usage gave them; with only
/// totals known, the output tokens less the reasoning tokens spread evenly
/// over them.
pub(super) fn reasoning(
    ex: &Exchange,
    ok: bool,
    (output_tokens, output_source): (u64, TokenSource),
    tokenizer: Option<&Tokenizer>,
) -> Option<Reasoning<EventLog>> {
    let t = ex.thinking.as_ref()?;
    let counted = match (tokenizer, &t.text) {
        (Some(tok), Some(text)) if ok && ex.usage.reasoning_tokens.is_none() => {
            tok.count(text).ok().map(|n| n as u64)
        }
        _ => None,
    };
    let (tokens, token_source) = match (ex.usage.reasoning_tokens, counted) {
        (Some(n), _) => (n, TokenSource::Usage),
        (None, Some(n)) => (n, TokenSource::Tokenizer),
        (None, None) => (t.event_tokens, TokenSource::Events),
    };
    let mut answer = t.answer.clone();
    if !ex.counted_per_event && output_source != TokenSource::Events && !answer.is_empty() {
        answer.spread_evenly(output_tokens.saturating_sub(tokens));
    }
    Some(Reasoning {
        first_us: t.first_us,
        last_us: t.last_us,
        events: t.events,
        tokens,
        token_source,
        answer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_client::backend::Usage;
    use cicada_client::thinking::Thinking;

    fn exchange(reasoning_tokens: Option<u64>, per_event: bool) -> Exchange {
        Exchange {
            usage: Usage {
                completion_tokens: Some(12),
                reasoning_tokens,
                ..Usage::default()
            },
            counted_per_event: per_event,
            thinking: Some(Thinking {
                first_us: 10,
                last_us: 30,
                events: 3,
                event_tokens: 3,
                answer: EventLog::from_events(&[
                    cicada_metrics::ContentEvent {
                        at_us: 40,
                        tokens: 1,
                    },
                    cicada_metrics::ContentEvent {
                        at_us: 50,
                        tokens: 1,
                    },
                ]),
                text: None,
            }),
            ..Exchange::default()
        }
    }

    #[test]
    fn the_servers_count_wins_and_the_answer_gets_the_rest() {
        let usage = (12, TokenSource::Usage);
        let r = reasoning(&exchange(Some(8), false), true, usage, None).unwrap();
        assert_eq!((r.tokens, r.token_source), (8, TokenSource::Usage));
        // 12 output tokens, 8 of them thinking: 4 answer tokens over 2 events
        assert_eq!(r.answer.tokens(), 4);
        assert_eq!(r.answer.first().map(|e| e.tokens), Some(2));
        // without the server's count, the events' count
        let r = reasoning(&exchange(None, true), true, usage, None).unwrap();
        assert_eq!((r.tokens, r.token_source), (3, TokenSource::Events));
        assert_eq!(r.answer.tokens(), 2, "per-event counts are kept");
        assert!(reasoning(&Exchange::default(), true, usage, None).is_none());
    }
}
