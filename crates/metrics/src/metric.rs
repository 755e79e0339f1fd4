use std::fmt;
use std::str::FromStr;

use crate::MetricsError;

/// A distribution cicada records per request (or per token), one HDR histogram each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// Time to first token: first content event minus send.
    Ttft,
    /// Time per output token after the first, per request.
    Tpot,
    /// Inter-token latency, one sample per token (an event's gap split over its tokens).
    Itl,
    /// Inter-chunk latency, one sample per content event gap.
    Icl,
    /// End-to-end latency: last content event minus send.
    E2el,
    /// TTFT measured from the intended send time (coordinated-omission corrected).
    TtftCo,
    /// E2EL measured from the intended send time (coordinated-omission corrected).
    E2elCo,
    /// Send minus intended send: dispatch lateness plus waiting for a concurrency slot.
    ScheduleLag,
    /// E2EL divided by output tokens.
    TokenLatency,
    /// Decode speed seen by one request: 1 / TPOT.
    OutputTpsPerRequest,
    /// The server's own prompt processing time for a request (llama.cpp `timings.prompt_ms`).
    ServerPromptTime,
    /// Client TTFT minus the server's prompt time: queueing, network and client.
    TtftMinusServerPrompt,
    /// The server's own time per generated token (llama.cpp `timings.predicted_per_token_ms`).
    ServerTpot,
    /// Lateness of the worker's runtime ticker: how long the client could not run.
    RuntimeStall,
    /// Time to first answer token: the first event carrying answer text (not
    /// reasoning) minus send; requests that reasoned only.
    Ttfa,
    /// Reasoning duration: first reasoning event to the first answer event
    /// (or to the last reasoning event when no answer came).
    ReasoningTime,
    /// The answer's time per output token after its first (answer events only).
    AnswerTpot,
    /// The answer's inter-token latency, one sample per answer token.
    AnswerItl,
    /// Items (embedding inputs) a successful pooling request carried.
    BatchSize,
    /// TTFT of the first turn of multi-turn sessions.
    TtftFirstTurn,
    /// TTFT of the later turns of multi-turn sessions (a growing prefix).
    TtftLaterTurns,
    /// TTFT of session turns 2 (one answered request before them on their path).
    TtftTurn2,
    /// TTFT of session turns 3.
    TtftTurn3,
    /// TTFT of session turns 4.
    TtftTurn4,
    /// TTFT of session turns 5 to 8.
    TtftTurn5To8,
    /// TTFT of session turns 9 to 16.
    TtftTurn9To16,
    /// TTFT of session turns 17 and on.
    TtftTurn17Up,
    /// A completed session's duration: its first request's send to the end of its last step.
    SessionDuration,
    /// A completed session's time in tool waits, summed over its branches.
    SessionToolTime,
    /// A completed session's time at the server (its requests' send to end), summed.
    SessionServerTime,
    /// Requests a completed session sent, its sub-agents' included.
    SessionRequests,
}

/// How a metric's raw integer values are scaled for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Recorded in microseconds, shown in milliseconds.
    Micros,
    /// Recorded in thousandths of a token per second, shown in tokens per second.
    MilliTokensPerSecond,
    /// A count of items, recorded and shown as it is.
    Items,
}

impl Unit {
    /// Factor that turns a raw value into the display unit.
    pub fn display_scale(self) -> f64 {
        match self {
            Unit::Micros => 1e-3,
            Unit::MilliTokensPerSecond => 1e-3,
            Unit::Items => 1.0,
        }
    }

    /// Suffix used in field names and labels (`ms`, `tok_s`).
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Micros => "ms",
            Unit::MilliTokensPerSecond => "tok_s",
            Unit::Items => "items",
        }
    }

    /// What one raw recorded value counts (`us`, `milli_tok_s`), so a
    /// histogram written to a file says how to read its integers.
    pub fn recorded(self) -> &'static str {
        match self {
            Unit::Micros => "us",
            Unit::MilliTokensPerSecond => "milli_tok_s",
            Unit::Items => "items",
        }
    }
}

