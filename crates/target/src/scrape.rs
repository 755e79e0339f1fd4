//! The server-side view of a run: when a replica exposes Prometheus
//! `/metrics` (vLLM, SGLang, TGI, llama.cpp with `--metrics`), it is scraped
//! just before the start barrier, every report interval during the run (for
//! gauge peaks), at every `[[stages]]` boundary, and once after; the
//! differences are what users otherwise dig out of server logs:
//! speculative-decoding acceptance, prefix-cache hit rate, preemptions, peak
//! KV-cache usage, server-side TTFT and queue time, for the run and for each
//! `[[stages]]` window. A replica without `/metrics`, or a metric a server
//! does not expose, is skipped silently. The figures so far (from the scrape
//! before the run to the newest one) are published after every scrape, for
//! the live page ([`Watch::live`]).

use std::time::Duration;

use cicada_client::http::{ApiKey, Client, HeaderSpec, Headers, Method, Request, Settings};
use cicada_plan::StageWindow;
use cicada_scenarios::Scenario;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use cicada_results::server::{ServerView, StepServerViews};

use crate::prom::{Exposition, GaugeTrack, Raw, view_of};

use crate::{Target, join_url};

/// Longest a scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

struct Scraper {
    http: Client,
    headers: Headers,
}

impl Scraper {
    async fn scrape(&self, url: &str) -> Option<Exposition> {
        let endpoint = self
            .http
            .endpoint(url)
            .map_err(|e| tracing::debug!(%url, error = %e, "no server metrics"))
            .ok()?;
        let request = Request {
            method: Method::Get,
            endpoint: &endpoint,
            headers: &self.headers,
            request_id: None,
            body: None,
        };
        let resp = self
            .http
            .fetch(request, SCRAPE_TIMEOUT)
            .await
            .map_err(|e| tracing::debug!(%url, error = %e, "no server metrics"))
            .ok()?;
        if !resp.ok() {
            tracing::debug!(%url, status = resp.status, "no server metrics");
            return None;
        }
        let e = Exposition::parse(&resp.text());
        (!e.is_empty()).then_some(e)
    }
}

/// One replica being watched: its scrape before the run and its gauges so far.
struct Watched {
    url: String,
    before: Exposition,
    gauges: GaugeTrack,
    scrapes: u32,
    /// The scrape taken at each window boundary reached so far (`None`: it failed).
    cuts: Vec<Option<Exposition>>,
    /// Gauges and scrape count of each window begun so far.
    window_gauges: Vec<(GaugeTrack, u32)>,
    /// The newest scrape that answered.
    latest: Option<Exposition>,
}

/// Scraping in progress; [`Watch::finish`] takes the last scrape and the figures.
pub struct Watch {
    replicas: usize,
    windows: usize,
    stop: Option<oneshot::Sender<()>>,
    started: Option<oneshot::Sender<Instant>>,
    task: Option<JoinHandle<Scraped>>,
    live: tokio::sync::watch::Receiver<Option<ServerView>>,
}

/// Per replica: the whole step's changes, and each window's.
type Scraped = (Vec<Option<Raw>>, Vec<Vec<Option<Raw>>>);

