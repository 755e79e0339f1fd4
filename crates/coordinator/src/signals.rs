//! SIGINT / SIGTERM: the first asks the run to stop and keep its results; the
//! second exits at once, taking the local workers down with it. The web
//! UI's `/stop` (GET or POST) arrives here too and stops the run as a first
//! SIGINT does (results written); it never forces the immediate exit.

use std::sync::Mutex;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::error::exit_code_of;

/// Listens for SIGINT and SIGTERM.
pub struct Signals {
    int: Option<Signal>,
    term: Option<Signal>,
    /// The web UI's `/stop`, each carrying the request that asked
    /// (`GET /stop` or `POST /stop`).
    web: Option<tokio::sync::mpsc::UnboundedReceiver<&'static str>>,
    seen: u32,
}

impl Signals {
    /// Install the handlers (a platform without them just never fires).
    pub fn install() -> Self {
        Self {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
            web: None,
            seen: 0,
        }
    }

    /// Also stop on the web UI's `/stop`.
    pub fn attach_web(&mut self, stop: tokio::sync::mpsc::UnboundedReceiver<&'static str>) {
        self.web = Some(stop);
    }

    /// Resolves on the next signal; on the second, exits the process.
    pub async fn next(&mut self) -> &'static str {
        let name = tokio::select! {
            Some(()) = recv(&mut self.int) => "SIGINT",
            Some(()) = recv(&mut self.term) => "SIGTERM",
            Some(asked) = recv_web(&mut self.web) => {
                // one stop is enough: later ones change nothing; the run
                // records the request that stopped it
                self.web = None;
                return asked;
            }
        };
        self.seen += 1;
        if self.seen >= 2 {
            eprintln!("cicada: second {name}: exiting now without writing results");
            kill_local_workers();
            std::process::exit(exit_code_of(name));
        }
        name
    }
}

/// Local worker processes, by pid. They run in process groups of their own
/// (a terminal's signal is meant for the run, which stops them itself), so a
/// second signal, which exits at once, must end them too.
static LOCAL_WORKERS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn local_workers() -> std::sync::MutexGuard<'static, Vec<u32>> {
    LOCAL_WORKERS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Remember a local worker process to end on a second signal.
pub fn end_with_coord(pid: u32) {
    local_workers().push(pid);
}

/// Forget a local worker that was reaped (its pid may be reused).
pub fn reaped(pid: u32) {
    local_workers().retain(|p| *p != pid);
}

fn kill_local_workers() {
    for pid in local_workers().iter() {
        if let Ok(pid) = i32::try_from(*pid) {
            // SAFETY: plain FFI call; the pid is our own child, not yet reaped
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

async fn recv_web(
    s: &mut Option<tokio::sync::mpsc::UnboundedReceiver<&'static str>>,
) -> Option<&'static str> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

async fn recv(s: &mut Option<Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
