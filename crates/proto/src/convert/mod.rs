//! Wire <-> domain conversion, the one place either side turns a `v1`
//! message into its own types: measurements (`metrics`), the plan (`plan`) and the web UI's
//! changes to a running plan (`steer`).

mod media;
mod metrics;
mod plan;
mod shape;
mod steer;

pub use metrics::{decode_histograms, decode_set, encode_histograms, encode_set};
pub use plan::{
    DeflatedPool, PLAN_FORMAT, POOL_CHUNK_BYTES, PlanError, PoolReceiver, ReceivedPool,
    check_format, decode_plan, encode_plan,
};
pub use steer::{SteerError, decode_steer, encode_steer};
