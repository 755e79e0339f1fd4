//! `cicada report`'s output: the rows as a Markdown table (the layout of
//! benchmark tables in inference projects' READMEs), CSV, or JSON.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use cicada_metrics::Metric;

use crate::error::ReportError;
use crate::merge::merge;
use crate::read::{ItlDefinition, ROW_PERCENTILES, ResultFile, Row, TABLE_METRICS};

/// Under a Markdown table whose cicada rows show their ICL as vLLM's ITL.
const PER_CHUNK_NOTE: &str = "ITL per chunk: vLLM's ITL, one gap per streamed chunk. \
cicada's own ITL is per token, so cicada's rows show their ICL (`cicada.metrics.icl`) \
in these columns (see docs/METRICS.md).";

/// The ITL definition of a table's rows (one for all: `build` makes them so).
fn itl_of(rows: &[Row]) -> ItlDefinition {
    debug_assert!(rows.windows(2).all(|w| w[0].itl == w[1].itl));
    rows.first().map_or(ItlDefinition::PerToken, |r| r.itl)
}

/// Column headers of the Markdown and CSV tables, in order; the ITL
/// columns name vLLM's definition when they hold it.
pub fn header(itl: ItlDefinition) -> Vec<String> {
    let mut h: Vec<String> = [
        "Run",
        "Model",
        "Concurrency",
        "Duration (s)",
        "Completed",
        "Failed",
        "Req/s",
        "Output Tok/s",
        "Total Tok/s",
        "Goodput (req/s)",
    ]
    .map(String::from)
    .to_vec();
    for m in TABLE_METRICS {
        let l = match (m, itl) {
            (Metric::Itl, ItlDefinition::PerChunk) => "ITL per chunk",
            _ => m.label(),
        };
        h.push(format!("Mean {l} (ms)"));
        h.push(format!("Median {l} (ms)"));
        h.push(format!("P99 {l} (ms)"));
    }
    h
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), f2)
}

/// One row's cells, aligned with [`header`].
pub fn cells(r: &Row) -> Vec<String> {
    let mut c = vec![
        r.run.clone(),
        r.model.clone(),
        r.concurrency.clone(),
        f2(r.duration_s),
        r.completed.to_string(),
        r.failed.to_string(),
        f2(r.request_throughput),
        opt(r.output_throughput),
        f2(r.total_token_throughput),
        opt(r.request_goodput),
    ];
    for l in &r.latencies {
        c.push(opt(l.mean));
        c.push(opt(l.at(50.0)));
        c.push(opt(l.at(99.0)));
    }
    c
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A GitHub-flavoured Markdown table: header, alignment row, one line per
/// row; a note under it when cicada rows show their ICL as vLLM's ITL.
pub fn markdown(rows: &[Row]) -> String {
    let h = header(itl_of(rows));
    let mut out = String::new();
    let line = |cells: &[String]| {
        format!(
            "| {} |",
            cells
                .iter()
                .map(|c| md_cell(c))
                .collect::<Vec<_>>()
                .join(" | ")
        )
    };
    let _ = writeln!(out, "{}", line(&h));
    let align: Vec<String> = (0..h.len())
        .map(|i| if i < 3 { "---".into() } else { "---:".into() })
        .collect();
    let _ = writeln!(out, "| {} |", align.join(" | "));
    for r in rows {
        let _ = writeln!(out, "{}", line(&cells(r)));
    }
    if rows.iter().any(|r| r.itl_from_icl) {
        let _ = writeln!(out, "\n{PER_CHUNK_NOTE}");
    }
    out
}

/// CSV with the same columns.
pub fn csv(rows: &[Row]) -> Result<String, ReportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header(itl_of(rows)))
        .map_err(ReportError::Csv)?;
    for r in rows {
        w.write_record(cells(r)).map_err(ReportError::Csv)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ReportError::Csv(e.into_error().into()))?;
    // every cell is a String: the bytes are UTF-8
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn num(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

/// A JSON array of row objects with vLLM-style keys and unrounded numbers.
pub fn json(rows: &[Row]) -> String {
    let items: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut m = Map::new();
            m.insert("run".into(), json!(r.run));
            m.insert("model".into(), json!(r.model));
            m.insert("concurrency".into(), json!(r.concurrency));
            m.insert("duration".into(), num(r.duration_s));
            m.insert("completed".into(), json!(r.completed));
            m.insert("failed".into(), json!(r.failed));
            m.insert("request_throughput".into(), num(r.request_throughput));
            m.insert(
                "output_throughput".into(),
                r.output_throughput.map_or(Value::Null, num),
            );
            m.insert(
                "total_token_throughput".into(),
                num(r.total_token_throughput),
            );
            m.insert(
                "request_goodput".into(),
                r.request_goodput.map_or(Value::Null, num),
            );
            for (metric, l) in TABLE_METRICS.iter().zip(&r.latencies) {
                let name = metric.name();
                m.insert(format!("mean_{name}_ms"), l.mean.map_or(Value::Null, num));
                for p in ROW_PERCENTILES {
                    m.insert(
                        format!("p{}_{name}_ms", cicada_results::percentile_word(p)),
                        l.at(p).map_or(Value::Null, num),
                    );
                }
            }
            m.insert("itl_definition".into(), json!(r.itl.name()));
            let source = if r.itl_from_icl {
                Metric::Icl
            } else {
                Metric::Itl
            };
            m.insert("itl_source".into(), json!(source.name()));
            Value::Object(m)
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}

/// How `cicada report` prints its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A Markdown table (GitHub-flavoured).
    Markdown,
    /// CSV with a header row.
    Csv,
    /// A JSON array of row objects, numbers unrounded.
    Json,
}

