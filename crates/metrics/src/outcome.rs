use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::MetricsError;

/// How one request ended. Every sent request ends in exactly one outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// Completed stream with content.
    Ok,
    /// The server answered with a non-2xx HTTP status.
    Http(u16),
    /// No connection could be made (refused, DNS, TLS, reset before the response).
    Connect,
    /// The per-request timeout elapsed.
    Timeout,
    /// The stream ended without a finish reason or `[DONE]`.
    StreamTruncated,
    /// The server sent an in-band error event, even inside a 200 stream.
    ServerErrorEvent,
    /// The response could not be parsed as the backend's format (or, for
    /// its head, as HTTP).
    BadPayload,
    /// The server answered beyond a size cicada holds to keep its memory
    /// bounded: a response head, an SSE line or event, a body, or the text kept.
    ResponseTooLarge,
    /// The request was written and the connection ended before any response
    /// byte: it may have reached the server, so it was not sent again.
    NoResponse,
    /// The request completed but carried no content.
    Empty,
    /// The run stopped while the request was in flight.
    Cancelled,
    /// cicada itself failed on the request (a panic in the client: a bug to
    /// report); counted so that no request goes missing from the totals.
    ClientFault,
    /// The request completed, and its output does not have the shape it
    /// asked for (`response_format`'s schema, a JSON object, or a tool call
    /// with arguments valid against the tool's `parameters`).
    InvalidOutput,
}

impl Outcome {
    /// True for the one successful outcome.
    pub fn is_ok(self) -> bool {
        self == Outcome::Ok
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok => f.write_str("ok"),
            Outcome::Http(status) => write!(f, "http_{status}"),
            Outcome::Connect => f.write_str("connect"),
            Outcome::Timeout => f.write_str("timeout"),
            Outcome::StreamTruncated => f.write_str("stream_truncated"),
            Outcome::ServerErrorEvent => f.write_str("server_error_event"),
            Outcome::BadPayload => f.write_str("bad_payload"),
            Outcome::ResponseTooLarge => f.write_str("response_too_large"),
            Outcome::NoResponse => f.write_str("no_response"),
            Outcome::Empty => f.write_str("empty"),
            Outcome::Cancelled => f.write_str("cancelled"),
            Outcome::ClientFault => f.write_str("client_fault"),
            Outcome::InvalidOutput => f.write_str("invalid_output"),
        }
    }
}

impl FromStr for Outcome {
    type Err = MetricsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "ok" => Outcome::Ok,
            "connect" => Outcome::Connect,
            "timeout" => Outcome::Timeout,
            "stream_truncated" => Outcome::StreamTruncated,
            "server_error_event" => Outcome::ServerErrorEvent,
            "bad_payload" => Outcome::BadPayload,
            "response_too_large" => Outcome::ResponseTooLarge,
            "no_response" => Outcome::NoResponse,
            "empty" => Outcome::Empty,
            "cancelled" => Outcome::Cancelled,
            "client_fault" => Outcome::ClientFault,
            "invalid_output" => Outcome::InvalidOutput,
            other => match other.strip_prefix("http_").map(str::parse::<u16>) {
                Some(Ok(status)) => Outcome::Http(status),
                _ => {
                    return Err(MetricsError::UnknownName {
                        kind: "outcome",
                        name: s.to_string(),
                    });
                }
            },
        })
    }
}

/// Count of one outcome class and the first error text seen for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutcomeCount {
    pub count: u64,
    pub first_error: Option<String>,
}

/// Outcome counts by class; their total is the number of requests sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcomes(BTreeMap<Outcome, OutcomeCount>);

/// Longest error text kept per class; server error bodies can be megabytes.
const MAX_ERROR_TEXT: usize = 500;

impl Outcomes {
    /// Count one request's outcome, keeping the error text if it is the class's first.
    pub fn add(&mut self, outcome: Outcome, error: Option<&str>) {
        self.add_n(outcome, 1, error);
    }

    /// Count `n` requests of one class.
    pub fn add_n(&mut self, outcome: Outcome, n: u64, error: Option<&str>) {
        if n == 0 {
            return;
        }
        let entry = self.0.entry(outcome).or_default();
        entry.count += n;
        if entry.first_error.is_none()
            && let Some(text) = error
        {
            entry.first_error = Some(truncate(text, MAX_ERROR_TEXT));
        }
    }

    /// Add another set of counts (keeps our first error text where we have one).
    pub fn merge(&mut self, other: &Outcomes) {
        for (outcome, c) in &other.0 {
            self.add_n(*outcome, c.count, c.first_error.as_deref());
        }
    }

    /// Requests sent: the sum over every class.
    pub fn sent(&self) -> u64 {
        self.0.values().map(|c| c.count).sum()
    }

    /// Requests that succeeded.
    pub fn ok(&self) -> u64 {
        self.count(Outcome::Ok)
    }

    /// Requests that did not succeed (every class but ok).
    pub fn failed(&self) -> u64 {
        self.sent() - self.ok()
    }

    /// Count of one class.
    pub fn count(&self, outcome: Outcome) -> u64 {
        self.0.get(&outcome).map_or(0, |c| c.count)
    }

    /// Classes in a stable order (ok first, then by name order of the enum).
    pub fn iter(&self) -> impl Iterator<Item = (Outcome, &OutcomeCount)> {
        self.0.iter().map(|(o, c)| (*o, c))
    }

    /// Failure classes only.
    pub fn failures(&self) -> impl Iterator<Item = (Outcome, &OutcomeCount)> {
        self.iter().filter(|(o, _)| !o.is_ok())
    }

    /// True when no request was counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for o in [
            Outcome::Ok,
            Outcome::Http(429),
            Outcome::Http(500),
            Outcome::Connect,
            Outcome::Timeout,
            Outcome::StreamTruncated,
            Outcome::ServerErrorEvent,
            Outcome::BadPayload,
            Outcome::ResponseTooLarge,
            Outcome::NoResponse,
            Outcome::Empty,
            Outcome::Cancelled,
            Outcome::ClientFault,
            Outcome::InvalidOutput,
        ] {
            assert_eq!(o.to_string().parse::<Outcome>().unwrap(), o);
        }
        assert!("http_x".parse::<Outcome>().is_err());
        assert!("weird".parse::<Outcome>().is_err());
    }

    #[test]
    fn sent_is_sum_of_classes_and_first_error_kept() {
        let mut a = Outcomes::default();
        a.add(Outcome::Ok, None);
        a.add(Outcome::Http(500), Some("first"));
        a.add(Outcome::Http(500), Some("second"));
        let mut b = Outcomes::default();
        b.add(Outcome::Timeout, Some("slow"));
        b.add(Outcome::Http(500), Some("third"));
        a.merge(&b);
        assert_eq!(a.sent(), 5);
        assert_eq!(a.ok(), 1);
        assert_eq!(a.failed(), 4);
        assert_eq!(a.count(Outcome::Http(500)), 3);
        let first = a.iter().find(|(o, _)| *o == Outcome::Http(500)).unwrap().1;
        assert_eq!(first.first_error.as_deref(), Some("first"));
    }

    #[test]
    fn long_error_text_is_truncated_on_a_char_boundary() {
        let mut a = Outcomes::default();
        let long = "é".repeat(1000);
        a.add(Outcome::BadPayload, Some(&long));
        let kept = a.iter().next().unwrap().1.first_error.clone().unwrap();
        assert!(kept.len() <= MAX_ERROR_TEXT + "…".len());
    }
}
