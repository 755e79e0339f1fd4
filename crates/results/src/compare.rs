//! `cicada report`: read result files and turn each into a table row
//! (compare), or re-merge them into one (merge: histograms decoded and added
//! exactly, counts summed, throughputs over the wall-clock span the runs
//! cover together). Compare mode needs only vLLM's `--save-result` keys, so
//! `vllm bench serve` result files can sit beside cicada's.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use cicada_metrics::{Counter, LatencyHistogram, Metric, MetricSet, Outcome};

use super::document::{HISTOGRAM_ENCODING, RequestRate, ResultDocument};

/// Metrics in the table, with their vLLM key names.
pub const TABLE_METRICS: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

/// Percentiles of each metric kept per row (beside the mean).
pub const ROW_PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

/// What a table's ITL columns hold: one definition per table, never two.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ItlDefinition {
    /// cicada's ITL: each chunk's gap split over its tokens, one sample per token.
    #[default]
    PerToken,
    /// vLLM's ITL: one gap per streamed chunk (what cicada calls ICL).
    PerChunk,
}

impl ItlDefinition {
    /// The definition for a table of `files`: vLLM's (per chunk) as soon as
    /// one is a `vllm bench serve` file (it has no `cicada` section), since
    /// vLLM's files carry no per-token ITL; else cicada's (per token).
    pub fn for_files(files: &[ResultFile]) -> Self {
        if files.iter().any(|f| !f.is_cicada()) {
            ItlDefinition::PerChunk
        } else {
            ItlDefinition::PerToken
        }
    }

    /// Its name in `cicada report --format json` (`per_token`, `per_chunk`).
    pub fn name(self) -> &'static str {
        match self {
            ItlDefinition::PerToken => "per_token",
            ItlDefinition::PerChunk => "per_chunk",
        }
    }
}

/// A result file that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{path}: `{key}` {reason}")]
    Field {
        path: PathBuf,
        key: String,
        reason: String,
    },
}

/// One metric's figures in a row (ms).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    pub mean: Option<f64>,
    /// Values at [`ROW_PERCENTILES`].
    pub percentiles: [Option<f64>; 4],
}

impl Latency {
    /// The value at percentile `p`, when known.
    pub fn at(&self, p: f64) -> Option<f64> {
        ROW_PERCENTILES
            .iter()
            .position(|q| (q - p).abs() < 1e-9)
            .and_then(|i| self.percentiles[i])
    }
}

/// One row of the table: a run, or several merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub run: String,
    pub model: String,
    pub concurrency: String,
    pub duration_s: f64,
    pub completed: u64,
    pub failed: u64,
    pub request_throughput: f64,
    /// Absent for a run that generated nothing (a pooling run).
    pub output_throughput: Option<f64>,
    pub total_token_throughput: f64,
    pub request_goodput: Option<f64>,
    /// In [`TABLE_METRICS`] order.
    pub latencies: [Latency; 4],
    /// What the ITL figures are (the same for every row of a table).
    pub itl: ItlDefinition,
    /// The ITL figures are the file's ICL (`cicada.metrics.icl`): a cicada
    /// file in a per-chunk table.
    pub itl_from_icl: bool,
}

/// A parsed result file.
#[derive(Debug, Clone)]
pub struct ResultFile {
    pub path: PathBuf,
    doc: ResultDocument,
}

impl ResultFile {
    /// Read and parse one file.
    pub fn read(path: &Path) -> Result<Self, ReportError> {
        let read_err = |reason: String| ReportError::Read {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| read_err(e.to_string()))?;
        let doc: ResultDocument = serde_json::from_str(&text).map_err(|e| {
            if !e.is_data() {
                read_err(format!("not JSON: {e}"))
            } else if !text.trim_start().starts_with('{') {
                read_err("not a result file (expected a JSON object)".into())
            } else {
                read_err(format!("not a result file: {e}"))
            }
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            doc,
        })
    }

    /// The file's fields as read.
    pub fn document(&self) -> &ResultDocument {
        &self.doc
    }

    fn field(&self, key: &str, reason: &str) -> ReportError {
        ReportError::Field {
            path: self.path.clone(),
            key: key.to_string(),
            reason: reason.to_string(),
        }
    }

