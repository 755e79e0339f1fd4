//! What one request to an inference server is: the API dialect and server
//! family, the sampling, the prompt and its messages, and how to reach the
//! server (TLS trust, HTTP version, address choice, proxy, the most of one
//! response held at once).
//!
//! One definition of each, shared by the scenario crate (which reads them
//! from scenario files), the plan crate (which ships them to workers, hence
//! their serde spelling) and the client (which sends them), so none keeps a
//! copy of another's.

mod api;
mod check;
mod media;
mod prompt;
mod reach;
mod shape;
mod spelling;

pub use api::{ResolvedSampling, ServerFamily, WireApi};
pub use check::{Output, Structured, ToolCall};
pub use media::{Audio, Image, Media, MediaFile, WAV_HEADER_BYTES, synthetic_samples};
pub use prompt::{ChatMessage, Prompt};
pub use reach::{AddressChoice, DEFAULT_MAX_EVENT_SIZE, HttpVersion, ProxySetting, TlsSettings};
pub use shape::{OutputShape, ResponseFormat, ShapeError, Tool, ToolChoice};
pub use spelling::{Spelling, image_part_bytes};
