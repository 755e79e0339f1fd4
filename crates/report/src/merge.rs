//! `cicada report --merge`: several runs as one row, their measurements
//! re-merged exactly (histograms decoded and added, counts summed,
//! throughputs over the wall-clock span the runs cover together).

use cicada_metrics::{Counter, MetricSet};

use crate::read::{
    FileError, ItlDefinition, Latency, ROW_PERCENTILES, ResultFile, Row, TABLE_METRICS,
};

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
pub fn merge(files: &[ResultFile]) -> Result<Row, FileError> {
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
    use cicada_metrics::Metric;

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
        use cicada_results::sample::result;
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
                serde_json::to_vec(&cicada_results::json::document(&r)).unwrap(),
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
        // the writers' own fixtures (crates/results checks them against its writers)
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/tests/fixtures");
        let old = ResultFile::read(&fixtures.join("result-schema1.json")).unwrap();
        let new = ResultFile::read(&fixtures.join("result.json")).unwrap();
        assert_eq!(old.document().schema_version, Some(1));
        assert_eq!(new.document().schema_version, Some(2));
        let (a, mut b) = (old.measurements().unwrap(), new.measurements().unwrap());
        assert!(a.non_empty().count() > 3);
        // the sample gained the session figures after the schema 1 file was
        // written: leave them out of the comparison, nothing else
        let gained = [Metric::TtftFirstTurn, Metric::TtftLaterTurns]
            .into_iter()
            .chain(Metric::TTFT_BY_TURN)
            .chain(Metric::SESSION);
        for m in gained {
            assert!(a.histogram(m).is_empty() && !b.histogram(m).is_empty());
            *b.histogram_mut(m) = cicada_metrics::LatencyHistogram::new();
        }
        assert_eq!(a, b);
        assert!(merge(&[old, new]).is_ok());
    }
}
