//! The coordinator's one wire edge: what workers send, decoded into domain
//! events. Nothing past this file reads a `v1` message; merging takes
//! `MetricSet`s.

use cicada_metrics::{MetricSet, MetricsError, Scope};
use cicada_proto::convert::{decode_histograms, decode_set};
use cicada_proto::v1::{self, worker_message::Body as WBody};
use cicada_results::{StartBasis, WorkerClock};

use super::clock::{self, ClockError};

/// Something a worker of the fleet did, after the run started.
#[derive(Debug)]
pub enum Event {
    /// It prepared the step: `planned` requests (0 when open-ended).
    Ready {
        worker: u32,
        step: u32,
        planned: u64,
        /// Targets it reaches through a proxy (escaped text).
        routes: Vec<String>,
        /// Its clock against ours, as it measured (`Err`: a figure no real
        /// exchange gives; `None`: no estimate).
        clock: Option<Result<WorkerClock, ClockError>>,
    },
    /// It placed the step's start instant so (`Err`: a basis it cannot have).
    StartPlaced {
        worker: u32,
        step: u32,
        basis: Result<StartBasis, ClockError>,
    },
    /// An interval's measurements.
    Report {
        worker: u32,
        report: Box<WorkerReport>,
    },
    /// It finished the step; `stopped_by` says what ended it early on its
    /// own host (a signal), if anything did; `not_sent_at_end` counts the
    /// requests due before the time limit that it had not sent by then.
    Done {
        worker: u32,
        step: u32,
        stopped_by: Option<String>,
        not_sent_at_end: u64,
    },
    /// It hit an error; a fatal one ends its part of the run.
    Failed {
        worker: u32,
        message: String,
        fatal: bool,
    },
    /// Its stream ended.
    Left { worker: u32, reason: String },
    /// Its share of the fleet cap: requests of `step` ended and sent so far.
    CapProgress {
        worker: u32,
        step: u32,
        completed: u64,
        sent: u64,
    },
    /// Its next request, `index`, is due and waits for the fleet cap.
    CapWaiting { worker: u32, step: u32, index: u64 },
    /// It is alive, with `in_flight` requests of the running step (a fresher
    /// count than its last report's when reports are far apart).
    Heartbeat { worker: u32, in_flight: u64 },
}

/// One interval of one worker's step.
#[derive(Debug)]
pub struct WorkerReport {
    /// The step it belongs to.
    pub step: u32,
    /// Interval number since the step's start barrier.
    pub seq: u64,
    /// Requests it accounts for, every outcome (counted before decoding).
    pub sent: u64,
    /// Requests in flight at the interval's end.
    pub in_flight: u64,
    /// When the interval ended, µs after the barrier.
    pub interval_end_us: u64,
    /// The measurements, or why they could not be decoded.
    pub measured: Result<Measured, MetricsError>,
}

/// What a report measured.
#[derive(Debug, Default)]
pub struct Measured {
    /// The interval's requests, per scope (target, `[[stages]]` window, warm-up).
    pub scopes: Vec<(Scope, MetricSet)>,
    /// The worker watching itself, when it reported.
    pub health: Option<Health>,
    /// Per-request JSON lines (`output.save_detailed`), possibly empty.
    pub details_jsonl: bytes::Bytes,
}

/// A worker's own health over an interval.
#[derive(Debug, Default)]
pub struct Health {
    /// Runtime stall histograms.
    pub stalls: MetricSet,
    /// CPU time (user + system) used in the interval, µs.
    pub cpu_us: u64,
    /// Resident memory at the interval's end.
    pub rss_bytes: u64,
    /// The most resident memory so far.
    pub peak_rss_bytes: u64,
}

