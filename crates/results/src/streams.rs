//! Files written while a run goes, not at its end: `timeseries.csv` and the
//! HdrHistogram interval log from each interval as the merge finalises it,
//! and `requests.jsonl` from the per-request lines workers send with their
//! reports. Nothing here keeps a run's history in memory.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use cicada_metrics::{Metric, MetricSet};
use cicada_scenarios::Scenario;

use super::hlog::HlogWriter;
use super::timeseries::{IntervalPlace, TimeseriesWriter};
use crate::error::WriteError;

/// The name of a file written beside the result: `result.json` gives plain
/// `name`; another `output.result_filename` prefixes its stem
/// (`llama-c64.json` -> `llama-c64-timeseries.csv`), so runs sharing a
/// directory keep their own files.
pub fn companion(result_filename: &str, name: &str) -> String {
    let stem = result_filename
        .rsplit_once('.')
        .map_or(result_filename, |(stem, _)| stem);
    if stem == "result" || stem.is_empty() {
        name.to_string()
    } else {
        format!("{stem}-{name}")
    }
}

/// The run's streamed files, written step after step.
#[derive(Debug, Default)]
pub struct RunFiles {
    timeseries: Option<TimeseriesWriter>,
    /// Where the interval log goes; created at the first barrier (its BaseTime).
    hlog_path: Option<PathBuf>,
    hlog: Option<HlogWriter>,
    details: Option<BufWriter<File>>,
    /// The first write error, reported when the step ends.
    error: Option<WriteError>,
    paths: Vec<PathBuf>,
    /// The step being written (0 without a sweep).
    step: u32,
    /// Its start barrier, once passed.
    started_unix: Option<f64>,
    /// Metrics left out of the files (see [`crate::hidden_metrics`]).
    hidden: &'static [Metric],
}

impl RunFiles {
    /// Create (replacing) the files the scenario asks for in its output directory.
    pub fn create(s: &Scenario) -> Result<Self, WriteError> {
        let dir = &s.output.dir;
        let creating = |path: &Path| {
            let path = path.to_path_buf();
            move |source| WriteError::Create { path, source }
        };
        std::fs::create_dir_all(dir).map_err(creating(dir))?;
        let name = |n: &str| dir.join(companion(&s.output.result_filename, n));
        let mut files = RunFiles::default();
        let ts = name("timeseries.csv");
        files.timeseries = Some(TimeseriesWriter::create(&ts).map_err(creating(&ts))?);
        files.paths.push(ts);
        if s.output.hlog {
            let p = name("intervals.hlog");
            // replace a previous run's log now, even if this run never starts
            File::create(&p).map_err(creating(&p))?;
            files.hlog_path = Some(p.clone());
            files.paths.push(p);
        }
        if s.output.save_detailed {
            let p = name("requests.jsonl");
            let f = File::create(&p).map_err(creating(&p))?;
            files.details = Some(BufWriter::new(f));
            files.paths.push(p);
        }
        Ok(files)
    }

