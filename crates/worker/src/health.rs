//! The worker's view of itself, reported with every interval: how late its
//! runtime runs (a ticker that measures its own lateness: if the client cannot
//! keep its own timer, it cannot keep its measurements either), the CPU time
//! the process used, and its memory.

use std::sync::Mutex;
use std::time::Duration;

use cicada_metrics::{LatencyHistogram, Metric, MetricSet};
use cicada_sys::process::{page_size, resource_usage};
use tokio_util::sync::CancellationToken;

/// How often the ticker checks its own lateness.
pub const TICK: Duration = Duration::from_millis(10);

/// Health samples since the last report.
#[derive(Debug, Default)]
pub struct Health {
    stalls: Mutex<LatencyHistogram>,
    cpu_at_last_take: Mutex<u64>,
}

/// One interval's health.
#[derive(Debug, Clone, Default)]
pub struct HealthReport {
    /// Ticker lateness samples (µs), as a `runtime_stall` histogram.
    pub stalls: MetricSet,
    /// CPU time (user + system) the process used since the last report, µs.
    pub cpu_us: u64,
    /// Resident memory now, bytes.
    pub rss_bytes: u64,
    /// Peak resident memory so far, bytes.
    pub peak_rss_bytes: u64,
}

/// Resident memory now, bytes (0 where /proc is unavailable).
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    pages * page_size()
}

impl Health {
    /// Start measuring (the first report's CPU time starts here).
    pub fn new() -> Self {
        Self {
            stalls: Mutex::new(LatencyHistogram::new()),
            cpu_at_last_take: Mutex::new(resource_usage().cpu_us),
        }
    }

    /// Tick every [`TICK`] until `stop`, recording how late each tick ran.
    pub async fn run_ticker(&self, stop: CancellationToken) {
        let start = tokio::time::Instant::now();
        let mut k: u32 = 0;
        loop {
            k = k.wrapping_add(1);
            let due = start + TICK * k;
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                () = stop.cancelled() => return,
            }
            let now = tokio::time::Instant::now();
            let late = now.saturating_duration_since(due);
            if let Ok(mut h) = self.stalls.lock() {
                h.record(late.as_micros() as u64);
            }
            // after a long stall, resume from now rather than firing a burst of catch-up ticks
            if late > TICK {
                let behind = (now.duration_since(start).as_micros() / TICK.as_micros()) as u32;
                k = behind;
            }
        }
    }

    /// Everything since the last call.
    pub fn take(&self) -> HealthReport {
        let stalls = self
            .stalls
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default();
        let mut set = MetricSet::default();
        set.set_histogram(Metric::RuntimeStall, stalls);
        let usage = resource_usage();
        let now = usage.cpu_us;
        let cpu_us = self
            .cpu_at_last_take
            .lock()
            .map(|mut last| {
                let d = now.saturating_sub(*last);
                *last = now;
                d
            })
            .unwrap_or(0);
        HealthReport {
            stalls: set,
            cpu_us,
            rss_bytes: rss_bytes(),
            peak_rss_bytes: usage.peak_rss_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU time of the calling thread, µs.
    fn thread_cpu_us() -> u64 {
        let cpu = cicada_sys::clock::now(cicada_sys::clock::Clock::ThreadCpu)
            .expect("clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
        cpu.as_micros() as u64
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_blocked_runtime_shows_as_a_stall_and_cpu_is_counted() {
        let health = std::sync::Arc::new(Health::new());
        let stop = CancellationToken::new();
        let h = health.clone();
        let s = stop.clone();
        let ticker = tokio::spawn(async move { h.run_ticker(s).await });
        tokio::time::sleep(Duration::from_millis(60)).await;
        // hog the only runtime worker thread until it has spent 80 ms of CPU
        // itself (the test body runs on the block_on thread, so the hog must
        // be a task). Its own thread's CPU: wall time is too little on a busy
        // machine (an 80 ms spin got 41 ms of CPU), and the process's CPU
        // counts the tests running beside this one (it ended after 32 ms)
        tokio::spawn(async {
            let cpu0 = thread_cpu_us();
            while thread_cpu_us() < cpu0 + 80_000 {
                std::hint::spin_loop();
            }
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        stop.cancel();
        let _ = ticker.await;
        let report = health.take();
        let stalls = report.stalls.histogram(Metric::RuntimeStall);
        assert!(stalls.count() >= 5, "{}", stalls.count());
        assert!(
            stalls.max() >= 60_000,
            "the 80 ms hog shows up: max {} µs",
            stalls.max()
        );
        assert!(report.cpu_us >= 60_000, "cpu {} µs", report.cpu_us);
        assert!(report.rss_bytes > 0 && report.peak_rss_bytes >= report.rss_bytes / 2);
        assert!(
            health
                .take()
                .stalls
                .histogram(Metric::RuntimeStall)
                .is_empty()
        );
    }
}
