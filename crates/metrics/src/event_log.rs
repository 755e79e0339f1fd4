//! One request's content events in bounded memory.
//!
//! A normal stream's events are all kept, one entry each, so every figure is
//! computed from them exactly as from a plain list. A stream with more than
//! [`EXACT_EVENTS`] events after its first (a broken or hostile server can
//! send millions into one request) does not grow the log: when it is full,
//! neighbouring entries merge pairwise, and from then on each entry stands
//! for twice as many events. The first event, the last arrival, the event
//! count and the token count stay exact whatever the length; only the
//! spacing of the events inside a merged entry is lost (they are taken as
//! evenly spaced over the entry's gap).

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};

/// One content event: an SSE event (or chunk) that carried generated text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentEvent {
    /// Arrival time, µs since the start barrier.
    pub at_us: u64,
    /// Tokens this event carried (1 when unknown).
    pub tokens: u32,
}

/// Entries kept for the events after a request's first; past this, entries
/// merge pairwise (at most this many, 24 bytes each: 1.5 MiB per request).
pub const EXACT_EVENTS: usize = 65_536;

/// Consecutive content events after a request's first, as one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stretch {
    /// Arrival of the last event it stands for, µs since the barrier.
    pub at_us: u64,
    /// Events it stands for (1 unless the log has merged entries).
    pub events: u32,
    /// Tokens those events carried.
    pub tokens: u32,
    /// Per-token ITL samples those events give: each event's token count,
    /// at least 1 per event.
    pub weight: u32,
}

impl Stretch {
    fn one(at_us: u64, tokens: u32) -> Self {
        Stretch {
            at_us,
            events: 1,
            tokens,
            weight: tokens.max(1),
        }
    }
}

/// A request's content events: exact up to [`EXACT_EVENTS`] after the first,
/// merged beyond (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventLog {
    first: Option<ContentEvent>,
    rest: Vec<Stretch>,
    /// Events an entry takes before the next begins: 1, doubled at each merge.
    per_entry: u32,
    events: u64,
    tokens: u64,
}

impl EventLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A log of `events`, in order.
    pub fn from_events(events: &[ContentEvent]) -> Self {
        let mut log = Self::new();
        for e in events {
            log.push(e.at_us, e.tokens);
        }
        log
    }

    /// Add the next content event: arrival (µs since the barrier) and tokens.
    pub fn push(&mut self, at_us: u64, tokens: u32) {
        self.events += 1;
        self.tokens += u64::from(tokens);
        if self.first.is_none() {
            self.first = Some(ContentEvent { at_us, tokens });
            return;
        }
        let per_entry = self.per_entry.max(1);
        if let Some(last) = self.rest.last_mut()
            && last.events < per_entry
        {
            last.at_us = at_us;
            last.events += 1;
            last.tokens = last.tokens.saturating_add(tokens);
            last.weight = last.weight.saturating_add(tokens.max(1));
            return;
        }
        if self.rest.len() >= EXACT_EVENTS {
            self.merge_pairs();
        }
        self.rest.push(Stretch::one(at_us, tokens));
    }

    /// Halve the entries: each pair of neighbours becomes one.
    fn merge_pairs(&mut self) {
        let n = self.rest.len();
        for i in 0..n / 2 {
            let (a, b) = (self.rest[2 * i], self.rest[2 * i + 1]);
            self.rest[i] = Stretch {
                at_us: b.at_us,
                events: a.events.saturating_add(b.events),
                tokens: a.tokens.saturating_add(b.tokens),
                weight: a.weight.saturating_add(b.weight),
            };
        }
        if n % 2 == 1 {
            self.rest[n / 2] = self.rest[n - 1];
        }
        self.rest.truncate(n.div_ceil(2));
        self.per_entry = self.per_entry.max(1).saturating_mul(2);
    }

    /// Content events received.
    pub fn len(&self) -> u64 {
        self.events
    }

    /// True without content events.
    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    /// Tokens the events carried, summed.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// The first content event.
    pub fn first(&self) -> Option<ContentEvent> {
        self.first
    }

    /// Arrival of the last content event.
    pub fn last_at(&self) -> Option<u64> {
        self.rest
            .last()
            .map(|s| s.at_us)
            .or(self.first.map(|e| e.at_us))
    }

    /// The events after the first, oldest first.
    pub fn stretches(&self) -> &[Stretch] {
        &self.rest
    }

    /// Whether entries were merged (more than [`EXACT_EVENTS`] events after the first).
    pub fn merged(&self) -> bool {
        self.per_entry > 1
    }

    /// With only a total known, assume every event carried the same number
    /// of tokens: `total / n` each, the first `total % n` events one more
    /// (exact when they did, e.g. fixed-size speculative bursts).
    pub fn spread_evenly(&mut self, total: u64) {
        let Some(first) = &mut self.first else {
            return;
        };
        let (base, extra) = (total / self.events, total % self.events);
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        first.tokens = clamp(base + u64::from(extra > 0));
        let mut index = 1u64;
        for s in &mut self.rest {
            let e = u64::from(s.events);
            let tokens = e * base + extra.saturating_sub(index).min(e);
            s.tokens = clamp(tokens);
            // an event of no tokens still gives one ITL sample
            s.weight = if base == 0 { s.events } else { s.tokens };
            index += e;
        }
        self.tokens = total;
    }
}

