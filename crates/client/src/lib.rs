//! HOW cicada talks to inference servers: everything between a pool entry and
//! a classified, timestamped [`exchange::Exchange`].
//!
//! - [`backend`]: one serving API per file (OpenAI and its vLLM, SGLang and
//!   llama.cpp dialects, TGI, llama.cpp's native route, Triton): the request
//!   body, and what each streamed event or whole body says.
//! - [`sse`]: server-sent-events framing on the hot path.
//! - [`http`]: connections to a target (TLS trust, keep-alive, headers and
//!   the API key from this process's environment).
//! - [`exchange`]: one request on the wire, read to its end and classified
//!   into exactly one outcome.
//! - [`thinking`]: a reasoning model's stream split into its reasoning and
//!   answer events as they arrive.
//! - [`clock`]: the stage's time base every timestamp is read from.
//!
//! The worker drives load with it; the coordinator's readiness probe and
//! server-metrics scraper use the same connections, so all three talk alike.
//! Of a plan it knows only the resolved target it is built from (its
//! settings, headers and codec come `From` it); schedules and the
//! coordinator are not its business. What a request is made of (API,
//! sampling, prompt, TLS, HTTP version, addresses, proxy) it takes from
//! `cicada-request`, which the plan crate shares.

pub mod backend;
pub mod clock;
pub mod exchange;
pub mod http;
pub mod sse;
pub mod sys;
mod target;
pub mod thinking;
pub mod tls;
