//! Wire <-> domain conversion for measurements: every histogram, counter,
//! outcome, per-second bucket and concurrency slice of a scope.

use cicada_metrics::{
    Counter, LatencyHistogram, Metric, MetricSet, MetricsError, Outcome, Scope, SecondBucket, Span,
};

use crate::v1;

/// Encode one scope's measurements (histograms as their filled buckets).
pub fn encode_set(scope: Scope, set: &MetricSet) -> v1::ScopedMetrics {
    v1::ScopedMetrics {
        target: scope.target,
        model: scope.model,
        workload: scope.workload,
        stage: scope.stage,
        warmup: scope.warmup,
        histograms: encode_histograms(set),
        counters: set
            .counters
            .non_zero()
            .map(|(c, value)| v1::Counter {
                name: c.name().to_string(),
                value,
            })
            .collect(),
        outcomes: set
            .outcomes
            .iter()
            .map(|(o, c)| v1::Outcome {
                class: o.to_string(),
                count: c.count,
                first_error: c.first_error.clone().unwrap_or_default(),
            })
            .collect(),
        seconds: set
            .seconds
            .iter()
            .map(|(second, b)| v1::SecondBucket {
                second,
                output_tokens: b.output_tokens,
                completed: b.completed,
                active_requests: b.active_requests,
            })
            .collect(),
        first_send_us: set.span.first_send_us,
        last_send_us: set.span.last_send_us,
        last_end_us: set.span.last_end_us,
        concurrency: set
            .concurrency
            .iter()
            .map(|(slice, request_us)| v1::ConcurrencySlice { slice, request_us })
            .collect(),
        addresses: set.addresses.iter().map(|(a, n)| (a.clone(), *n)).collect(),
    }
}

/// Encode the non-empty histograms of a set.
pub fn encode_histograms(set: &MetricSet) -> Vec<v1::Histogram> {
    set.non_empty()
        .map(|(m, h)| v1::Histogram {
            metric: m.name().to_string(),
            sum: h.sum(),
            sum_sq_lo: h.sum_sq() as u64,
            sum_sq_hi: (h.sum_sq() >> 64) as u64,
            ..histogram_body(h)
        })
        .collect()
}

/// Most filled buckets sent as pairs; beyond, plain V2 is smaller and the
/// coordinator adds it faster (`cicada selftest --fleet`).
const WIRE_PAIRS_MAX: usize = 512;

/// A histogram's buckets in the cheaper wire form: its filled buckets as
/// delta-coded pairs when few, else plain V2.
fn histogram_body(h: &LatencyHistogram) -> v1::Histogram {
    let mut buckets = Vec::new();
    let mut prev = 0;
    for (value, count) in h.recorded() {
        if buckets.len() >= 2 * WIRE_PAIRS_MAX {
            return v1::Histogram {
                v2: h.encode_plain().into(),
                ..Default::default()
            };
        }
        buckets.push(value - prev);
        buckets.push(count);
        prev = value;
    }
    v1::Histogram {
        buckets,
        ..Default::default()
    }
}

/// The wire's delta-coded pairs back into a histogram.
fn recorded_from_wire(
    raw: &[u64],
    sum: u64,
    sum_sq: u128,
) -> Result<LatencyHistogram, MetricsError> {
    if !raw.len().is_multiple_of(2) {
        return Err(MetricsError::Decode {
            metric: String::new(),
            reason: format!("{} bucket numbers, not pairs", raw.len()),
        });
    }
    let mut pairs = Vec::with_capacity(raw.len() / 2);
    let mut value = 0u64;
    for (i, pair) in raw.chunks_exact(2).enumerate() {
        value = match value.checked_add(pair[0]) {
            // a 0 step after the first pair repeats a value: from_recorded refuses it
            Some(v) => v,
            None => {
                return Err(MetricsError::Decode {
                    metric: String::new(),
                    reason: format!("bucket {i}: value overflows"),
                });
            }
        };
        pairs.push((value, pair[1]));
    }
    LatencyHistogram::from_recorded(pairs, sum, sum_sq)
}

