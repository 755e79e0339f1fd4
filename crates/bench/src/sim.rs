//! Simulated workers for `cicada selftest --fleet`: gRPC clients that join a
//! real coordinator as workers do and send it realistic reports once a
//! second (every metric's histogram, counters, outcomes, per-second buckets
//! and concurrency slices, for two replicas), without sending any load. The
//! coordinator's cost per worker is measured against them.
//!
//! Reports are built once, from synthetic requests, as a few variants that
//! the simulated workers take turns sending: the coordinator decodes and
//! merges every one as it would a real worker's, and merging the same
//! variants here gives the figures it must print, exactly.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use cicada_metrics::{ContentEvent, MetricSet, Outcome, RequestRecord, Scope, Slo, TokenSource};
use cicada_proto::convert::encode_set;
use cicada_proto::v1::coordinator_client::CoordinatorClient;
use cicada_proto::v1::{self, coordinator_message::Body as CBody, worker_message::Body as WBody};
use cicada_proto::{MAX_MESSAGE_BYTES, VERSION};
use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Replicas every simulated worker reports on.
const REPLICAS: u32 = 2;

/// Reports the simulated workers take turns sending.
pub struct SampleReports {
    variants: Vec<v1::Report>,
    /// Each variant's measurements, merged over its replicas.
    sets: Vec<MetricSet>,
}

impl SampleReports {
    /// `variants` reports of `requests` requests each (over two replicas),
    /// drawn from `seed`.
    pub fn new(variants: usize, requests: u32, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut out = Self {
            variants: Vec::with_capacity(variants),
            sets: Vec::with_capacity(variants),
        };
        for _ in 0..variants {
            let mut scoped: Vec<MetricSet> = (0..REPLICAS).map(|_| MetricSet::default()).collect();
            for i in 0..requests {
                let rec = request(&mut rng, u64::from(i), i % REPLICAS);
                scoped[rec.target as usize].observe(&rec, &Slo::default());
            }
            let mut all = MetricSet::default();
            let scopes = scoped
                .iter()
                .enumerate()
                .map(|(target, set)| {
                    let _ = all.merge(set);
                    let scope = Scope {
                        target: target as u32,
                        model: 0,
                        workload: 0,
                        stage: 0,
                        warmup: false,
                    };
                    encode_set(scope, set)
                })
                .collect();
            out.variants.push(v1::Report {
                scopes,
                health: Some(v1::Health {
                    histograms: Vec::new(),
                    cpu_us: 20_000,
                    rss_bytes: 40 << 20,
                    peak_rss_bytes: 41 << 20,
                }),
                in_flight: u64::from(requests),
                ..v1::Report::default()
            });
            out.sets.push(all);
        }
        out
    }

    /// How many variants there are.
    pub fn variants(&self) -> usize {
        self.variants.len()
    }

    /// Variant `i` as report `seq` of a step: what goes on the wire.
    fn message(&self, i: usize, seq: u64) -> v1::Report {
        let mut r = self.variants[i % self.variants.len()].clone();
        r.seq = seq;
        r.interval_start_us = seq * 1_000_000;
        r.interval_end_us = (seq + 1) * 1_000_000;
        r
    }

    /// Variant `i` as report `seq`, in its wire bytes.
    pub fn encoded(&self, i: usize, seq: u64) -> Vec<u8> {
        self.message(i, seq).encode_to_vec()
    }

    /// What merging `counts[i]` copies of each variant `i` gives.
    pub fn expected(&self, counts: &[u64]) -> anyhow::Result<MetricSet> {
        let mut all = MetricSet::default();
        for (set, n) in self.sets.iter().zip(counts) {
            for _ in 0..*n {
                all.merge(set).context("merging the sample reports")?;
            }
        }
        Ok(all)
    }
}