impl Watch {
    /// Scrape every replica once (before the barrier) and keep scraping every
    /// `load.report_interval`, and where each `[[stages]]` window after the
    /// first begins, until [`Watch::finish`].
    pub async fn start(s: &Scenario, target: &Target, stages: &[StageWindow]) -> Watch {
        let replicas = target.bases.len();
        let windows = stages.len();
        let boundaries = stages.iter().skip(1).map(|p| p.start).collect();
        let (live_tx, live) = tokio::sync::watch::channel(None);
        let off = Watch {
            replicas,
            windows,
            stop: None,
            started: None,
            task: None,
            live: live.clone(),
        };
        if !s.target.server_metrics {
            return off;
        }
        let (Ok(http), Ok(headers)) = (
            Client::with(Settings::from(&target.resolved)),
            cicada_client::http::headers(HeaderSpec::from(&target.resolved), ApiKey::IfSet),
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
                    cuts: Vec::new(),
                    window_gauges: vec![(gauges, 1)],
                    latest: None,
                }
            }));
        }
        if watched.iter().all(Option::is_none) {
            return off;
        }
        let interval = s.load.report_interval.get();
        let (tx, rx) = oneshot::channel();
        let (started_tx, started_rx) = oneshot::channel();
        let plan = Timing {
            interval,
            boundaries,
            windows,
            started: started_rx,
        };
        let task = tokio::spawn(watch(scraper, watched, plan, rx, live_tx));
        Watch {
            replicas,
            windows,
            stop: Some(tx),
            started: Some(started_tx),
            task: Some(task),
            live,
        }
    }

    /// The step's server figures so far, renewed after every scrape during
    /// it (`None` until the first; it ends with the step).
    pub fn live(&self) -> tokio::sync::watch::Receiver<Option<ServerView>> {
        self.live.clone()
    }

    /// The start barrier's instant, from which window boundaries are timed.
    pub fn started(&mut self, at: Instant) {
        if let Some(tx) = self.started.take() {
            let _ = tx.send(at);
        }
    }

    /// Take the last scrape and derive the figures.
    pub async fn finish(mut self) -> StepServerViews {
        let empty = |n: usize| vec![view_of(&[], self.replicas); n];
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(task) = self.task.take() else {
            return StepServerViews {
                whole: view_of(&[], self.replicas),
                windows: empty(self.windows),
            };
        };
        let (whole, per_replica) = match task.await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "server metrics scraping failed");
                return StepServerViews {
                    whole: view_of(&[], self.replicas),
                    windows: empty(self.windows),
                };
            }
        };
        let windows = (0..self.windows)
            .map(|i| {
                let raws: Vec<Option<Raw>> = per_replica
                    .iter()
                    .map(|w| w.get(i).cloned().flatten())
                    .collect();
                view_of(&raws, self.replicas)
            })
            .collect();
        StepServerViews {
            whole: view_of(&whole, self.replicas),
            windows,
        }
    }
}

/// When the watcher scrapes: every `interval`, and at each boundary once the
/// start barrier's instant is known.
struct Timing {
    interval: Duration,
    boundaries: Vec<Duration>,
    windows: usize,
    started: oneshot::Receiver<Instant>,
}

impl Watched {
    /// Fold in one scrape taken during the run; at a boundary it also closes
    /// the current window and opens the next.
    fn observe(&mut self, e: Option<Exposition>, boundary: bool) {
        if let Some(e) = &e {
            self.fold(e);
            self.latest = Some(e.clone());
        }
        if boundary {
            let mut next = GaugeTrack::default();
            if let Some(e) = &e {
                next.observe(e, false);
            }
            self.window_gauges.push((next, 1));
            self.cuts.push(e);
        }
    }

    /// Count one scrape into the run's gauges and the current window's.
    fn fold(&mut self, e: &Exposition) {
        self.gauges.observe(e, true);
        self.scrapes += 1;
        if let Some((g, n)) = self.window_gauges.last_mut() {
            g.observe(e, true);
            *n += 1;
        }
    }

    /// The changes from before the run to the newest scrape.
    fn so_far(&self) -> Option<Raw> {
        Raw::between(
            &self.before,
            self.latest.as_ref()?,
            self.gauges,
            self.scrapes,
        )
    }

    /// The whole run's changes and each window's, given the scrape after the run.
    fn changes(
        &self,
        after: Option<&Exposition>,
        windows: usize,
    ) -> (Option<Raw>, Vec<Option<Raw>>) {
        let Some(after) = after else {
            return (None, vec![None; windows]);
        };
        let whole = Raw::between(&self.before, after, self.gauges, self.scrapes);
        let per_window = (0..windows)
            .map(|i| {
                let from = if i == 0 {
                    Some(&self.before)
                } else {
                    self.cuts.get(i - 1)?.as_ref()
                };
                // a window the run never reached has no figures
                let to = match self.cuts.get(i) {
                    Some(cut) => cut.as_ref(),
                    None if i == self.cuts.len() => Some(after),
                    None => None,
                };
                let (gauges, scrapes) = self.window_gauges.get(i).copied()?;
                Raw::between(from?, to?, gauges, scrapes)
            })
            .collect();
        (whole, per_window)
    }
}

