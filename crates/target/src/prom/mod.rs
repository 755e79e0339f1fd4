//! Reading a server's Prometheus `/metrics`: the text format (`text`, a
//! lenient reader), which metric names each server family uses (`names`),
//! and the changes between two scrapes as the figures results hold
//! (`raw`). The scraper (`scrape`) is its only user besides tests.

mod names;
mod raw;
mod text;

pub use raw::{GaugeTrack, Raw, view_of};
pub use text::{Exposition, Histogram, Sample};
