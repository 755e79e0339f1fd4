//! The fleet's local workers: `cicada worker` processes, or tasks of
//! this process (no process boundary, for tests that need no binaries).

use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::{Child, Command};

use super::{FleetOptions, LocalWorkers, TOKEN_ENV};
use crate::error::FleetError;

/// The local workers of a fleet, ended at shutdown.
#[derive(Default)]
pub(super) struct Locals {
    /// `cicada worker` processes.
    pub children: Vec<Child>,
    /// In-process workers (the fleet's unit tests).
    #[cfg(test)]
    pub tasks: Vec<tokio::task::JoinHandle<Result<(), cicada_worker::LinkError>>>,
}

/// Start `options.local_workers` workers dialling `url`.
pub(super) fn start(options: &FleetOptions, url: &str) -> Result<Locals, FleetError> {
    let mut locals = Locals::default();
    for i in 0..options.local_workers {
        match &options.local {
            LocalWorkers::Processes(bin) => {
                locals.children.push(spawn_process(options, bin, url, i)?)
            }
            #[cfg(test)]
            LocalWorkers::InProcess => locals.tasks.push(cicada_worker::spawn_in_process(
                url.to_string(),
                cicada_worker::Identity {
                    requested_index: Some(i),
                    token: options.token.clone(),
                    threads: 1,
                },
                options.wait_workers,
            )),
        }
    }
    Ok(locals)
}

/// Start one local `cicada worker` process dialling `url`.
fn spawn_process(
    options: &FleetOptions,
    bin: &PathBuf,
    url: &str,
    index: u32,
) -> Result<Child, FleetError> {
    let mut cmd = Command::new(bin);
    cmd.arg("worker")
        .arg("--coordinator")
        .arg(url)
        .arg("--index")
        .arg(index.to_string());
    if let Some(tls) = &options.tls {
        let trust = tls.local.as_ref().ok_or(FleetError::TlsNotSettled)?;
        cmd.arg("--tls-ca").arg(&trust.ca_path);
        if let Some(domain) = &trust.domain {
            cmd.arg("--tls-domain").arg(domain);
        }
    }
    cmd.env(TOKEN_ENV, &options.token)
        // a process group of its own: a Ctrl-C in the terminal (SIGINT to
        // the foreground group) or `timeout`'s SIGTERM to cicada's group is
        // meant for the run, which stops its workers itself and keeps what
        // they measured; a worker that dies with the coordinator loses it
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| FleetError::Spawn {
            bin: bin.clone(),
            source,
        })
        .inspect(|child| {
            if let Some(pid) = child.id() {
                crate::signals::end_with_coord(pid);
            }
        })
}

impl Locals {
    /// Exit statuses of the processes that have exited, as text.
    pub(super) fn exited(&mut self) -> Vec<String> {
        self.children
            .iter_mut()
            .filter_map(|c| c.try_wait().ok().flatten())
            .map(|s| s.to_string())
            .collect()
    }

    /// Exit statuses of the local processes that have exited, when any has.
    pub(super) fn any_exited(&mut self) -> Option<String> {
        let exited = self.exited();
        (!exited.is_empty()).then(|| exited.join(", "))
    }

    /// Wait until `deadline` for every local worker to end, then end the rest.
    pub(super) async fn reap(&mut self, deadline: tokio::time::Instant) {
        for child in &mut self.children {
            let pid = child.id();
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if tokio::time::timeout(left, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
            if let Some(pid) = pid {
                crate::signals::reaped(pid);
            }
        }
        #[cfg(test)]
        for task in &mut self.tasks {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if tokio::time::timeout(left, &mut *task).await.is_err() {
                task.abort();
            }
        }
    }
}