    /// The files being written.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    fn fail(&mut self, what: &str, e: std::io::Error) {
        if self.error.is_none() {
            tracing::error!(file = what, error = %e, "writing a result file failed");
            self.error = Some(WriteError::Write {
                path: PathBuf::from(what),
                source: e,
            });
        }
    }

    /// Step `step` (0 without a sweep) begins; `scenario` is the step's (it
    /// says which metrics mean nothing there).
    pub fn begin_step(&mut self, step: u32, scenario: &Scenario) {
        self.step = step;
        self.started_unix = None;
        self.hidden = super::hidden_metrics(scenario);
    }

    /// The step's start barrier happened at `started_unix` (Unix seconds).
    pub fn barrier(&mut self, started_unix: f64) {
        self.started_unix = Some(started_unix);
        if self.hlog.is_none()
            && let Some(p) = self.hlog_path.clone()
        {
            match HlogWriter::create(&p, started_unix) {
                Ok(w) => self.hlog = Some(w),
                Err(e) => {
                    self.hlog_path = None;
                    self.fail(&display(&p), e);
                }
            }
        }
    }

    /// Interval `index` (from `start_s` after the barrier, `length_s` long)
    /// is final; `set` is the fleet's merged measurements of it.
    pub fn interval(
        &mut self,
        (index, start_s, length_s): (u64, f64, f64),
        set: &MetricSet,
        in_flight: u64,
    ) {
        let place = IntervalPlace {
            step: self.step,
            index,
            start_s,
            length_s,
        };
        let shown;
        let set = if self.hidden.is_empty() {
            set
        } else {
            let mut s = set.clone();
            super::hide(&mut s, self.hidden);
            shown = s;
            &shown
        };
        if let Some(w) = self.timeseries.as_mut()
            && let Err(e) = w.write(place, set, in_flight)
        {
            self.timeseries = None;
            self.fail("timeseries.csv", e);
        }
        if let (Some(w), Some(start)) = (self.hlog.as_mut(), self.started_unix)
            && let Err(e) = w.write(start, start_s, length_s, set)
        {
            self.hlog = None;
            self.fail("intervals.hlog", e);
        }
    }

    /// A worker sent per-request lines (JSONL).
    pub fn details(&mut self, worker: u32, jsonl: &[u8]) {
        let Some(w) = self.details.as_mut() else {
            tracing::debug!(worker, "per-request lines arrived but none are saved");
            return;
        };
        let mut res = w.write_all(jsonl);
        if res.is_ok() && !jsonl.ends_with(b"\n") {
            res = w.write_all(b"\n");
        }
        if let Err(e) = res {
            self.details = None;
            self.fail("requests.jsonl", e);
        }
    }

    /// Flush after a step; fails with the first write error seen, if any.
    pub fn end_step(&mut self) -> Result<(), WriteError> {
        if let Some(d) = self.details.as_mut()
            && let Err(e) = d.flush()
        {
            self.fail("requests.jsonl", e);
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::{Metric, Outcome};

    #[test]
    fn companion_names_follow_the_result_filename() {
        assert_eq!(companion("result.json", "report.html"), "report.html");
        assert_eq!(
            companion("llama-c64.json", "timeseries.csv"),
            "llama-c64-timeseries.csv"
        );
        assert_eq!(companion("out", "intervals.hlog"), "out-intervals.hlog");
    }

    #[test]
    fn stages_stream_into_one_set_of_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Scenario::default();
        s.output.dir = dir.path().join("out");
        s.output.save_detailed = true;
        let mut files = RunFiles::create(&s).unwrap();
        assert_eq!(files.paths().len(), 3);
        let mut set = MetricSet::default();
        set.count_outcome(Outcome::Ok, None);
        set.histogram_mut(Metric::Ttft).record(5_000);
        for step in [1, 2] {
            files.begin_step(step, &s);
            files.barrier(1_000.0 + f64::from(step));
            files.interval((0, 0.0, 1.0), &set, 0);
            files.details(0, b"{\"index\":1}\n{\"index\":2}");
            files.end_step().unwrap();
        }
        let ts = std::fs::read_to_string(dir.path().join("out/timeseries.csv")).unwrap();
        assert!(ts.lines().any(|l| l.starts_with("1,0,0,1,ttft,ms,p50,")));
        assert!(ts.lines().any(|l| l.starts_with("2,0,0,1,ttft,ms,p50,")));
        let jsonl = std::fs::read_to_string(dir.path().join("out/requests.jsonl")).unwrap();
        assert_eq!(jsonl.lines().count(), 4);
        let hlog = std::fs::read_to_string(dir.path().join("out/intervals.hlog")).unwrap();
        assert!(hlog.contains("#[BaseTime: 1001.000"), "{hlog}");
        assert!(hlog.contains("Tag=ttft,1.000,1.000,"), "{hlog}");
    }
}