async fn watch(
    scraper: Scraper,
    mut watched: Vec<Option<Watched>>,
    mut timing: Timing,
    mut stop: oneshot::Receiver<()>,
    live: tokio::sync::watch::Sender<Option<ServerView>>,
) -> Scraped {
    let mut start: Option<Instant> = None;
    let mut waiting_for_start = true;
    let mut cuts = 0usize;
    let mut next_tick = Instant::now() + timing.interval;
    loop {
        let next_cut = start.and_then(|s| timing.boundaries.get(cuts).map(|b| s + *b));
        let wake = next_cut.map_or(next_tick, |c| c.min(next_tick));
        tokio::select! {
            _ = &mut stop => break,
            at = &mut timing.started, if waiting_for_start => {
                waiting_for_start = false;
                start = at.ok();
                continue;
            }
            () = tokio::time::sleep_until(wake) => {}
        }
        let now = Instant::now();
        let boundary = next_cut.is_some_and(|c| now >= c);
        if now >= next_tick {
            next_tick = now + timing.interval;
        }
        for w in watched.iter_mut().flatten() {
            let e = scraper.scrape(&w.url).await;
            w.observe(e, boundary);
        }
        if boundary {
            cuts += 1;
        }
        let so_far: Vec<Option<Raw>> = watched
            .iter()
            .map(|w| w.as_ref().and_then(Watched::so_far))
            .collect();
        live.send_replace(Some(view_of(&so_far, watched.len())));
    }
    let windows = timing.windows;
    let mut whole = Vec::with_capacity(watched.len());
    let mut per_window = Vec::with_capacity(watched.len());
    for w in watched {
        let (all, each) = match w {
            Some(mut w) => {
                let after = scraper.scrape(&w.url).await;
                if let Some(a) = &after {
                    w.fold(a);
                }
                w.changes(after.as_ref(), windows)
            }
            None => (None, vec![None; windows]),
        };
        whole.push(all);
        per_window.push(each);
    }
    (whole, per_window)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(finished: u32) -> Exposition {
        Exposition::parse(&format!(
            "vllm:request_success_total{{finished_reason=\"length\"}} {finished}\n"
        ))
    }

    fn watched() -> Watched {
        let before = scrape(0);
        let mut gauges = GaugeTrack::default();
        gauges.observe(&before, false);
        Watched {
            url: String::new(),
            before,
            gauges,
            scrapes: 1,
            cuts: Vec::new(),
            window_gauges: vec![(gauges, 1)],
            latest: None,
        }
    }

    fn finished(raw: &Option<Raw>) -> Option<f64> {
        raw.as_ref().and_then(|r| r.figures().requests_finished)
    }

    #[test]
    fn the_figures_so_far_run_to_the_newest_scrape_that_answered() {
        let mut w = watched();
        assert_eq!(
            finished(&w.so_far()),
            None,
            "nothing scraped during the run yet"
        );
        w.observe(Some(scrape(3)), false);
        assert_eq!(finished(&w.so_far()), Some(3.0));
        w.observe(None, false);
        assert_eq!(
            finished(&w.so_far()),
            Some(3.0),
            "a failed scrape keeps the last"
        );
        w.observe(Some(scrape(8)), true);
        assert_eq!(finished(&w.so_far()), Some(8.0));
    }

    #[test]
    fn windows_tile_the_run() {
        let mut w = watched();
        w.observe(Some(scrape(2)), false);
        w.observe(Some(scrape(3)), true);
        w.observe(Some(scrape(6)), false);
        let (whole, each) = w.changes(Some(&scrape(10)), 2);
        assert_eq!(finished(&whole), Some(10.0));
        let each: Vec<_> = each.iter().map(finished).collect();
        assert_eq!(each, [Some(3.0), Some(7.0)]);
    }

    #[test]
    fn a_window_the_run_never_reached_has_no_figures() {
        let mut w = watched();
        w.observe(Some(scrape(4)), true);
        let (_, each) = w.changes(Some(&scrape(5)), 3);
        let each: Vec<_> = each.iter().map(finished).collect();
        assert_eq!(each, [Some(4.0), Some(1.0), None]);
    }

    #[test]
    fn a_failed_boundary_scrape_drops_only_its_two_windows() {
        let mut w = watched();
        w.observe(Some(scrape(2)), true);
        w.observe(None, true);
        let (whole, each) = w.changes(Some(&scrape(9)), 3);
        assert_eq!(finished(&whole), Some(9.0));
        let each: Vec<_> = each.iter().map(finished).collect();
        assert_eq!(each, [Some(2.0), None, None]);
    }
}
