//! Wire <-> domain conversion, the one place either side turns a `v1`
//! message into its own types: measurements (`metrics`) and the plan (`plan`).

mod media;
mod metrics;
mod plan;
mod shape;

pub use metrics::{decode_histograms, decode_set, encode_histograms, encode_set};
pub use plan::{PLAN_FORMAT, PlanError, decode_plan, encode_plan};