/// Written as the list of entries: `{"at_us", "tokens"}` per event, and a
/// merged entry with `"events"`, the number of events it stands for.
impl Serialize for EventLog {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let entries = self.first.iter().map(|e| Stretch::one(e.at_us, e.tokens));
        let mut seq = s.serialize_seq(Some(self.rest.len() + usize::from(self.first.is_some())))?;
        for entry in entries.chain(self.rest.iter().copied()) {
            seq.serialize_element(&Entry(entry))?;
        }
        seq.end()
    }
}

struct Entry(Stretch);

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let merged = self.0.events > 1;
        let mut m = s.serialize_map(Some(2 + usize::from(merged)))?;
        m.serialize_entry("at_us", &self.0.at_us)?;
        m.serialize_entry("tokens", &self.0.tokens)?;
        if merged {
            m.serialize_entry("events", &self.0.events)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(n: u64) -> Vec<ContentEvent> {
        (0..n)
            .map(|k| ContentEvent {
                at_us: 1_000 + k * 10,
                tokens: 1,
            })
            .collect()
    }

    #[test]
    fn a_short_stream_is_kept_event_by_event() {
        let log = EventLog::from_events(&events(5));
        assert_eq!(log.len(), 5);
        assert_eq!(log.first().map(|e| e.at_us), Some(1_000));
        assert_eq!(log.last_at(), Some(1_040));
        assert_eq!(log.stretches().len(), 4);
        assert!(log.stretches().iter().all(|s| s.events == 1));
        assert!(!log.merged());
        assert_eq!(
            serde_json::to_string(&EventLog::from_events(&events(2))).unwrap(),
            r#"[{"at_us":1000,"tokens":1},{"at_us":1010,"tokens":1}]"#
        );
    }

    #[test]
    fn a_long_stream_merges_but_keeps_count_ends_and_tokens() {
        let n = 3 * EXACT_EVENTS as u64 + 7;
        let mut log = EventLog::new();
        for e in events(n) {
            log.push(e.at_us, 2);
        }
        assert!(log.merged());
        assert!(log.stretches().len() <= EXACT_EVENTS);
        assert_eq!(log.len(), n);
        assert_eq!(log.tokens(), 2 * n);
        assert_eq!(log.first().map(|e| e.at_us), Some(1_000));
        assert_eq!(log.last_at(), Some(1_000 + (n - 1) * 10));
        let events: u64 = log.stretches().iter().map(|s| u64::from(s.events)).sum();
        assert_eq!(events, n - 1);
        let tokens: u64 = log.stretches().iter().map(|s| u64::from(s.tokens)).sum();
        assert_eq!(tokens, 2 * (n - 1));
        // entries stay in order and cover the gaps exactly
        let mut prev = 1_000;
        for s in log.stretches() {
            assert_eq!(s.at_us - prev, 10 * u64::from(s.events));
            prev = s.at_us;
        }
    }

    #[test]
    fn spreading_matches_a_plain_list() {
        // 7 tokens over 5 events: 2, 2, 1, 1, 1
        let mut log = EventLog::from_events(&events(5));
        log.spread_evenly(7);
        let tokens: Vec<u32> = log
            .first()
            .iter()
            .map(|e| e.tokens)
            .chain(log.stretches().iter().map(|s| s.tokens))
            .collect();
        assert_eq!(tokens, [2, 2, 1, 1, 1]);
        assert_eq!(log.tokens(), 7);
        // fewer tokens than events: the rest carry none but still give one ITL sample
        let mut log = EventLog::from_events(&events(4));
        log.spread_evenly(2);
        let weights: Vec<u32> = log.stretches().iter().map(|s| s.weight).collect();
        let tokens: Vec<u32> = log.stretches().iter().map(|s| s.tokens).collect();
        assert_eq!((tokens, weights), (vec![1, 0, 0], vec![1, 1, 1]));
    }

    #[test]
    fn spreading_over_merged_entries_counts_each_entry_its_share() {
        let n = 2 * EXACT_EVENTS as u64 + 1;
        let mut log = EventLog::from_events(&events(n));
        assert!(log.merged());
        log.spread_evenly(3 * n + 5);
        let tokens: u64 = log.stretches().iter().map(|s| u64::from(s.tokens)).sum();
        let first = log.first().map_or(0, |e| u64::from(e.tokens));
        assert_eq!((first, first + tokens), (4, 3 * n + 5));
        // the 4 extra tokens after the first event's go to the first entries
        assert_eq!(log.stretches()[0].tokens, 2 * 3 + 2);
        assert_eq!(log.stretches()[1].tokens, 2 * 3 + 2);
        assert_eq!(log.stretches()[2].tokens, 2 * 3);
    }
}