/// Decode histograms into `set`.
pub fn decode_histograms(set: &mut MetricSet, hists: &[v1::Histogram]) -> Result<(), MetricsError> {
    for h in hists {
        let metric: Metric = h.metric.parse()?;
        let sum_sq = u128::from(h.sum_sq_hi) << 64 | u128::from(h.sum_sq_lo);
        let decoded = if h.v2.is_empty() {
            recorded_from_wire(&h.buckets, h.sum, sum_sq)
        } else {
            LatencyHistogram::decode(&h.v2, h.sum, sum_sq)
        };
        let decoded = decoded.map_err(|e| match e {
            MetricsError::Decode { reason, .. } => MetricsError::Decode {
                metric: h.metric.clone(),
                reason,
            },
            other => other,
        })?;
        set.histogram_mut(metric)
            .merge(&decoded)
            .map_err(|e| match e {
                MetricsError::Merge { reason, .. } => MetricsError::Merge {
                    metric: h.metric.clone(),
                    reason,
                },
                other => other,
            })?;
    }
    Ok(())
}

/// Addresses one scope may count: a name resolves to a handful, a headless
/// Service to one per pod; more is a worker that is not ours.
const MAX_ADDRESSES: usize = 4096;

/// Decode one scope and its measurements.
pub fn decode_set(scoped: &v1::ScopedMetrics) -> Result<(Scope, MetricSet), MetricsError> {
    let mut set = MetricSet::default();
    decode_histograms(&mut set, &scoped.histograms)?;
    for c in &scoped.counters {
        let counter: Counter = c.name.parse()?;
        set.counters.add(counter, c.value);
    }
    for o in &scoped.outcomes {
        let outcome: Outcome = o.class.parse()?;
        let error = (!o.first_error.is_empty()).then_some(o.first_error.as_str());
        set.outcomes.add_n(outcome, o.count, error);
    }
    for b in &scoped.seconds {
        set.seconds.add(
            b.second,
            &SecondBucket {
                output_tokens: b.output_tokens,
                completed: b.completed,
                active_requests: b.active_requests,
            },
        );
    }
    for c in &scoped.concurrency {
        set.concurrency.add(c.slice, c.request_us);
    }
    if scoped.addresses.len() > MAX_ADDRESSES {
        return Err(MetricsError::Addresses(format!(
            "{} addresses in one report (at most {MAX_ADDRESSES})",
            scoped.addresses.len()
        )));
    }
    for (addr, n) in &scoped.addresses {
        if addr.parse::<std::net::SocketAddr>().is_err() {
            return Err(MetricsError::Addresses(format!(
                "an address count for {:?}, which is not ip:port",
                addr.chars().take(64).collect::<String>()
            )));
        }
        set.addresses.insert(addr.clone(), *n);
    }
    set.span = Span {
        first_send_us: scoped.first_send_us,
        last_send_us: scoped.last_send_us,
        last_end_us: scoped.last_end_us,
    };
    let scope = Scope {
        target: scoped.target,
        model: scoped.model,
        workload: scoped.workload,
        stage: scoped.stage,
        warmup: scoped.warmup,
    };
    Ok((scope, set))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::{ContentEvent, RequestRecord, Slo, TokenSource};

    #[test]
    fn a_set_survives_the_wire() {
        let mut set = MetricSet::default();
        let slo = Slo {
            ttft_ms: Some(100.0),
            ..Slo::default()
        };
        for i in 0..50u64 {
            set.observe(
                &RequestRecord {
                    index: i,
                    target: 1,
                    outcome: if i % 10 == 0 {
                        Outcome::Http(503)
                    } else {
                        Outcome::Ok
                    },
                    error: (i % 10 == 0).then(|| "busy".to_string()),
                    scheduled_us: i * 1000,
                    sent_us: i * 1000 + 5,
                    ended_us: i * 1000 + 90_000,
                    events: (0..5)
                        .map(|k| ContentEvent {
                            at_us: i * 1000 + 50_000 + k * 10_000,
                            tokens: 2,
                        })
                        .collect::<Vec<_>>(),
                    output_tokens: 10,
                    token_source: TokenSource::Usage,
                    input_tokens: 30,
                    server_input_tokens: None,
                    cached_tokens: None,
                    requested_output_tokens: Some(10),
                    token_count_mismatch: false,
                    streamed: true,
                    resends: Default::default(),
                    http2: false,
                    reused: false,
                    address: None,
                    inexact_stamps: 0,
                    server_prompt_us: None,
                    server_per_token_us: None,
                    reasoning: None,
                    media: Default::default(),
                },
                &slo,
            );
        }
        set.concurrency.add_span(3, 0, 250_000);
        let scope = Scope {
            target: 1,
            model: 3,
            workload: 4,
            stage: 2,
            warmup: true,
        };
        let wire = encode_set(scope, &set);
        let (back_scope, back) = decode_set(&wire).unwrap();
        assert_eq!(back_scope, scope);
        assert_eq!(back, set);
    }

    /// A sum of squares past 2^64 (a million 5 s samples) crosses the wire
    /// whole, in both halves.
    #[test]
    fn a_sum_of_squares_past_u64_arrives_exactly() {
        let mut set = MetricSet::default();
        set.histogram_mut(Metric::E2el)
            .record_n(5_000_000, 1_000_000);
        set.histogram_mut(Metric::E2el).record(7);
        let sq = set.histogram(Metric::E2el).sum_sq();
        assert!(sq > u128::from(u64::MAX));
        let wire = encode_set(Scope::default(), &set);
        assert_ne!(wire.histograms[0].sum_sq_hi, 0);
        let (_, back) = decode_set(&wire).unwrap();
        assert_eq!(back.histogram(Metric::E2el).sum_sq(), sq);
        assert_eq!(back, set);
    }

    /// Few filled buckets travel as pairs, many as V2; both arrive exactly.
    #[test]
    fn each_histogram_takes_the_cheaper_form() {
        for (distinct, pairs) in [(40u64, true), (WIRE_PAIRS_MAX as u64, true), (3_000, false)] {
            let mut set = MetricSet::default();
            for v in 0..distinct {
                set.histogram_mut(Metric::Itl)
                    .record_n(1_000 + v * 997, 1 + v % 3);
            }
            let wire = encode_set(Scope::default(), &set);
            let h = &wire.histograms[0];
            assert_eq!(!h.buckets.is_empty(), pairs, "{distinct} buckets");
            assert_eq!(h.v2.is_empty(), pairs, "{distinct} buckets");
            let (_, back) = decode_set(&wire).unwrap();
            assert_eq!(back, set, "{distinct} buckets");
        }
    }

    #[test]
    fn unknown_names_and_bad_blobs_are_errors() {
        let mut wire = v1::ScopedMetrics::default();
        wire.counters.push(v1::Counter {
            name: "nope".into(),
            value: 1,
        });
        assert!(decode_set(&wire).is_err());
        // not V2
        let mut wire = v1::ScopedMetrics::default();
        wire.histograms.push(v1::Histogram {
            metric: "ttft".into(),
            v2: vec![1, 2, 3].into(),
            ..Default::default()
        });
        let err = decode_set(&wire).unwrap_err().to_string();
        assert!(err.contains("ttft"), "{err}");
        // not pairs; a value repeated (step 0); a count of 0; a value past u64
        for buckets in [
            vec![1, 2, 3],
            vec![5, 1, 0, 1],
            vec![5, 0],
            vec![u64::MAX, 1, 1, 1],
        ] {
            let mut wire = v1::ScopedMetrics::default();
            wire.histograms.push(v1::Histogram {
                metric: "ttft".into(),
                buckets: buckets.clone(),
                ..Default::default()
            });
            let err = decode_set(&wire).unwrap_err().to_string();
            assert!(err.contains("ttft"), "{buckets:?}: {err}");
        }
    }
}
