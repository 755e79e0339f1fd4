//! Generated gRPC types for the coordinator <-> worker protocol (`proto/cicada.proto`),
//! and their conversion to and from the domain types of `cicada-metrics`.
//!
//! Only the coordinator and worker edges use the wire types; they convert into
//! domain types right away with the functions in [`convert`].

pub mod convert;

/// Version 1 of the protocol (generated code).
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("cicada.v1");
}

pub use v1::*;