impl Metric {
    /// Every request metric, in report order.
    pub const REQUEST: [Metric; 18] = [
        Metric::Ttft,
        Metric::Tpot,
        Metric::Itl,
        Metric::Icl,
        Metric::E2el,
        Metric::TtftCo,
        Metric::E2elCo,
        Metric::ScheduleLag,
        Metric::TokenLatency,
        Metric::OutputTpsPerRequest,
        Metric::ServerPromptTime,
        Metric::TtftMinusServerPrompt,
        Metric::ServerTpot,
        Metric::Ttfa,
        Metric::ReasoningTime,
        Metric::AnswerTpot,
        Metric::AnswerItl,
        Metric::BatchSize,
    ];

    /// The reasoning figures, measured on requests that reasoned only.
    pub const REASONING: [Metric; 4] = [
        Metric::Ttfa,
        Metric::ReasoningTime,
        Metric::AnswerTpot,
        Metric::AnswerItl,
    ];

    /// Metrics measured from the intended send time `t_sched`: they mean
    /// something only where the load intended send times (a rate, a trace,
    /// closed-loop users), not where everything is due at the barrier.
    pub const FROM_SCHEDULE: [Metric; 3] = [Metric::TtftCo, Metric::E2elCo, Metric::ScheduleLag];

    /// Every metric including the worker's health metrics.
    pub const ALL: [Metric; 31] = [
        Metric::Ttft,
        Metric::Tpot,
        Metric::Itl,
        Metric::Icl,
        Metric::E2el,
        Metric::TtftCo,
        Metric::E2elCo,
        Metric::ScheduleLag,
        Metric::TokenLatency,
        Metric::OutputTpsPerRequest,
        Metric::ServerPromptTime,
        Metric::TtftMinusServerPrompt,
        Metric::ServerTpot,
        Metric::RuntimeStall,
        Metric::Ttfa,
        Metric::ReasoningTime,
        Metric::AnswerTpot,
        Metric::AnswerItl,
        Metric::BatchSize,
        Metric::TtftFirstTurn,
        Metric::TtftLaterTurns,
        Metric::TtftTurn2,
        Metric::TtftTurn3,
        Metric::TtftTurn4,
        Metric::TtftTurn5To8,
        Metric::TtftTurn9To16,
        Metric::TtftTurn17Up,
        Metric::SessionDuration,
        Metric::SessionToolTime,
        Metric::SessionServerTime,
        Metric::SessionRequests,
    ];

    /// TTFT by turn index, after the first turn (`ttft_first_turn`), in order.
    pub const TTFT_BY_TURN: [Metric; 6] = [
        Metric::TtftTurn2,
        Metric::TtftTurn3,
        Metric::TtftTurn4,
        Metric::TtftTurn5To8,
        Metric::TtftTurn9To16,
        Metric::TtftTurn17Up,
    ];

    /// The per-session figures, recorded once per completed session.
    pub const SESSION: [Metric; 4] = [
        Metric::SessionDuration,
        Metric::SessionToolTime,
        Metric::SessionServerTime,
        Metric::SessionRequests,
    ];

    /// The TTFT-by-turn histogram of a turn with `index` answered requests
    /// before it on its path (`None` for the first turn, index 0).
    pub fn ttft_of_turn(index: u64) -> Option<Metric> {
        Some(match index {
            0 => return None,
            1 => Metric::TtftTurn2,
            2 => Metric::TtftTurn3,
            3 => Metric::TtftTurn4,
            4..=7 => Metric::TtftTurn5To8,
            8..=15 => Metric::TtftTurn9To16,
            _ => Metric::TtftTurn17Up,
        })
    }

