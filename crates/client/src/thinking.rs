//! A reasoning model's stream, split as it arrives: the reasoning events
//! and the answer's events, so the answer can be measured apart from the
//! thinking (docs/METRICS.md, "Reasoning"). Nothing is kept for a stream
//! without reasoning.

use cicada_metrics::EventLog;

use crate::backend::EventInfo;

/// What the reasoning events of one response said, and its answer's events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thinking {
    /// Arrival of the first reasoning event, µs since the barrier.
    pub first_us: u64,
    /// Arrival of the last reasoning event.
    pub last_us: u64,
    /// Events that carried reasoning text.
    pub events: u64,
    /// Tokens the reasoning-only events carried (exact under continuous
    /// usage, else one per event).
    pub event_tokens: u64,
    /// Events that carried answer text or tool-call arguments, in order.
    pub answer: EventLog,
    /// The reasoning text, kept only when a tokenizer will count it.
    pub text: Option<String>,
}

/// Note one content event (arrived at `now_us`, carrying `tokens`) before it
/// joins `events`, the log of every content event so far. Starts the
/// reasoning record on the first reasoning event: the events before it were
/// all answer events.
pub fn note(
    thinking: &mut Option<Thinking>,
    events: &EventLog,
    info: &EventInfo<'_>,
    (now_us, tokens): (u64, u32),
    keep_text: bool,
) {
    let answered = info.content.is_some() || info.tool_arguments.is_some();
    if let Some(reasoning) = &info.reasoning {
        let t = thinking.get_or_insert_with(|| Thinking {
            first_us: now_us,
            answer: events.clone(),
            text: keep_text.then(String::new),
            ..Thinking::default()
        });
        t.last_us = now_us;
        t.events += 1;
        if !answered {
            t.event_tokens += u64::from(tokens);
        }
        if let Some(text) = &mut t.text {
            text.push_str(reasoning);
        }
    }
    if answered && let Some(t) = thinking {
        t.answer.push(now_us, tokens);
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn event(reasoning: Option<&'static str>, content: Option<&'static str>) -> EventInfo<'static> {
        EventInfo {
            reasoning: reasoning.map(Cow::Borrowed),
            content: content.map(Cow::Borrowed),
            ..EventInfo::default()
        }
    }

    /// Feed events as the exchange does: note, then add to the full log.
    fn run(stream: &[(EventInfo<'static>, u64)]) -> (Option<Thinking>, EventLog) {
        let (mut thinking, mut events) = (None, EventLog::new());
        for (info, at) in stream {
            note(&mut thinking, &events, info, (*at, 1), true);
            events.push(*at, 1);
        }
        (thinking, events)
    }

    #[test]
    fn thinking_then_answer_is_split_at_the_first_answer_event() {
        let (t, events) = run(&[
            (event(Some("let"), None), 10),
            (event(Some(" me"), None), 20),
            (event(None, Some("Hi")), 35),
            (event(None, Some("!")), 40),
        ]);
        let t = t.unwrap();
        assert_eq!(
            (t.first_us, t.last_us, t.events, t.event_tokens),
            (10, 20, 2, 2)
        );
        assert_eq!(t.answer.first().map(|e| e.at_us), Some(35));
        assert_eq!((t.answer.len(), events.len()), (2, 4));
        assert_eq!(t.text.as_deref(), Some("let me"));
    }

    #[test]
    fn a_stream_without_reasoning_keeps_nothing_and_early_answers_are_kept() {
        let (t, _) = run(&[(event(None, Some("a")), 5), (event(None, Some("b")), 6)]);
        assert_eq!(t, None);
        // answer, then thinking, then answer: the first answer event stays first
        let (t, _) = run(&[
            (event(None, Some("a")), 5),
            (event(Some("hm"), None), 7),
            (event(Some("x"), Some("b")), 9),
        ]);
        let t = t.unwrap();
        assert_eq!(t.answer.first().map(|e| e.at_us), Some(5));
        assert_eq!(t.answer.len(), 2);
        // the event with both counts as answer for its tokens
        assert_eq!((t.events, t.event_tokens, t.last_us), (2, 1, 9));
    }
}