    /// A number the row cannot do without.
    fn required(&self, key: &str, v: Option<f64>) -> Result<f64, ReportError> {
        v.ok_or_else(|| self.field(key, "is missing or not a number"))
    }

    /// The file's label: the path as given.
    fn label(&self) -> String {
        self.path.display().to_string()
    }

    /// Written by `cicada run` (a `cicada` section), not by `vllm bench serve`.
    fn is_cicada(&self) -> bool {
        self.doc.cicada.is_some()
    }

    /// The file's ICL from `cicada.metrics.icl` (absent without samples).
    fn icl(&self) -> Latency {
        let stats = self.doc.cicada.as_ref().and_then(|c| {
            c.metrics
                .0
                .iter()
                .find(|(k, _)| k == Metric::Icl.name())
                .map(|(_, s)| s)
        });
        let Some(s) = stats else {
            return Latency::default();
        };
        Latency {
            mean: s.mean,
            percentiles: ROW_PERCENTILES.map(|p| {
                let key = format!("p{}", super::percentile_word(p));
                let at = s.percentiles.0.iter().find(|(k, _)| *k == key);
                at.and_then(|(_, v)| *v)
                    .or(if p == 50.0 { s.median } else { None })
            }),
        }
    }

    fn model(&self) -> String {
        self.doc.model_id.clone().unwrap_or_else(|| "-".to_string())
    }

    /// Users, concurrency cap, rate or "unbounded".
    fn concurrency(&self) -> String {
        let users = self
            .doc
            .cicada
            .as_ref()
            .and_then(|c| c.scenario.pointer("/load/users"))
            .and_then(serde_json::Value::as_f64);
        if let Some(u) = users {
            return format!("{u} users");
        }
        if let Some(c) = self.doc.max_concurrency {
            return format!("{}", f64::from(c));
        }
        match &self.doc.request_rate {
            Some(RequestRate::PerSecond(r)) => format!("{r} req/s"),
            _ => "unbounded".into(),
        }
    }

    /// A row from the file's own figures (vLLM's keys), its ITL columns
    /// holding `itl`: per chunk, a cicada file gives its ICL.
    pub fn row(&self, itl: ItlDefinition) -> Result<Row, ReportError> {
        let d = &self.doc;
        let itl_from_icl = itl == ItlDefinition::PerChunk && self.is_cicada();
        let latencies = TABLE_METRICS.map(|m| {
            if m == Metric::Itl && itl_from_icl {
                return self.icl();
            }
            let Some(l) = d.latencies.metric(m.name()) else {
                return Latency::default();
            };
            Latency {
                mean: l.mean,
                percentiles: ROW_PERCENTILES
                    .map(|p| l.at(p).or(if p == 50.0 { l.median } else { None })),
            }
        });
        Ok(Row {
            run: self.label(),
            model: self.model(),
            concurrency: self.concurrency(),
            duration_s: self.required("duration", d.duration)?,
            completed: self.required("completed", d.completed.map(|v| v as f64))? as u64,
            failed: d.failed.unwrap_or(0),
            request_throughput: self.required("request_throughput", d.request_throughput)?,
            // vLLM's and cicada's pooling results have none
            output_throughput: d.output_throughput,
            total_token_throughput: self
                .required("total_token_throughput", d.total_token_throughput)?,
            request_goodput: d.request_goodput,
            latencies,
            itl,
            itl_from_icl,
        })
    }

