//! Generated gRPC types for the coordinator <-> worker protocol (`proto/cicada.proto`),
//! and their conversion to and from the domain types of `cicada-metrics`.
//!
//! Only the coordinator and worker edges use the wire types; they convert into
//! domain types right away with the functions in [`convert`].

pub mod convert;

/// The protocol version every cicada binary of this build speaks: a worker's
/// Hello must carry the coordinator's, so one version's plans and reports are
/// only ever read by the same version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Largest message either side accepts (plans with big prompt pools).
pub const MAX_MESSAGE_BYTES: usize = 512 * 1024 * 1024;

/// Version 1 of the protocol (generated code).
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("cicada.v1");
}

pub use v1::*;
