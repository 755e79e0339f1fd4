//! The server-side view of a run: when a replica exposes Prometheus
//! `/metrics` (vLLM, SGLang, TGI, llama.cpp with `--metrics`), it is scraped
//! just before the start barrier, every report interval during the run (for
//! gauge peaks), and once after; the differences are what users otherwise dig
//! out of server logs: speculative-decoding acceptance, prefix-cache hit rate,
//! preemptions, peak KV-cache usage, server-side TTFT and queue time. A
//! replica without `/metrics`, or a metric a server does not expose, is
//! skipped silently.

mod figures;
pub(crate) mod prom;

use std::time::Duration;

use cicada_scenarios::Scenario;
use cicada_worker::http::{self, ApiKey};
use reqwest::header::HeaderMap;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use figures::{GaugeTrack, Raw};
pub use figures::{HistFigures, ServerFigures};
use prom::Exposition;

use crate::target::{Target, join_url};

/// Longest a scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// Server-side figures per target (in `target.urls` order) and for the fleet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerView {
    pub targets: Vec<Option<ServerFigures>>,
    pub total: Option<ServerFigures>,
}

struct Scraper {
    http: reqwest::Client,
    headers: HeaderMap,
}

impl Scraper {
    async fn scrape(&self, url: &str) -> Option<Exposition> {
        let resp = self
            .http
            .get(url)
            .headers(self.headers.clone())
            .timeout(SCRAPE_TIMEOUT)
            .send()
            .await
            .map_err(|e| tracing::debug!(%url, error = %e, "no server metrics"))
            .ok()?;
        if !resp.status().is_success() {
            tracing::debug!(%url, status = %resp.status(), "no server metrics");
            return None;
        }
        let text = resp.text().await.ok()?;
        let e = Exposition::parse(&text);
        (!e.is_empty()).then_some(e)
    }
}

/// One replica being watched: its scrape before the run and its gauges so far.
struct Watched {
    url: String,
    before: Exposition,
    gauges: GaugeTrack,
    scrapes: u32,
}

/// Scraping in progress; [`Watch::finish`] takes the last scrape and the figures.
pub struct Watch {
    replicas: usize,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Vec<Option<Raw>>>>,
}

impl Watch {
    /// Scrape every replica once (before the barrier) and keep scraping every
    /// `load.report_interval` until [`Watch::finish`].
    pub async fn start(s: &Scenario, target: &Target) -> Watch {
        let replicas = target.bases.len();
        let off = Watch {
            replicas,
            stop: None,
            task: None,
        };
        if !s.target.server_metrics {
            return off;
        }
        let (Ok(http), Ok(headers)) = (
            http::client(&target.resolved),
            http::headers(&target.resolved, ApiKey::IfSet),
        ) else {
            return off;
        };
        let scraper = Scraper { http, headers };
        let mut watched = Vec::with_capacity(replicas);
        for base in &target.bases {
            let url = join_url(base, "/metrics");
            watched.push(scraper.scrape(&url).await.map(|before| {
                let mut gauges = GaugeTrack::default();
                gauges.observe(&before, false);
                Watched {
                    url,
                    before,
                    gauges,
                    scrapes: 1,
                }
            }));
        }
        if watched.iter().all(Option::is_none) {
            return off;
        }
        let interval = s.load.report_interval.get();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(watch(scraper, watched, interval, rx));
        Watch {
            replicas,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Take the last scrape and derive the figures.
    pub async fn finish(mut self) -> ServerView {
        let mut view = ServerView {
            targets: vec![None; self.replicas],
            total: None,
        };
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(task) = self.task.take() else {
            return view;
        };
        let raws = match task.await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "server metrics scraping failed");
                return view;
            }
        };
        let mut fleet: Option<Raw> = None;
        for (slot, raw) in view.targets.iter_mut().zip(&raws) {
            if let Some(raw) = raw {
                *slot = Some(raw.figures());
                fleet.get_or_insert_with(Raw::default).merge(raw);
            }
        }
        view.total = fleet.map(|f| f.figures());
        view
    }
}

async fn watch(
    scraper: Scraper,
    mut watched: Vec<Option<Watched>>,
    interval: Duration,
    mut stop: oneshot::Receiver<()>,
) -> Vec<Option<Raw>> {
    loop {
        tokio::select! {
            _ = &mut stop => break,
            () = tokio::time::sleep(interval) => {
                for w in watched.iter_mut().flatten() {
                    if let Some(e) = scraper.scrape(&w.url).await {
                        w.gauges.observe(&e, true);
                        w.scrapes += 1;
                    }
                }
            }
        }
    }
    let mut out = Vec::with_capacity(watched.len());
    for w in watched {
        let raw = match w {
            Some(mut w) => match scraper.scrape(&w.url).await {
                Some(after) => {
                    w.gauges.observe(&after, true);
                    Raw::between(&w.before, &after, w.gauges, w.scrapes + 1)
                }
                None => None,
            },
            None => None,
        };
        out.push(raw);
    }
    out
}
