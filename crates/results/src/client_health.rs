//! Is the client the limit? The workers' own health, judged.
//!
//! A load generator that cannot keep up reports the server as slower than it
//! is. Each worker measures how late its runtime runs (a 10 ms ticker), how
//! much CPU it used, and how late requests left their schedule; when any of
//! these says the client was saturated, the result is marked `client_bound`
//! and the console says so.

use cicada_metrics::{Metric, MetricSet};

use crate::WorkerShare;

/// Runtime stall p99 above which the client could not run when it had to, ms.
pub const STALL_P99_MS: f64 = 10.0;
/// Share of a worker's threads' CPU time above which it was saturated.
pub const CPU_SATURATED: f64 = 0.9;
/// Schedule lag p99 (uncapped open loop) above which requests left late, ms.
pub const LAG_P99_MS: f64 = 10.0;

/// One worker's resource use over a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerUsage {
    /// CPU time (user + system) of the worker process, µs.
    pub cpu_us: u64,
    /// Most resident memory it reported, bytes.
    pub peak_rss_bytes: u64,
}

/// One worker's resource use, judged.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerHealth {
    pub index: u32,
    pub threads: u32,
    pub cpu_us: u64,
    /// CPU time over the time its threads had (1.0 = every thread busy all the time).
    pub cpu_utilization: f64,
    pub peak_rss_bytes: u64,
    /// Its clock against the coordinator's, if it measured one.
    pub clock: Option<crate::WorkerClock>,
    /// How it placed the start instant, if it said.
    pub start_basis: Option<crate::StartBasis>,
}

/// The fleet's client health over a step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientHealth {
    /// CPU time of every worker process, µs.
    pub cpu_us: u64,
    /// Largest peak RSS of any worker, bytes.
    pub peak_rss_bytes: u64,
    /// Runtime stall percentiles over every worker, ms.
    pub stall_p50_ms: f64,
    pub stall_p99_ms: f64,
    pub stall_max_ms: f64,
    pub workers: Vec<WorkerHealth>,
    /// The client, not the server, limited the run.
    pub client_bound: bool,
    /// Why, in words.
    pub reasons: Vec<String>,
}

