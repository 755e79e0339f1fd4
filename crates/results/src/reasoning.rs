//! The reasoning figures in the console: a block of their own, printed only
//! when some request reasoned (docs/METRICS.md, "Reasoning").

use std::fmt::Write as _;

use cicada_metrics::{Counter, Metric, MetricSet, Summary};

use super::percentile_word;

/// Labels of the reasoning metrics in the console.
fn label(m: Metric) -> &'static str {
    match m {
        Metric::Ttfa => "TTFA",
        Metric::ReasoningTime => "Reasoning Time",
        Metric::AnswerTpot => "Answer TPOT",
        Metric::AnswerItl => "Answer ITL",
        _ => m.label(),
    }
}

fn line(out: &mut String, label: &str, v: impl std::fmt::Display) {
    let _ = writeln!(out, "{:<40} {:<10}", label, v);
}

fn float(out: &mut String, label: &str, v: f64) {
    let _ = writeln!(out, "{:<40} {:<10.2}", label, v);
}

/// Requests that reasoned, their tokens and where the counts came from, and
/// the answer's latencies (mean, median, the asked percentiles), under the
/// console's `section` heading. Nothing when no request reasoned.
pub(crate) fn block(
    out: &mut String,
    section: fn(&mut String, &str),
    (t, s): (&MetricSet, &Summary),
    percentiles: &[f64],
) {
    let requests = t.counter(Counter::ReasoningRequests);
    if requests == 0 {
        return;
    }
    section(out, "Reasoning (answer apart from thinking)");
    line(out, "Requests that reasoned:", requests);
    let tokens = t.counter(Counter::ReasoningTokens);
    let sources: Vec<String> = [
        ("usage", Counter::ReasoningTokensFromUsage),
        ("tokenizer", Counter::ReasoningTokensFromTokenizer),
        ("events", Counter::ReasoningTokensFromEvents),
    ]
    .iter()
    .filter(|(_, c)| t.counter(*c) > 0)
    .map(|(k, c)| format!("{k} {}", t.counter(*c)))
    .collect();
    line(
        out,
        "Reasoning tokens:",
        format!("{tokens} (source: {})", sources.join(", ")),
    );
    float(
        out,
        "Mean reasoning tokens per request:",
        tokens as f64 / requests as f64,
    );
    let unanswered = t.counter(Counter::ReasoningWithoutAnswer);
    if unanswered > 0 {
        line(out, "Requests that never answered:", unanswered);
    }
    for m in Metric::REASONING {
        let Some(d) = s.metric(m) else {
            continue;
        };
        let l = label(m);
        float(out, &format!("Mean {l} (ms):"), d.mean);
        float(out, &format!("Median {l} (ms):"), d.median);
        for p in percentiles {
            if let Some(v) = d.percentile(*p) {
                float(out, &format!("P{} {l} (ms):", percentile_word(*p)), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heading(out: &mut String, title: &str) {
        out.push_str(title);
        out.push('\n');
    }

    #[test]
    fn the_block_shows_only_when_some_request_reasoned() {
        let mut t = MetricSet::default();
        let s = Summary::of(&t, false, &[99.0], 0);
        let mut out = String::new();
        block(&mut out, heading, (&t, &s), &[99.0]);
        assert!(out.is_empty());
        t.counters.add(Counter::ReasoningRequests, 2);
        t.counters.add(Counter::ReasoningTokens, 30);
        t.counters.add(Counter::ReasoningTokensFromUsage, 2);
        t.histogram_mut(Metric::Ttfa).record(120_000);
        let s = Summary::of(&t, false, &[99.0], 0);
        block(&mut out, heading, (&t, &s), &[99.0]);
        let row = |label: &str, v: &str| format!("{label:<40} {v}");
        assert!(
            out.contains(&row("Reasoning tokens:", "30 (source: usage 2)")),
            "{out}"
        );
        assert!(
            out.contains(&row("Mean reasoning tokens per request:", "15.00")),
            "{out}"
        );
        assert!(out.contains("Mean TTFA (ms):"), "{out}");
        assert!(out.contains("P99 TTFA (ms):"), "{out}");
        assert!(!out.contains("Answer ITL"), "no samples, no line: {out}");
    }
}