/// One synthetic streamed request, its times within the first second.
fn request(rng: &mut StdRng, index: u64, target: u32) -> RequestRecord {
    let sent_us = rng.random_range(0..1_000_000u64);
    let ttft = rng.random_range(20_000..400_000u64);
    let tokens = rng.random_range(16..512u64);
    let mut at = sent_us + ttft;
    let events = (0..tokens)
        .map(|_| {
            let e = ContentEvent {
                at_us: at,
                tokens: 1,
            };
            at += rng.random_range(5_000..40_000u64);
            e
        })
        .collect::<Vec<_>>();
    let ended_us = events.last().map_or(sent_us, |e| e.at_us) + 200;
    let failed = rng.random_range(0..100u32) == 0;
    RequestRecord {
        index,
        target,
        outcome: if failed {
            Outcome::Http(503)
        } else {
            Outcome::Ok
        },
        error: failed.then(|| "service unavailable".to_string()),
        scheduled_us: sent_us,
        sent_us,
        ended_us,
        events: if failed { Vec::new() } else { events },
        output_tokens: if failed { 0 } else { tokens },
        token_source: TokenSource::Usage,
        input_tokens: rng.random_range(64..2048),
        server_input_tokens: None,
        cached_tokens: Some(rng.random_range(0..64)),
        requested_output_tokens: Some(tokens),
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
    }
}

/// What one simulated worker sent.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    /// Reports sent, by variant.
    pub by_variant: Vec<u64>,
    /// Protobuf bytes of the reports sent.
    pub bytes: u64,
}

/// Join the coordinator at `url` as `count` simulated workers and send
/// `reports` reports each, one a second from the start barrier; `on_start`
/// runs when the first worker's barrier passes. Returns what was sent.
pub async fn run(
    url: &str,
    token: &str,
    count: u32,
    reports: u64,
    samples: Arc<SampleReports>,
    on_start: impl FnOnce() + Send + 'static,
) -> anyhow::Result<Sent> {
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Arc::new(std::sync::Mutex::new(Some(started_tx)));
    tokio::spawn(async move {
        if started_rx.await.is_ok() {
            on_start();
        }
    });
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..count {
        let (url, token, samples) = (url.to_string(), token.to_string(), samples.clone());
        let started = started_tx.clone();
        tasks.spawn(async move {
            one(&url, &token, index, reports, &samples, started)
                .await
                .with_context(|| format!("simulated worker {index}"))
        });
    }
    let mut total = Sent {
        by_variant: vec![0; samples.variants()],
        bytes: 0,
    };
    while let Some(done) = tasks.join_next().await {
        let sent = done.context("a simulated worker panicked")??;
        for (t, n) in total.by_variant.iter_mut().zip(&sent.by_variant) {
            *t += n;
        }
        total.bytes += sent.bytes;
    }
    Ok(total)
}

type StartSignal = Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>>;

fn msg(body: WBody) -> v1::WorkerMessage {
    v1::WorkerMessage { body: Some(body) }
}