/// Judge the step: `elapsed_s` is how long the workers ran, `uncapped_open_loop`
/// says whether schedule lag is all the client's (no concurrency cap to wait for).
pub fn assess(
    health: &MetricSet,
    usage: &std::collections::BTreeMap<u32, WorkerUsage>,
    shares: &[WorkerShare],
    total: &MetricSet,
    elapsed_s: f64,
    uncapped_open_loop: bool,
) -> ClientHealth {
    let stall = health.histogram(Metric::RuntimeStall);
    let ms = |us: u64| us as f64 / 1e3;
    let mut c = ClientHealth {
        stall_p50_ms: ms(stall.quantile(0.5)),
        stall_p99_ms: ms(stall.quantile(0.99)),
        stall_max_ms: ms(stall.max()),
        ..ClientHealth::default()
    };
    for share in shares {
        let u = usage.get(&share.index).copied().unwrap_or_default();
        let budget_us = elapsed_s * 1e6 * f64::from(share.threads.max(1));
        let util = if budget_us > 0.0 {
            u.cpu_us as f64 / budget_us
        } else {
            0.0
        };
        c.cpu_us += u.cpu_us;
        c.peak_rss_bytes = c.peak_rss_bytes.max(u.peak_rss_bytes);
        if util > CPU_SATURATED {
            c.reasons.push(format!(
                "worker {} used {:.0} % of its {} thread(s)' CPU",
                share.index,
                util * 100.0,
                share.threads
            ));
        }
        c.workers.push(WorkerHealth {
            index: share.index,
            threads: share.threads,
            cpu_us: u.cpu_us,
            cpu_utilization: util,
            peak_rss_bytes: u.peak_rss_bytes,
            clock: share.clock,
            start_basis: share.start_basis,
        });
    }
    if !stall.is_empty() && c.stall_p99_ms > STALL_P99_MS {
        c.reasons.push(format!(
            "the worker runtime ran late (stall p99 {:.1} ms, max {:.1} ms)",
            c.stall_p99_ms, c.stall_max_ms
        ));
    }
    // behind its own schedule with no cap to wait for: the client's doing
    let behind = shares.iter().filter(|s| s.not_sent_at_end > 0);
    for share in behind.filter(|_| uncapped_open_loop) {
        c.reasons.push(format!(
            "worker {} had {} requests due and not sent at the time limit",
            share.index, share.not_sent_at_end
        ));
    }
    let lag = total.histogram(Metric::ScheduleLag);
    if uncapped_open_loop && !lag.is_empty() && ms(lag.quantile(0.99)) > LAG_P99_MS {
        c.reasons.push(format!(
            "requests left late (schedule lag p99 {:.1} ms)",
            ms(lag.quantile(0.99))
        ));
    }
    c.client_bound = !c.reasons.is_empty();
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn share(index: u32, threads: u32) -> WorkerShare {
        WorkerShare {
            index,
            host: "h".into(),
            planned: 0,
            reported: 0,
            not_sent_at_end: 0,
            lost: false,
            threads,
            version: String::new(),
            clock: None,
            start_basis: None,
        }
    }

    #[test]
    fn healthy_clients_are_not_flagged() {
        let mut health = MetricSet::default();
        for _ in 0..1000 {
            health.histogram_mut(Metric::RuntimeStall).record(300);
        }
        let usage: BTreeMap<u32, WorkerUsage> = [(
            0,
            WorkerUsage {
                cpu_us: 2_000_000,
                peak_rss_bytes: 30_000_000,
            },
        )]
        .into();
        let c = assess(
            &health,
            &usage,
            &[share(0, 2)],
            &MetricSet::default(),
            10.0,
            true,
        );
        assert!(!c.client_bound, "{:?}", c.reasons);
        assert!((c.workers[0].cpu_utilization - 0.1).abs() < 1e-9);
        assert_eq!(c.peak_rss_bytes, 30_000_000);
    }

    #[test]
    fn stalls_cpu_and_lag_each_flag_the_client() {
        let mut health = MetricSet::default();
        for _ in 0..100 {
            health.histogram_mut(Metric::RuntimeStall).record(40_000);
        }
        let usage: BTreeMap<u32, WorkerUsage> = [(
            0,
            WorkerUsage {
                cpu_us: 9_800_000,
                peak_rss_bytes: 1,
            },
        )]
        .into();
        let mut total = MetricSet::default();
        for _ in 0..100 {
            total.histogram_mut(Metric::ScheduleLag).record(50_000);
        }
        let c = assess(&health, &usage, &[share(0, 1)], &total, 10.0, true);
        assert!(c.client_bound);
        assert_eq!(c.reasons.len(), 3, "{:?}", c.reasons);
        // with a concurrency cap, waiting for a slot is not the client's fault
        let capped = assess(
            &MetricSet::default(),
            &BTreeMap::new(),
            &[],
            &total,
            10.0,
            false,
        );
        assert!(!capped.client_bound);
    }

    #[test]
    fn requests_not_sent_at_the_time_limit_flag_an_uncapped_client() {
        let behind = WorkerShare {
            planned: 2_000,
            reported: 1_200,
            not_sent_at_end: 800,
            ..share(1, 1)
        };
        let shares = [share(0, 1), behind];
        let none = MetricSet::default();
        let c = assess(&none, &BTreeMap::new(), &shares, &none, 2.0, true);
        assert!(c.client_bound);
        assert_eq!(
            c.reasons,
            ["worker 1 had 800 requests due and not sent at the time limit"]
        );
        // waiting for a concurrency cap at the limit is the server's pace
        let capped = assess(&none, &BTreeMap::new(), &shares, &none, 2.0, false);
        assert!(!capped.client_bound);
    }
}
