//! cicada's built-in mock inference server.
//!
//! A streaming server that speaks the OpenAI API (in vLLM's or llama.cpp's
//! dialect), TGI's `/generate_stream`, llama.cpp's `/completion` and Triton's
//! generate extension, and exposes vLLM's Prometheus `/metrics`. Its timing
//! is exact and known: each
//! token is scheduled at an absolute deadline from the request's arrival, so
//! the schedule holds at thousands of concurrent streams, and the server
//! measures its own lateness so tests can tell its error from the client's.
//! Faults (HTTP errors, resets, malformed or in-band error events, stalls) are
//! injected at configured rates and counted, giving tests ground truth for
//! outcome classification. Connections can end as real servers end them
//! (closed after every response like llama-server, or after an idle timeout
//! like uvicorn). It is the quickstart's target, the tests' reference
//! and the user's way to measure the load generator's own ceiling.

mod cache;
mod clock;
mod config;
mod connection;
mod form;
mod handler;
mod hooks;
mod pooling;
mod prom;
mod reply;
mod request;
mod routes;
mod server;
mod shaped;
mod stats;
mod stream;
mod wire;

/// The mock's specification; a scenario's `[mock]` section is this type.
pub use config::{Fault, FaultRates, MockApi, MockConfig, ReasoningField, Truth};
pub use handler::PROBE_HEADER;
pub use request::fingerprint;
pub use server::{MockError, MockServer, TlsFiles};
pub use stats::{LatenessStats, LoggedHook, LoggedMessage, LoggedRequest, MockStats};
/// The words the mock generates, one token each (with their leading space).
pub use wire::WORDS as VOCABULARY;
