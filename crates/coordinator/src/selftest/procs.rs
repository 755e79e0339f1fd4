//! The processes a selftest level runs: the mock on its core, and on the
//! other core either a one-worker `coord run` or the floor client.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

use super::SelftestArgs;
use super::floor::FloorFigures;

/// Limit a child to one core (Linux), so the client and the mock never share one.
pub(super) fn pin(cmd: &mut Command, core: usize) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(core, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A mock process; killed when dropped.
pub(super) struct Mock {
    child: Child,
    pub url: String,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `coord mock` pinned to the mock's core with the level's timing.
pub(super) fn start_mock(exe: &Path, a: &SelftestArgs) -> anyhow::Result<Mock> {
    let mut cmd = Command::new(exe);
    cmd.args(["mock", "--listen", "127.0.0.1:0"])
        .args([
            "--ttft-ms",
            &a.ttft_ms.to_string(),
            "--itl-ms",
            &a.itl_ms.to_string(),
        ])
        .args(["--output-tokens", &a.output_tokens.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    pin(&mut cmd, a.mock_core);
    let mut child = cmd.spawn().context("starting the mock")?;
    let stdout = child.stdout.take().context("the mock's stdout")?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading the mock's address")?;
    let url = line
        .split_whitespace()
        .last()
        .filter(|u| u.starts_with("http://"))
        .with_context(|| format!("unexpected mock banner {line:?}"))?
        .to_string();
    Ok(Mock { child, url })
}

/// The mock's ground truth (`/mock/stats`).
pub(super) async fn mock_stats(url: &str) -> anyhow::Result<serde_json::Value> {
    reqwest::get(format!("{url}/mock/stats"))
        .await
        .context("asking the mock for its stats")?
        .json()
        .await
        .context("reading the mock's stats")
}

/// Run `cmd` pinned to `core` and return its stdout, or fail with its stderr.
async fn pinned_output(mut cmd: Command, core: usize, what: &str) -> anyhow::Result<Vec<u8>> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    pin(&mut cmd, core);
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .with_context(|| format!("waiting for {what}"))?
        .with_context(|| format!("running {what}"))?;
    if !output.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output.stdout)
}

/// Run `scenario` (whose results go to `out`) with one worker pinned to `core`; its result.json.
pub(super) async fn pinned_run(
    exe: &Path,
    core: usize,
    scenario: &str,
    out: &Path,
    what: &str,
) -> anyhow::Result<serde_json::Value> {
    let sc = out.with_extension("toml");
    std::fs::write(&sc, scenario).context("writing the scenario")?;
    let mut cmd = Command::new(exe);
    cmd.arg("run").arg(&sc).args(["--workers", "1", "--quiet"]);
    pinned_output(cmd, core, what).await?;
    let r = serde_json::from_slice(
        &std::fs::read(out.join("result.json")).context("reading result.json")?,
    )
    .context("parsing result.json")?;
    Ok(r)
}

/// Run the floor client for `streams` against `url`, pinned to the worker's core.
pub(super) async fn pinned_floor(
    exe: &Path,
    a: &SelftestArgs,
    streams: u32,
    url: &str,
) -> anyhow::Result<FloorFigures> {
    let mut cmd = Command::new(exe);
    cmd.arg("selftest")
        .args(["--floor-url", url])
        .args(["--levels", &streams.to_string()])
        .args(["--seconds", &a.seconds.to_string()])
        .args(["--output-tokens", &a.output_tokens.to_string()]);
    let what = format!("the floor client at {streams} streams");
    let out = pinned_output(cmd, a.worker_core, &what).await?;
    serde_json::from_slice(&out).with_context(|| format!("reading the figures of {what}"))
}