/// `cicada report`'s text: one row per file, or one for them all merged.
pub fn build(
    files: &[std::path::PathBuf],
    format: Format,
    merged: bool,
) -> Result<String, ReportError> {
    let files = files
        .iter()
        .map(|p| ResultFile::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let rows = if merged {
        vec![merge(&files)?]
    } else {
        let itl = ItlDefinition::for_files(&files);
        files
            .iter()
            .map(|f| f.row(itl))
            .collect::<Result<Vec<_>, _>>()?
    };
    match format {
        Format::Markdown => Ok(markdown(&rows)),
        Format::Csv => csv(&rows),
        Format::Json => Ok(json(&rows)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::Latency;

    fn row(run: &str) -> Row {
        Row {
            run: run.into(),
            model: "m|odel".into(),
            concurrency: "8".into(),
            duration_s: 10.0,
            completed: 100,
            failed: 1,
            request_throughput: 10.0,
            output_throughput: Some(1280.0),
            total_token_throughput: 2560.0,
            request_goodput: None,
            latencies: [
                Latency {
                    mean: Some(12.345),
                    percentiles: [Some(11.0), None, Some(30.0), None],
                },
                Latency::default(),
                Latency::default(),
                Latency::default(),
            ],
            ..Row::default()
        }
    }

    #[test]
    fn markdown_has_a_header_an_alignment_row_and_a_line_per_row() {
        let md = markdown(&[row("a.json"), row("b.json")]);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 4);
        let cols = header(ItlDefinition::PerToken).len();
        for l in &lines {
            assert!(l.starts_with("| ") && l.ends_with(" |"), "{l}");
            // pipes inside cells are escaped, so every line splits into the same columns
            let unescaped = l.replace("\\|", "");
            assert_eq!(unescaped.matches('|').count(), cols + 1, "{l}");
        }
        assert!(lines[1].starts_with("| --- | --- | --- | ---: |"));
        assert!(
            lines[2].contains("| 12.35 | 11.00 | 30.00 |"),
            "{}",
            lines[2]
        );
        assert!(lines[2].contains("m\\|odel"));
    }

    #[test]
    fn csv_and_json_carry_the_same_rows() {
        let text = csv(&[row("a.json")]).unwrap();
        let mut r = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(
            r.headers().unwrap().len(),
            header(ItlDefinition::PerToken).len()
        );
        assert_eq!(r.records().count(), 1);
        let v: Value = serde_json::from_str(&json(&[row("a.json")])).unwrap();
        assert_eq!(v[0]["mean_ttft_ms"], 12.345);
        assert_eq!(v[0]["p99_ttft_ms"], 30.0);
        assert!(v[0]["p90_ttft_ms"].is_null());
        assert!(v[0]["request_goodput"].is_null());
    }

    /// A vLLM result file beside cicada's puts vLLM's per-chunk ITL in the
    /// ITL column, so cicada's rows show their ICL there (they showed the
    /// per-token ITL, a different figure, under the same header); the header
    /// and a footnote say so. Between cicada files alone ITL stays per token.
    #[test]
    fn a_comparison_with_vllm_files_keeps_one_itl_definition() {
        use cicada_metrics::Metric;
        use cicada_results::sample::result;
        let dir = tempfile::tempdir().unwrap();
        let mut r = result(cicada_scenarios::Scenario::default(), 3, 0, 0);
        for v in [10_000, 10_000, 10_000] {
            r.total.histogram_mut(Metric::Itl).record(v);
            r.total.histogram_mut(Metric::Icl).record(v * 4);
        }
        let ours = dir.path().join("cicada.json");
        std::fs::write(
            &ours,
            serde_json::to_vec(&cicada_results::json::document(&r)).unwrap(),
        )
        .unwrap();
        let vllm = dir.path().join("vllm.json");
        std::fs::write(
            &vllm,
            r#"{"model_id": "m", "request_rate": "inf", "duration": 2.0, "completed": 3,
                "request_throughput": 1.5, "output_throughput": 10.0,
                "total_token_throughput": 20.0, "mean_itl_ms": 41.0, "median_itl_ms": 40.5,
                "p99_itl_ms": 44.0}"#,
        )
        .unwrap();
        let both = [ours.clone(), vllm];
        let v: Value = serde_json::from_str(&build(&both, Format::Json, false).unwrap()).unwrap();
        assert_eq!(
            v[0]["mean_itl_ms"], 40.0,
            "cicada's ICL in the per-chunk column"
        );
        assert_eq!(v[0]["itl_definition"], "per_chunk");
        assert_eq!(v[0]["itl_source"], "icl");
        assert_eq!(v[1]["mean_itl_ms"], 41.0);
        assert_eq!(v[1]["itl_source"], "itl");
        let md = build(&both, Format::Markdown, false).unwrap();
        assert!(md.contains("| Mean ITL per chunk (ms) |"), "{md}");
        assert!(md.contains("| 40.00 |"), "{md}");
        assert!(md.contains("cicada.metrics.icl"), "{md}");
        let csv = build(&both, Format::Csv, false).unwrap();
        assert!(csv.contains("Mean ITL per chunk (ms)"), "{csv}");
        let alone: Value =
            serde_json::from_str(&build(&[ours], Format::Json, false).unwrap()).unwrap();
        assert_eq!(alone[0]["mean_itl_ms"], 10.0, "cicada alone: per-token ITL");
        assert_eq!(alone[0]["itl_definition"], "per_token");
    }

    /// `cicada report`'s rows, in every format, for files written from the
    /// writers' sample result and from a bare result, compared and merged.
    #[test]
    fn report_tables_are_byte_for_byte_the_committed_ones() {
        use cicada_results::sample::{check, result, rich};
        use cicada_scenarios::Scenario;
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for (i, r) in [rich(), result(Scenario::default(), 3, 0, 0)]
            .iter()
            .enumerate()
        {
            let p = dir.path().join(format!("r{i}.json"));
            let doc = cicada_results::json::document(r);
            std::fs::write(&p, serde_json::to_vec(&doc).unwrap()).unwrap();
            files.push(ResultFile::read(&p).unwrap());
        }
        let itl = ItlDefinition::for_files(&files);
        let mut rows: Vec<_> = files.iter().map(|f| f.row(itl).unwrap()).collect();
        rows.push(merge(&files).unwrap());
        for r in &mut rows {
            r.run = r.run.replace(&dir.path().display().to_string(), "<dir>");
        }
        let text = format!(
            "{}\n{}\n{}",
            markdown(&rows),
            csv(&rows).unwrap(),
            json(&rows)
        );
        let golden =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report.txt");
        check(&golden, &text);
    }
}
