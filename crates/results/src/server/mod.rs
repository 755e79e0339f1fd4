//! What the servers said about a run: the figures read from the changes
//! between two scrapes of their `/metrics` (speculative-decoding
//! acceptance, prefix-cache hit rate, preemptions, peak KV-cache usage,
//! server-side TTFT and queue time), per replica and for the fleet.
//! `cicada-target` scrapes and reads them (`cicada_target::prom`); this is
//! how results hold them.

mod figures;

pub use figures::{Bucket, HistFigures, ServerFigures};

/// Server-side figures per target (in `target.urls` order) and for the fleet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerView {
    pub targets: Vec<Option<ServerFigures>>,
    pub total: Option<ServerFigures>,
}

/// What the servers did over the stage and over each `[[stages]]` window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepServerViews {
    /// The whole step, from the scrape before the barrier to the one after.
    pub whole: ServerView,
    /// One per window, in order: window `i` runs from the scrape at its start
    /// (the one before the barrier for the first) to the scrape at the next
    /// window's start (the one after the run for the last).
    pub windows: Vec<ServerView>,
}