    /// The merged histograms, counters and outcomes this file carries.
    pub fn measurements(&self) -> Result<MetricSet, ReportError> {
        let cicada = self.doc.cicada.as_ref();
        let hists = cicada.and_then(|c| c.histograms.as_ref()).ok_or_else(|| {
            self.field(
                "cicada.histograms",
                "is missing: only result files written by `cicada run` can be merged",
            )
        })?;
        let mut set = MetricSet::default();
        for (name, h) in &hists.0 {
            let key = format!("cicada.histograms.{name}");
            let metric: Metric = name
                .parse()
                .map_err(|_| self.field(&key, "names an unknown metric"))?;
            if let Some(enc) = &h.encoding
                && enc != HISTOGRAM_ENCODING
            {
                return Err(self.field(&key, &format!("has an unknown encoding \"{enc}\"")));
            }
            let data = h
                .data
                .as_deref()
                .ok_or_else(|| self.field(&key, "has no `data`"))?;
            let blob = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|e| self.field(&key, &format!("`data` is not base64: {e}")))?;
            let decoded = LatencyHistogram::decode(&blob, h.sum, h.sum_sq)
                .map_err(|e| self.field(&key, &e.to_string()))?;
            let mut one = MetricSet::default();
            one.set_histogram(metric, decoded);
            set.merge(&one)
                .map_err(|e| self.field(&key, &e.to_string()))?;
        }
        match cicada.and_then(|c| c.outcomes.as_ref()) {
            Some(outcomes) => {
                for (class, v) in &outcomes.0 {
                    let o: Outcome = class.parse().map_err(|_| {
                        self.field(&format!("cicada.outcomes.{class}"), "is unknown")
                    })?;
                    set.outcomes.add_n(o, v.count, v.first_error.as_deref());
                }
            }
            None => {
                let completed = self.required("completed", self.doc.completed.map(|v| v as f64))?;
                set.outcomes.add_n(Outcome::Ok, completed as u64, None);
            }
        }
        for (name, n) in cicada.map(|c| &c.counters.0[..]).unwrap_or_default() {
            if let Ok(c) = name.parse::<Counter>() {
                set.counters.add(c, *n);
            }
        }
        Ok(set)
    }

    /// The measured window in Unix seconds: (start, end).
    pub fn window(&self) -> Result<(f64, f64), ReportError> {
        let cicada = self.doc.cicada.as_ref();
        let started = match cicada.and_then(|c| c.started_unix) {
            Some(t) => t,
            None => {
                let text = cicada
                    .and_then(|c| c.started_at.as_deref())
                    .ok_or_else(|| {
                        self.field(
                            "cicada.started_at",
                            "is missing: the run's start time is needed to merge",
                        )
                    })?;
                humantime::parse_rfc3339(text)
                    .map_err(|e| self.field("cicada.started_at", &e.to_string()))?
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64())
            }
        };
        let from = started + cicada.and_then(|c| c.window_start_s).unwrap_or(0.0);
        Ok((from, from + self.required("duration", self.doc.duration)?))
    }

    /// Whether the file reports goodput (SLOs were set).
    fn has_goodput(&self) -> bool {
        self.doc.request_goodput.is_some()
    }
}