    /// Stable name used on the wire, in JSON keys and CSV columns.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::Icl => "icl",
            Metric::E2el => "e2el",
            Metric::TtftCo => "ttft_co",
            Metric::E2elCo => "e2el_co",
            Metric::ScheduleLag => "schedule_lag",
            Metric::TokenLatency => "token_latency",
            Metric::OutputTpsPerRequest => "output_tps_per_request",
            Metric::ServerPromptTime => "server_prompt_time",
            Metric::TtftMinusServerPrompt => "ttft_minus_server_prompt",
            Metric::ServerTpot => "server_tpot",
            Metric::RuntimeStall => "runtime_stall",
            Metric::Ttfa => "ttfa",
            Metric::ReasoningTime => "reasoning_time",
            Metric::AnswerTpot => "answer_tpot",
            Metric::AnswerItl => "answer_itl",
            Metric::BatchSize => "batch_size",
            Metric::TtftFirstTurn => "ttft_first_turn",
            Metric::TtftLaterTurns => "ttft_later_turns",
            Metric::TtftTurn2 => "ttft_turn_2",
            Metric::TtftTurn3 => "ttft_turn_3",
            Metric::TtftTurn4 => "ttft_turn_4",
            Metric::TtftTurn5To8 => "ttft_turn_5_8",
            Metric::TtftTurn9To16 => "ttft_turn_9_16",
            Metric::TtftTurn17Up => "ttft_turn_17_up",
            Metric::SessionDuration => "session_duration",
            Metric::SessionToolTime => "session_tool_time",
            Metric::SessionServerTime => "session_server_time",
            Metric::SessionRequests => "session_requests",
        }
    }

    /// Human label used in the console ("TTFT", "ITL", ...).
    pub fn label(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::Itl => "ITL",
            Metric::Icl => "ICL",
            Metric::E2el => "E2EL",
            Metric::TtftCo => "TTFT (from schedule)",
            Metric::E2elCo => "E2EL (from schedule)",
            Metric::ScheduleLag => "schedule lag",
            Metric::TokenLatency => "token latency",
            Metric::OutputTpsPerRequest => "output tok/s per request",
            Metric::ServerPromptTime => "server prompt time",
            Metric::TtftMinusServerPrompt => "TTFT minus server prompt time",
            Metric::ServerTpot => "server time per output token",
            Metric::RuntimeStall => "runtime stall",
            Metric::Ttfa => "TTFA",
            Metric::ReasoningTime => "reasoning time",
            Metric::AnswerTpot => "answer TPOT",
            Metric::AnswerItl => "answer ITL",
            Metric::BatchSize => "batch size",
            Metric::TtftFirstTurn => "TTFT (first turn)",
            Metric::TtftLaterTurns => "TTFT (later turns)",
            Metric::TtftTurn2 => "TTFT (turn 2)",
            Metric::TtftTurn3 => "TTFT (turn 3)",
            Metric::TtftTurn4 => "TTFT (turn 4)",
            Metric::TtftTurn5To8 => "TTFT (turns 5-8)",
            Metric::TtftTurn9To16 => "TTFT (turns 9-16)",
            Metric::TtftTurn17Up => "TTFT (turns 17+)",
            Metric::SessionDuration => "session duration",
            Metric::SessionToolTime => "session time in tools",
            Metric::SessionServerTime => "session time at the server",
            Metric::SessionRequests => "requests per session",
        }
    }

    /// Unit of the raw recorded values.
    pub fn unit(self) -> Unit {
        match self {
            Metric::OutputTpsPerRequest => Unit::MilliTokensPerSecond,
            Metric::BatchSize | Metric::SessionRequests => Unit::Items,
            _ => Unit::Micros,
        }
    }

    /// Position in [`Metric::ALL`], for array-indexed storage.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = MetricsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Metric::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| MetricsError::UnknownName {
                kind: "metric",
                name: s.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_index_matches_position() {
        for (i, m) in Metric::ALL.into_iter().enumerate() {
            assert_eq!(m.index(), i);
            assert_eq!(m.name().parse::<Metric>().unwrap(), m);
        }
        assert!("nope".parse::<Metric>().is_err());
    }
}
