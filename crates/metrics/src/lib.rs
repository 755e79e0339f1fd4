//! What cicada measures, and how measurements from many workers become one exact answer.
//!
//! Workers turn each finished request into samples with [`MetricSet::observe`]; the
//! coordinator merges the sets it receives with [`MetricSet::merge`] and derives the
//! printed figures with [`Summary`]. Every definition here is documented in
//! `docs/METRICS.md`; keep the two in step.

mod concurrency;
mod counters;
mod error;
mod event_log;
mod histogram;
mod metric;
mod observe;
mod outcome;
mod reasoning;
mod record;
mod scope;
mod seconds;
mod set;
mod size;
mod slo;
mod summary;

pub use concurrency::{Concurrency, SLICE_US};
pub use counters::{Counter, Counters};
pub use error::MetricsError;
pub use event_log::{ContentEvent, EXACT_EVENTS, EventLog, Stretch};
pub use histogram::{LatencyHistogram, SIGNIFICANT_DIGITS};
pub use metric::{Metric, Unit};
pub use outcome::{Outcome, OutcomeCount, Outcomes};
pub use record::{
    EVENTS_OVER_USAGE_MIN, EVENTS_OVER_USAGE_RATIO, Events, MediaSent, Reasoning, RequestRecord,
    Resends, TokenSource,
};
pub use scope::Scope;
pub use seconds::{SecondBucket, Seconds};
pub use set::{MetricSet, Span};
pub use size::{ByteSize, SizeError};
pub use slo::Slo;
pub use summary::{DistributionStats, Summary};
