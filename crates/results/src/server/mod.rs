//! What the servers said about a run: their Prometheus `/metrics` text
//! (`prom`), and the figures read from the changes between two scrapes
//! (speculative-decoding acceptance, prefix-cache hit rate, preemptions,
//! peak KV-cache usage, server-side TTFT and queue time), per replica and
//! for the fleet. The coordinator scrapes; this is what it makes of it.

mod figures;
mod names;
mod prom;

pub use figures::{Bucket, GaugeTrack, HistFigures, Raw, ServerFigures};
pub use prom::{Exposition, Histogram, Sample};

/// Server-side figures per target (in `target.urls` order) and for the fleet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerView {
    pub targets: Vec<Option<ServerFigures>>,
    pub total: Option<ServerFigures>,
}

impl ServerView {
    /// Figures of each replica's changes, and of their sum for the fleet.
    pub fn of(raws: &[Option<Raw>], replicas: usize) -> ServerView {
        let mut view = ServerView {
            targets: vec![None; replicas],
            total: None,
        };
        let mut fleet: Option<Raw> = None;
        for (slot, raw) in view.targets.iter_mut().zip(raws) {
            if let Some(raw) = raw {
                *slot = Some(raw.figures());
                fleet.get_or_insert_with(Raw::default).merge(raw);
            }
        }
        view.total = fleet.map(|f| f.figures());
        view
    }
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
