//! The contract between the coordinator and its workers: what one worker
//! runs for one step (the [`Plan`]), the server as every worker reaches it
//! ([`ResolvedTarget`]), the seeded schedule and the arithmetic that stripes
//! it over workers, closed-loop users, and the pool entries a plan carries.
//!
//! Pure data and arithmetic: no I/O, no async runtime, no tokenizer. The
//! coordinator's scenario model (`cicada-scenarios`) builds plans; the wire
//! (`cicada-proto`) carries them; the worker runs them.

mod closed_loop;
pub mod models;
mod plan;
pub mod pool;
pub mod schedule;
mod sessions;
pub mod shape;
pub mod sharding;
mod target;
pub mod units;
pub mod workloads;

pub use closed_loop::{ClosedLoop, SEGMENT_SHIFT, Steer, UserStage};
pub use models::{ModelAssignment, WeightedModel};
pub use plan::{Drive, Plan, StageWindow, Stripe, stage_of, steer_windows};
pub use sessions::ConversationSettings;
pub use target::{
    AddressChoice, HttpVersion, ProxySetting, ResolvedSampling, ResolvedTarget, Routing,
    ServerFamily, TlsSettings, WireApi,
};
pub use workloads::WorkloadPart;
