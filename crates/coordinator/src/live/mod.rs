//! `cicada run --metrics-addr ADDR`: the fleet's live figures in the
//! Prometheus text format at `http://ADDR/metrics`, for Grafana during long
//! runs. As one of the run's outputs ([`LiveSink`]) it renders the
//! exposition on every tick; the server only hands out the latest text.

use cicada_metrics::MetricSet;
mod render;

use cicada_results::sink::{Barrier, Sink, StepBegan, Tick};
use render::{LiveView, render};

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Content type of the Prometheus text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[error("--metrics-addr {addr}: {source}")]
pub struct LiveError {
    addr: SocketAddr,
    source: std::io::Error,
}

/// A running `/metrics` endpoint.
#[derive(Debug)]
pub struct LiveMetrics {
    addr: SocketAddr,
    text: Arc<RwLock<String>>,
    task: JoinHandle<()>,
}

impl LiveMetrics {
    /// Bind `addr` and serve `/metrics` until dropped.
    pub async fn serve(addr: SocketAddr) -> Result<Self, LiveError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| LiveError { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| LiveError { addr, source })?;
        let text = Arc::new(RwLock::new(String::new()));
        let task = tokio::spawn(accept_loop(listener, text.clone()));
        Ok(Self {
            addr: bound,
            text,
            task,
        })
    }

    /// The bound address (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replace what `/metrics` serves.
    pub fn publish(&self, text: String) {
        match self.text.write() {
            Ok(mut g) => *g = text,
            Err(poisoned) => *poisoned.into_inner() = text,
        }
    }
}

/// The endpoint as an output of the run: counters and summaries over the
/// whole run so far, gauges of the step running.
#[derive(Debug)]
pub struct LiveSink {
    metrics: LiveMetrics,
    /// Scenario name (a label of `cicada_info`).
    scenario: String,
    /// The step running (0 without a sweep).
    step: u32,
    /// Workers in the step.
    workers: u32,
    /// Requests planned for the step (0: open-ended).
    planned: u64,
    /// Measurements of the steps already finished.
    finished: MetricSet,
}

impl LiveSink {
    /// Publish run `scenario`'s figures at `metrics`.
    pub fn new(metrics: LiveMetrics, scenario: &str) -> Self {
        Self {
            metrics,
            scenario: scenario.to_string(),
            step: 0,
            workers: 0,
            planned: 0,
            finished: MetricSet::default(),
        }
    }

    /// Render and publish the exposition (run-wide figures).
    fn publish(&self, tick: &Tick<'_>) {
        let mut run = self.finished.clone();
        // sets decoded from reports share one layout; merging cannot fail
        let _ = run.merge(tick.total);
        self.metrics.publish(render(&LiveView {
            scenario: &self.scenario,
            run: &run,
            step: self.step,
            planned: self.planned,
            elapsed_s: tick.elapsed.as_secs_f64(),
            workers: self.workers,
            in_flight: tick.in_flight,
            last_interval: tick.rows.last(),
        }));
    }
}

impl Sink for LiveSink {
    fn step_began(&mut self, step: &StepBegan<'_>) {
        self.step = step.result.stage;
        self.workers = step.workers.len() as u32;
        self.planned = 0;
    }

    fn barrier(&mut self, barrier: &Barrier) {
        self.planned = barrier.planned;
    }

    /// An open loop's new rate leaves the step without a planned total.
    fn load_changed(&mut self, open_ended: bool) {
        if open_ended {
            self.planned = 0;
        }
    }

    fn tick(&mut self, tick: &Tick<'_>) {
        self.publish(tick);
    }

    /// The step's last figures, then folded into the run's.
    fn merge_closed(&mut self, tick: &Tick<'_>) {
        self.publish(tick);
        let _ = self.finished.merge(tick.total);
    }
}

impl Drop for LiveMetrics {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, text: Arc<RwLock<String>>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "metrics endpoint: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let text = text.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let text = text.clone();
                async move { Ok::<_, Infallible>(respond(&req, &text)) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn respond(req: &Request<Incoming>, text: &RwLock<String>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => {
            let body = match text.read() {
                Ok(g) => g.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            };
            (StatusCode::OK, CONTENT_TYPE, body)
        }
        (_, "/metrics") => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "use GET\n".to_string(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "cicada serves /metrics\n".to_string(),
        ),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_the_latest_text_at_metrics_only() {
        cicada_client::tls::install_crypto_provider();
        let live = LiveMetrics::serve("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        live.publish("cicada_workers 3\n".into());
        let base = format!("http://{}", live.addr());
        let resp = reqwest::get(format!("{base}/metrics")).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(
            resp.headers()[reqwest::header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/plain; version=0.0.4")
        );
        assert_eq!(resp.text().await.unwrap(), "cicada_workers 3\n");
        live.publish("cicada_workers 4\n".into());
        let again = reqwest::get(format!("{base}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(again, "cicada_workers 4\n");
        let missing = reqwest::get(format!("{base}/other")).await.unwrap();
        assert_eq!(missing.status(), 404);
    }

    #[tokio::test]
    async fn a_taken_port_is_a_clear_error() {
        let first = LiveMetrics::serve("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let err = LiveMetrics::serve(first.addr()).await.unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("--metrics-addr {}", first.addr())),
            "{err}"
        );
    }
}
