//! SIGINT / SIGTERM: the first asks the run to stop and keep its results; the
//! second exits at once.

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::error::exit_code_of;

/// Listens for SIGINT and SIGTERM.
pub struct Signals {
    int: Option<Signal>,
    term: Option<Signal>,
    seen: u32,
}

impl Signals {
    /// Install the handlers (a platform without them just never fires).
    pub fn install() -> Self {
        Self {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
            seen: 0,
        }
    }

    /// Resolves on the next signal; on the second, exits the process.
    pub async fn next(&mut self) -> &'static str {
        let name = tokio::select! {
            Some(()) = recv(&mut self.int) => "SIGINT",
            Some(()) = recv(&mut self.term) => "SIGTERM",
        };
        self.seen += 1;
        if self.seen >= 2 {
            eprintln!("coord: second {name}: exiting now without writing results");
            std::process::exit(exit_code_of(name));
        }
        name
    }
}

async fn recv(s: &mut Option<Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
