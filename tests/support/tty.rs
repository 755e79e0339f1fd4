//! `cicada` with its stderr on a pseudo-terminal, as a user at a terminal
//! runs it: what it writes there when it knows a person is reading (colour,
//! a progress bar) can be checked, beside what it writes to a pipe or file.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::{Run, cicada, wait_with_limit};

/// Run `cicada <args>` with `env`, stdout piped and stderr on a fresh
/// pseudo-terminal (its workers inherit it); `Run::stderr` is what the
/// terminal showed, line ends as `\n`. The colour settings of the test's
/// own environment (`NO_COLOR`, `CLICOLOR`, `CLICOLOR_FORCE`) are not passed
/// on: only `env` sets them.
pub fn coord_run_on_tty(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    let (mut master, slave) = crate::pty::open();
    let mut cmd = Command::new(cicada());
    cmd.args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave));
    for var in ["NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("starting coord");
    // our copy of the terminal's slave end must close, or reading the master
    // never ends
    drop(cmd);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut shown = Vec::new();
        // ends with EIO once every process holding the slave end has exited
        let _ = master.read_to_end(&mut shown);
        let _ = tx.send(shown);
    });
    let mut run = wait_with_limit(child, limit);
    // a worker may outlive the coordinator by a moment
    let shown = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
    run.stderr = String::from_utf8_lossy(&shown).replace("\r\n", "\n");
    run
}