/// The event a worker's message stands for; `None` for a second hello,
/// which the run loop has no use for.
pub(super) fn decode(worker: u32, msg: v1::WorkerMessage) -> Option<Event> {
    Some(match msg.body? {
        WBody::Ready(r) => Event::Ready {
            worker,
            step: r.step,
            planned: r.planned_requests,
            routes: r.routes,
            clock: r.clock.as_ref().map(clock::estimate),
        },
        WBody::StartPlaced(p) => Event::StartPlaced {
            worker,
            step: p.step,
            basis: clock::basis(&p),
        },
        WBody::Report(r) => Event::Report {
            worker,
            report: Box::new(report(r)),
        },
        WBody::Done(d) => Event::Done {
            worker,
            step: d.step,
            stopped_by: Some(d.stopped_by).filter(|s| !s.is_empty()),
            not_sent_at_end: d.not_sent_at_end,
        },
        WBody::Error(e) => Event::Failed {
            worker,
            message: e.message,
            fatal: e.fatal,
        },
        WBody::CapProgress(p) => Event::CapProgress {
            worker,
            step: p.step,
            completed: p.completed,
            sent: p.sent,
        },
        WBody::CapWaiting(w) => Event::CapWaiting {
            worker,
            step: w.step,
            index: w.index,
        },
        WBody::Heartbeat(h) => Event::Heartbeat {
            worker,
            in_flight: h.in_flight,
        },
        // answered by the stream's reader; one that got here means nothing
        WBody::Hello(_) | WBody::ClockProbe(_) => return None,
    })
}

/// A report from its protobuf bytes, as a worker sends it.
pub fn decode_report(bytes: &[u8]) -> Result<WorkerReport, prost::DecodeError> {
    use prost::Message as _;
    v1::Report::decode(bytes).map(report)
}

pub(super) fn report(r: v1::Report) -> WorkerReport {
    let sent = r
        .scopes
        .iter()
        .flat_map(|s| s.outcomes.iter())
        .map(|o| o.count)
        .sum();
    WorkerReport {
        step: r.step,
        seq: r.seq,
        sent,
        in_flight: r.in_flight,
        interval_end_us: r.interval_end_us,
        measured: measured(&r),
    }
}

fn measured(r: &v1::Report) -> Result<Measured, MetricsError> {
    let scopes = r
        .scopes
        .iter()
        .map(decode_set)
        .collect::<Result<Vec<_>, _>>()?;
    let health = match &r.health {
        Some(h) => {
            let mut stalls = MetricSet::default();
            decode_histograms(&mut stalls, &h.histograms)?;
            Some(Health {
                stalls,
                cpu_us: h.cpu_us,
                rss_bytes: h.rss_bytes,
                peak_rss_bytes: h.peak_rss_bytes,
            })
        }
        None => None,
    };
    Ok(Measured {
        scopes,
        health,
        details_jsonl: r.details_jsonl.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::{Metric, Outcome};
    use cicada_proto::convert::encode_set;

    #[test]
    fn reports_decode_into_scoped_sets_and_count_what_they_sent() {
        let mut set = MetricSet::default();
        set.outcomes.add_n(Outcome::Ok, 3, None);
        set.outcomes.add_n(Outcome::Timeout, 1, Some("slow"));
        set.histogram_mut(Metric::Ttft).record(1_000);
        let scope = Scope {
            target: 1,
            model: 1,
            workload: 0,
            stage: 2,
            warmup: false,
        };
        let msg = v1::WorkerMessage {
            body: Some(WBody::Report(v1::Report {
                step: 4,
                seq: 7,
                scopes: vec![encode_set(scope, &set)],
                in_flight: 5,
                interval_end_us: 8_000_000,
                details_jsonl: b"{}\n".to_vec().into(),
                ..v1::Report::default()
            })),
        };
        let Some(Event::Report { worker, report }) = decode(3, msg) else {
            panic!("a report")
        };
        assert_eq!((worker, report.step, report.seq, report.sent), (3, 4, 7, 4));
        let m = report.measured.unwrap();
        assert_eq!(m.scopes, vec![(scope, set)]);
        assert_eq!(&m.details_jsonl[..], b"{}\n");
        assert!(m.health.is_none());
        let garbled = v1::Report {
            scopes: vec![v1::ScopedMetrics {
                histograms: vec![v1::Histogram {
                    metric: "ttft".into(),
                    v2: b"not a histogram".to_vec().into(),
                    ..v1::Histogram::default()
                }],
                ..v1::ScopedMetrics::default()
            }],
            ..v1::Report::default()
        };
        assert!(report_of(garbled).measured.is_err());
        let heartbeat = v1::WorkerMessage {
            body: Some(WBody::Heartbeat(v1::Heartbeat {
                seq: 9,
                in_flight: 17,
            })),
        };
        assert!(matches!(
            decode(4, heartbeat),
            Some(Event::Heartbeat {
                worker: 4,
                in_flight: 17
            })
        ));
        let hello = v1::WorkerMessage {
            body: Some(WBody::Hello(v1::Hello::default())),
        };
        assert!(decode(0, hello).is_none());
    }

    fn report_of(r: v1::Report) -> WorkerReport {
        report(r)
    }
}