/// Dial the coordinator and attach with `hello`; again, after a pause, when
/// the connection is turned away before the hello is read (the coordinator
/// holds at most 64 connections
/// that have not proved the token, and a fleet of simulated workers joins
/// all at once), as a real worker does, for up to a minute.
async fn attach(
    url: &str,
    hello: v1::Hello,
) -> anyhow::Result<(
    mpsc::Sender<v1::WorkerMessage>,
    tonic::Streaming<v1::CoordinatorMessage>,
)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut pause = Duration::from_millis(20);
    loop {
        let attempt = async {
            let channel = tonic::transport::Endpoint::from_shared(url.to_string())?
                .tcp_nodelay(true)
                .connect()
                .await
                .context("dialling the coordinator")?;
            let mut client = CoordinatorClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            let (tx, rx) = mpsc::channel::<v1::WorkerMessage>(64);
            tx.send(msg(WBody::Hello(hello.clone()))).await?;
            let inbound = client
                .attach(ReceiverStream::new(rx))
                .await
                .map_err(|s| anyhow::anyhow!("attach refused: {}", s.message()))?
                .into_inner();
            anyhow::Ok((tx, inbound))
        };
        match attempt.await {
            Ok(attached) => return Ok(attached),
            Err(e) if tokio::time::Instant::now() + pause < deadline => {
                tracing::debug!(error = %e, "attaching again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(e),
        }
    }
}

/// One simulated worker, from hello to the end of the run.
async fn one(
    url: &str,
    token: &str,
    index: u32,
    reports: u64,
    samples: &Arc<SampleReports>,
    started: StartSignal,
) -> anyhow::Result<Sent> {
    let hello = v1::Hello {
        version: VERSION.to_string(),
        requested_index: Some(index),
        hostname: format!("sim-{index}"),
        cpus: 1,
        auth_token: token.to_string(),
        pid: std::process::id(),
    };
    let (tx, mut inbound) = attach(url, hello).await?;
    let mut reporter: Option<tokio::task::JoinHandle<anyhow::Result<Sent>>> = None;
    loop {
        let m = match inbound.message().await {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(s) => bail!("the coordinator's stream failed: {}", s.message()),
        };
        match m.body {
            Some(CBody::Reject(r)) => bail!("rejected: {}", r.reason),
            Some(CBody::Assign(a)) => {
                let ready = v1::Ready {
                    step: a.step,
                    planned_requests: 0,
                    routes: Vec::new(),
                    clock: None,
                };
                tx.send(msg(WBody::Ready(ready))).await?;
            }
            Some(CBody::Start(s)) => {
                let plan = Reporting {
                    step: s.step,
                    start: tokio::time::Instant::now() + Duration::from_micros(s.delay_us),
                    first: u64::from(index),
                    reports,
                };
                let (tx, samples, started) = (tx.clone(), samples.clone(), started.clone());
                reporter = Some(tokio::spawn(report_loop(plan, tx, samples, started)));
            }
            Some(CBody::Ping(p)) => {
                let beat = v1::Heartbeat {
                    seq: p.seq,
                    in_flight: 0,
                };
                tx.send(msg(WBody::Heartbeat(beat))).await?;
            }
            Some(CBody::Stop(_)) => break,
            _ => {}
        }
    }
    match reporter {
        Some(r) => r.await.context("the report loop panicked")?,
        None => bail!("the run ended before it started"),
    }
}

/// When and what one simulated worker reports.
struct Reporting {
    step: u32,
    start: tokio::time::Instant,
    /// The variant of its first report (workers start on different ones).
    first: u64,
    reports: u64,
}

/// Send `reports` reports a second apart from the barrier, then Done.
async fn report_loop(
    plan: Reporting,
    tx: mpsc::Sender<v1::WorkerMessage>,
    samples: Arc<SampleReports>,
    started: StartSignal,
) -> anyhow::Result<Sent> {
    tokio::time::sleep_until(plan.start).await;
    if let Some(s) = started.lock().ok().and_then(|mut g| g.take()) {
        let _ = s.send(());
    }
    let mut sent = Sent {
        by_variant: vec![0; samples.variants()],
        bytes: 0,
    };
    for seq in 0..plan.reports {
        tokio::time::sleep_until(plan.start + Duration::from_secs(seq + 1)).await;
        let i = ((plan.first + seq) % samples.variants() as u64) as usize;
        let mut r = samples.message(i, seq);
        r.step = plan.step;
        sent.bytes += r.encoded_len() as u64;
        sent.by_variant[i] += 1;
        tx.send(msg(WBody::Report(r))).await?;
    }
    let done = v1::Done {
        step: plan.step,
        sent: 0,
        cancelled: false,
        stopped_by: String::new(),
        not_sent_at_end: 0,
    };
    tx.send(msg(WBody::Done(done))).await?;
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoded_sample_merges_to_what_was_encoded() {
        let s = SampleReports::new(3, 50, 1);
        let mut merge = cicada_coordinator::ReportMerge::new(1.0, 3);
        for i in 0..3 {
            merge.add_encoded(i as u32, &s.encoded(i, 4)).unwrap();
        }
        let merged = merge.total();
        assert_eq!(merged.outcomes.sent(), 150);
        let want = s.expected(&[1, 1, 1]).unwrap();
        for m in cicada_metrics::Metric::ALL {
            let (got, want) = (merged.histogram(m), want.histogram(m));
            assert_eq!(got.count(), want.count(), "{m:?}");
            assert_eq!(got.sum(), want.sum(), "{m:?}");
            assert_eq!(got.quantile(0.99), want.quantile(0.99), "{m:?}");
        }
        assert!(s.message(0, 0).encoded_len() > 1000);
    }
}