/// Total length of the union of `windows`, seconds.
fn union_span(mut windows: Vec<(f64, f64)>) -> f64 {
    windows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (a, b) in windows {
        current = match current {
            Some((s, e)) if a <= e => Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + current.map_or(0.0, |(s, e)| e - s)
}

/// Values listed once each, joined.
fn distinct(values: impl Iterator<Item = String>, sep: &str) -> String {
    let mut seen: Vec<String> = Vec::new();
    for v in values {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    seen.join(sep)
}

/// One row for several runs: their measurements re-merged exactly.
///
/// Duration is the time the runs' measured windows cover together (runs made
/// at the same time overlap; runs made one after another add up, gaps left
/// out), and throughputs divide the summed counts by it.
pub fn merge(files: &[ResultFile]) -> Result<Row, ReportError> {
    let mut set = MetricSet::default();
    let mut windows = Vec::new();
    let mut goodput = false;
    for f in files {
        let m = f.measurements()?;
        set.merge(&m)
            .map_err(|e| f.field("cicada.histograms", &e.to_string()))?;
        windows.push(f.window()?);
        goodput |= f.has_goodput();
    }
    let duration_s = union_span(windows);
    let per_s = |n: u64| {
        if duration_s > 0.0 {
            n as f64 / duration_s
        } else {
            0.0
        }
    };
    let input = set.counter(Counter::InputTokens);
    let output = set.counter(Counter::OutputTokens);
    let latencies = TABLE_METRICS.map(|m| {
        let h = set.histogram(m);
        if h.is_empty() {
            return Latency::default();
        }
        let k = m.unit().display_scale();
        Latency {
            mean: Some(h.mean() * k),
            percentiles: ROW_PERCENTILES.map(|p| Some(h.quantile(p / 100.0) as f64 * k)),
        }
    });
    Ok(Row {
        run: format!("merged ({} runs)", files.len()),
        model: distinct(files.iter().map(ResultFile::model), ", "),
        concurrency: distinct(files.iter().map(ResultFile::concurrency), " + "),
        duration_s,
        completed: set.outcomes.ok(),
        failed: set.outcomes.failed(),
        request_throughput: per_s(set.outcomes.ok()),
        output_throughput: Some(per_s(output)),
        total_token_throughput: per_s(input + output),
        request_goodput: goodput.then(|| per_s(set.counter(Counter::Goodput))),
        latencies,
        itl: ItlDefinition::PerToken,
        itl_from_icl: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_of_overlapping_and_separate_windows() {
        assert_eq!(union_span(vec![(0.0, 10.0), (5.0, 12.0)]), 12.0);
        assert_eq!(union_span(vec![(20.0, 30.0), (0.0, 10.0)]), 20.0);
        assert_eq!(
            union_span(vec![(0.0, 10.0), (2.0, 3.0), (11.0, 12.0)]),
            11.0
        );
        assert_eq!(union_span(vec![]), 0.0);
    }

    /// Two result files re-merge to exactly the percentiles, mean and counts
    /// of one histogram fed both runs' samples.
    #[test]
    fn merging_result_files_equals_one_histogram_of_every_sample() {
        use crate::sample::result;
        use cicada_scenarios::Scenario;
        let dir = tempfile::tempdir().unwrap();
        let mut all = MetricSet::default();
        let mut paths = Vec::new();
        for (i, (n, scale)) in [(3_000u64, 7u64), (1_700, 131)].into_iter().enumerate() {
            let mut r = result(Scenario::default(), n, n / 2, i as u64 * 5);
            r.started_unix = 1_000.0 + 100.0 * i as f64;
            r.total.span.last_end_us = Some(10_000_000);
            r.total.counters.add(Counter::OutputTokens, n * 10);
            for k in 0..n {
                let v = 1_000 + (k * scale * 7919) % 900_000;
                r.total.histogram_mut(Metric::Ttft).record(v);
                r.total.histogram_mut(Metric::E2el).record(v * 3 + k);
                all.histogram_mut(Metric::Ttft).record(v);
                all.histogram_mut(Metric::E2el).record(v * 3 + k);
            }
            let p = dir.path().join(format!("r{i}.json"));
            std::fs::write(
                &p,
                serde_json::to_vec(&super::super::json::document(&r)).unwrap(),
            )
            .unwrap();
            paths.push(p);
        }
        let files: Vec<ResultFile> = paths.iter().map(|p| ResultFile::read(p).unwrap()).collect();
        let row = merge(&files).unwrap();
        assert_eq!(row.completed, 4_700);
        assert_eq!(row.failed, 5);
        // two 10 s windows 100 s apart
        assert_eq!(row.duration_s, 20.0);
        assert_eq!(row.output_throughput, Some(47_000.0 / 20.0));
        for (i, m) in [(0, Metric::Ttft), (3, Metric::E2el)] {
            let h = all.histogram(m);
            let l = &row.latencies[i];
            assert_eq!(l.mean, Some(h.mean() * 1e-3), "{m}");
            for p in ROW_PERCENTILES {
                assert_eq!(
                    l.at(p),
                    Some(h.quantile(p / 100.0) as f64 * 1e-3),
                    "{m} p{p}"
                );
            }
        }
        // the spread too, to the bit, whichever order the files come in
        for order in [[0, 1], [1, 0]] {
            let mut merged = MetricSet::default();
            for i in order {
                merged.merge(&files[i].measurements().unwrap()).unwrap();
            }
            for m in [Metric::Ttft, Metric::E2el] {
                let (a, b) = (merged.histogram(m), all.histogram(m));
                assert_eq!(a.sum_sq(), b.sum_sq(), "{m}");
                assert_eq!(a.std_dev().to_bits(), b.std_dev().to_bits(), "{m}");
            }
        }
        // compare mode reads the same files as they are
        let rows: Vec<Row> = files
            .iter()
            .map(|f| f.row(ItlDefinition::PerToken).unwrap())
            .collect();
        assert_eq!(rows[0].completed, 3_000);
        assert_eq!(rows[1].failed, 5);
    }

    /// A file of schema 1 (sums of squares as floats) still merges: it holds
    /// what the same run's schema 2 file holds (the committed sample result
    /// as the writer gave it before and after the change; its sums of squares
    /// are below 2^53, so its floats were exact).
    #[test]
    fn schema_1_files_still_merge() {
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let old = ResultFile::read(&fixtures.join("result-schema1.json")).unwrap();
        let new = ResultFile::read(&fixtures.join("result.json")).unwrap();
        assert_eq!(old.doc.schema_version, Some(1));
        assert_eq!(new.doc.schema_version, Some(2));
        let (a, b) = (old.measurements().unwrap(), new.measurements().unwrap());
        assert!(a.non_empty().count() > 3);
        assert_eq!(a, b);
        assert!(merge(&[old, new]).is_ok());
    }

    /// A `vllm bench serve --save-result` file, as vLLM 0.x writes it: its
    /// own extra keys and arrays are skipped, its figures read.
    #[test]
    fn vllm_save_result_files_read_as_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("vllm.json");
        std::fs::write(
            &p,
            r#"{"date": "20250101-120000", "endpoint_type": "openai-chat", "label": null,
                "backend": "openai-chat", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
                "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": 100,
                "request_rate": "inf", "burstiness": 1.0, "max_concurrency": null,
                "duration": 12.5, "completed": 100, "total_input_tokens": 51200,
                "total_output_tokens": 12800, "request_throughput": 8.0,
                "request_goodput": null, "output_throughput": 1024.0,
                "total_token_throughput": 5120.0, "max_output_tokens_per_s": 1300.0,
                "max_concurrent_requests": 64, "input_lens": [512, 512],
                "output_lens": [128, 128], "ttfts": [0.1, 0.2], "itls": [[0.01, 0.02], []],
                "generated_texts": ["a", "b"], "errors": ["", ""],
                "mean_ttft_ms": 150.5, "median_ttft_ms": 140.0, "std_ttft_ms": 20.0,
                "p99_ttft_ms": 300.0, "mean_tpot_ms": 12.0, "median_tpot_ms": 11.0,
                "std_tpot_ms": 1.0, "p99_tpot_ms": 20.0, "mean_itl_ms": 12.0,
                "median_itl_ms": 11.5, "std_itl_ms": 2.0, "p99_itl_ms": 25.0,
                "mean_e2el_ms": 1700.0, "median_e2el_ms": 1650.0, "std_e2el_ms": 100.0,
                "p99_e2el_ms": 2100.0}"#,
        )
        .unwrap();
        let f = ResultFile::read(&p).unwrap();
        let row = f.row(ItlDefinition::PerChunk).unwrap();
        assert_eq!(row.model, "meta-llama/Llama-3.1-8B-Instruct");
        assert_eq!(row.concurrency, "unbounded");
        assert_eq!((row.duration_s, row.completed, row.failed), (12.5, 100, 0));
        assert_eq!(row.request_goodput, None);
        assert_eq!(row.latencies[0].mean, Some(150.5));
        assert_eq!(
            row.latencies[0].at(50.0),
            Some(140.0),
            "the median stands in for p50"
        );
        assert_eq!(row.latencies[3].at(99.0), Some(2100.0));
        assert_eq!(row.latencies[3].at(90.0), None);
        let e = f.measurements().unwrap_err().to_string();
        assert!(e.contains("cicada.histograms"), "{e}");
    }

    #[test]
    fn unreadable_files_name_the_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.json");
        std::fs::write(&p, "{ nope").unwrap();
        let e = ResultFile::read(&p).unwrap_err().to_string();
        assert!(e.contains("bad.json") && e.contains("not JSON"), "{e}");
        std::fs::write(&p, r#"{"completed": 3}"#).unwrap();
        let f = ResultFile::read(&p).unwrap();
        let e = f.row(ItlDefinition::PerToken).unwrap_err().to_string();
        assert!(e.contains("bad.json: `duration`"), "{e}");
        let e = f.measurements().unwrap_err().to_string();
        assert!(
            e.contains("cicada.histograms") && e.contains("cicada run"),
            "{e}"
        );
    }
}
