//! cicada's built-in mock inference server.
//!
//! An OpenAI-compatible streaming server whose timing is exact and known: each
//! token is scheduled at an absolute deadline from the request's arrival, so
//! the schedule holds at thousands of concurrent streams, and the server
//! measures its own lateness so tests can tell its error from the client's.
//! Faults (HTTP errors, resets, malformed or in-band error events, stalls) are
//! injected at configured rates and counted, giving tests ground truth for
//! outcome classification. It is the quickstart's target, the tests' reference
//! and the user's way to measure the load generator's own ceiling.

mod config;
mod format;
mod prefix_cache;
mod request;
mod server;
mod stats;
mod stream;

pub use config::{Fault, FaultRates, MockConfig, Truth};
/// The words the mock generates, one token each (with their leading space).
pub use format::WORDS as VOCABULARY;
pub use request::fingerprint;
pub use server::{MockError, MockServer};
pub use stats::{LatenessStats, LoggedMessage, LoggedRequest, MockStats};
