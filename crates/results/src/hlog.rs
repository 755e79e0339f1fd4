//! `intervals.hlog`: the HdrHistogram interval log (format 1.3) that
//! HdrHistogram's own tools read (`HistogramLogProcessor`,
//! HistogramLogAnalyzer, the `hdrhistogram` crate's `IntervalLogIterator`).
//!
//! One line per metric and interval, tagged with the metric's name
//! (`Tag=ttft,...`), holding that interval's fleet-wide histogram in the
//! compressed V2 encoding. Values are microseconds (thousandths of a token per
//! second for `output_tps_per_request`); the `Interval_Max` column is divided
//! by 1000 (ms). Timestamps are seconds since `BaseTime`, the first step's
//! start barrier, so every step of a sweep lies on one time line.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use base64::Engine as _;
use cicada_metrics::{Metric, MetricSet};

/// Divisor of the `Interval_Max` column: µs -> ms.
const MAX_VALUE_DIVISOR: f64 = 1000.0;

/// Streams interval histograms to an interval log.
pub struct HlogWriter {
    w: BufWriter<File>,
    base_unix: f64,
}

impl std::fmt::Debug for HlogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HlogWriter")
            .field("base_unix", &self.base_unix)
            .finish()
    }
}

impl HlogWriter {
    /// Create (or replace) the log with its header; timestamps count from `base_unix`.
    pub fn create(path: &Path, base_unix: f64) -> std::io::Result<Self> {
        let mut w = BufWriter::new(File::create(path)?);
        write_header(&mut w, base_unix)?;
        w.flush()?;
        Ok(Self { w, base_unix })
    }

    /// Write one interval's histograms. `stage_start_unix` is the step's
    /// barrier; the interval starts `start_s` after it.
    pub fn write(
        &mut self,
        stage_start_unix: f64,
        start_s: f64,
        length_s: f64,
        set: &MetricSet,
    ) -> std::io::Result<()> {
        let start = (stage_start_unix - self.base_unix).max(0.0) + start_s;
        for (metric, h) in set.non_empty() {
            if !Metric::REQUEST.contains(&metric) {
                continue;
            }
            let blob = base64::engine::general_purpose::STANDARD.encode(h.encode());
            writeln!(
                self.w,
                "Tag={},{start:.3},{length_s:.3},{:.3},{blob}",
                metric.name(),
                h.max() as f64 / MAX_VALUE_DIVISOR,
            )?;
        }
        self.w.flush()
    }
}

fn write_header(w: &mut impl Write, base_unix: f64) -> std::io::Result<()> {
    let when = super::rfc3339(base_unix);
    writeln!(w, "#[Logged with cicada {}]", crate::VERSION)?;
    writeln!(w, "#[Histogram log format version 1.3]")?;
    writeln!(
        w,
        "#[StartTime: {base_unix:.3} (seconds since epoch), {when}]"
    )?;
    writeln!(w, "#[BaseTime: {base_unix:.3} (seconds since epoch)]")?;
    writeln!(w, "#[MaxValueDivisor: {MAX_VALUE_DIVISOR:.3}]")?;
    writeln!(
        w,
        "#[cicada: one Tag per metric; values in microseconds (output_tps_per_request: thousandths of a token/s); Interval_Max in ms]"
    )?;
    writeln!(
        w,
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use std::time::Duration;

    fn set(values: &[u64]) -> MetricSet {
        let mut s = MetricSet::default();
        for v in values {
            s.histogram_mut(Metric::Ttft).record(*v);
            s.histogram_mut(Metric::E2el).record(v * 10);
        }
        s
    }

    /// The log reads back with the hdrhistogram crate's interval-log reader and
    /// its V2 deserialiser: same tags, timestamps and histograms.
    #[test]
    fn the_log_reads_back_with_the_standard_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("intervals.hlog");
        let base = 1_700_000_000.25;
        let mut w = HlogWriter::create(&path, base).unwrap();
        let first = set(&[1_000, 2_000, 3_000]);
        let second = set(&[50_000]);
        w.write(base, 0.0, 1.0, &first).unwrap();
        // a later step whose barrier came 10 s after the first
        w.write(base + 10.0, 2.0, 1.0, &second).unwrap();
        drop(w);
        let bytes = std::fs::read(&path).unwrap();
        let mut intervals = Vec::new();
        let mut start_time = None;
        let mut base_time = None;
        for entry in IntervalLogIterator::new(&bytes) {
            match entry.unwrap() {
                LogEntry::StartTime(t) => start_time = Some(t),
                LogEntry::BaseTime(t) => base_time = Some(t),
                LogEntry::Interval(h) => {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(h.encoded_histogram())
                        .unwrap();
                    let hist: Histogram<u64> =
                        Deserializer::new().deserialize(&mut &raw[..]).unwrap();
                    intervals.push((
                        h.tag().map(|t| t.as_str().to_string()),
                        h.start_timestamp(),
                        h.duration(),
                        h.max(),
                        hist,
                    ));
                }
            }
        }
        assert_eq!(start_time, Some(Duration::from_millis(1_700_000_000_250)));
        assert_eq!(base_time, start_time);
        assert_eq!(intervals.len(), 4, "two metrics in each of two intervals");
        let (tag, start, len, max, hist) = &intervals[0];
        assert_eq!(tag.as_deref(), Some("ttft"));
        assert_eq!(*start, Duration::ZERO);
        assert_eq!(*len, Duration::from_secs(1));
        assert!((max - 3.0).abs() < 0.01, "max in ms: {max}");
        assert_eq!(hist, &*first.histogram(Metric::Ttft).hdr());
        let (tag, start, _, _, hist) = &intervals[3];
        assert_eq!(tag.as_deref(), Some("e2el"));
        assert_eq!(*start, Duration::from_secs(12));
        assert_eq!(hist, &*second.histogram(Metric::E2el).hdr());
    }
}
