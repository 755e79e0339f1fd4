//! Result files read back: each parsed into a [`ResultFile`] and turned
//! into a table row, or into the measurements `--merge` adds up. A row needs
//! only vLLM's `--save-result` keys, so `vllm bench serve` result files can
//! sit beside cicada's.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use cicada_metrics::{Counter, LatencyHistogram, Metric, MetricSet, Outcome};

use cicada_results::document::{HISTOGRAM_ENCODING, RequestRate, ResultDocument};

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
pub enum FileError {
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
    pub fn read(path: &Path) -> Result<Self, FileError> {
        let read_err = |reason: String| FileError::Read {
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

    /// An error naming the file and `key`.
    pub(crate) fn field(&self, key: &str, reason: &str) -> FileError {
        FileError::Field {
            path: self.path.clone(),
            key: key.to_string(),
            reason: reason.to_string(),
        }
    }

    /// A number the row cannot do without.
    pub(crate) fn required(&self, key: &str, v: Option<f64>) -> Result<f64, FileError> {
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
                let key = format!("p{}", cicada_results::percentile_word(p));
                let at = s.percentiles.0.iter().find(|(k, _)| *k == key);
                at.and_then(|(_, v)| *v)
                    .or(if p == 50.0 { s.median } else { None })
            }),
        }
    }

    /// The model the file names (`-` when none).
    pub(crate) fn model(&self) -> String {
        self.doc.model_id.clone().unwrap_or_else(|| "-".to_string())
    }

    /// Users, concurrency cap, rate or "unbounded".
    pub(crate) fn concurrency(&self) -> String {
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
    pub fn row(&self, itl: ItlDefinition) -> Result<Row, FileError> {
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
    pub fn measurements(&self) -> Result<MetricSet, FileError> {
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
    pub fn window(&self) -> Result<(f64, f64), FileError> {
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
    pub(crate) fn has_goodput(&self) -> bool {
        self.doc.request_goodput.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
