//! A worker asked to go by its own host (SIGINT or SIGTERM: a Ctrl-C, a
//! Kubernetes pod deletion, `kill`): it finishes the running step as a Stop
//! with cancellation would (in-flight requests counted as cancelled), reports
//! everything it measured, tells the coordinator why it ended early, and
//! exits with 128 + the signal's number. A second signal exits at once.

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

/// Why a worker is leaving on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveReason {
    /// What stopped it, as the coordinator will show it ("SIGTERM on its host").
    pub what: String,
    /// The exit code it leaves with.
    pub exit_code: i32,
}

/// The switch that tells a serving worker to finish, report and leave;
/// shared between the signal watcher and the link.
#[derive(Debug, Clone, Default)]
pub struct Leave {
    token: CancellationToken,
    reason: Arc<OnceLock<LeaveReason>>,
}

impl Leave {
    /// A switch nobody has pulled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ask the worker to leave (the first reason given is kept).
    pub fn request(&self, what: impl Into<String>, exit_code: i32) {
        let _ = self.reason.set(LeaveReason {
            what: what.into(),
            exit_code,
        });
        self.token.cancel();
    }

    /// Why it was asked to leave, once it was.
    pub fn reason(&self) -> Option<&LeaveReason> {
        self.reason.get()
    }

    /// Resolves once the worker was asked to leave.
    pub async fn requested(&self) {
        self.token.cancelled().await
    }
}

/// Watch SIGINT and SIGTERM for the worker binary: the first pulls `leave`,
/// the second exits the process at once.
pub async fn watch_signals(leave: Leave) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!(
            "cannot watch SIGINT/SIGTERM: a signal will end the worker without a report"
        );
        return;
    };
    let mut next = async || {
        tokio::select! {
            _ = int.recv() => ("SIGINT", 130),
            _ = term.recv() => ("SIGTERM", 143),
        }
    };
    let (name, code) = next().await;
    tracing::warn!("{name}: finishing the running step, reporting it, and leaving");
    leave.request(format!("{name} on its host"), code);
    let (name, code) = next().await;
    eprintln!("worker: second {name}: exiting now without reporting");
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_reason_is_kept_and_waiters_wake() {
        let leave = Leave::new();
        assert!(leave.reason().is_none());
        let waiting = {
            let l = leave.clone();
            tokio::spawn(async move { l.requested().await })
        };
        leave.request("SIGTERM on its host", 143);
        leave.request("SIGINT on its host", 130);
        waiting.await.unwrap();
        assert_eq!(
            leave.reason(),
            Some(&LeaveReason {
                what: "SIGTERM on its host".into(),
                exit_code: 143
            })
        );
    }
}
