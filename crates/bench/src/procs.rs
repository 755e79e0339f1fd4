//! The processes a selftest level runs: the mock on its core, and on the
//! other core either a one-worker `cicada run` or the floor client.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

use super::SelftestArgs;
use super::floor::FloorFigures;

/// Limit a child to one core (Linux), so the client and the mock never share one.
pub(super) fn pin(cmd: &mut Command, core: usize) {
    pin_set(cmd, &[core]);
}

/// Limit a child to `cores` (Linux).
pub(super) fn pin_set(cmd: &mut Command, cores: &[usize]) {
    use std::os::unix::process::CommandExt;
    let cores = cores.to_vec();
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || cicada_sys::process::pin_to(&cores));
    }
}

/// A mock process; killed when dropped.
pub(super) struct Mock {
    child: Child,
    pub url: String,
    /// The CA that signed the mock's certificate (PEM file) when it serves TLS.
    pub ca: Option<PathBuf>,
    /// A client for the mock's own routes (trusting `ca`).
    pub http: reqwest::Client,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `cicada mock` pinned to the mock's core with the level's timing
/// (over TLS with a CA and certificate written into `dir` when asked).
pub(super) fn start_mock(exe: &Path, a: &SelftestArgs, dir: &Path) -> anyhow::Result<Mock> {
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
    let pki = a.tls.then(|| Pki::write(dir)).transpose()?;
    if let Some(p) = &pki {
        cmd.arg("--tls-cert")
            .arg(&p.cert)
            .arg("--tls-key")
            .arg(&p.key);
    }
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
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .with_context(|| format!("unexpected mock banner {line:?}"))?
        .to_string();
    let mut http = reqwest::Client::builder().no_proxy();
    if let Some(p) = &pki {
        let pem = std::fs::read(&p.ca).context("reading the CA")?;
        http = http.tls_certs_only([reqwest::Certificate::from_pem(&pem)?]);
    }
    Ok(Mock {
        child,
        url,
        ca: pki.map(|p| p.ca),
        http: http.build().context("a client for the mock's routes")?,
    })
}

/// Start `cicada mock` for one-token, non-streamed answers after `delay_ms`,
/// pinned to `cores`.
pub(super) fn start_mock_on(exe: &Path, delay_ms: f64, cores: &[usize]) -> anyhow::Result<Mock> {
    let mut cmd = Command::new(exe);
    cmd.args(["mock", "--listen", "127.0.0.1:0"])
        .args(["--ttft-ms", &delay_ms.to_string(), "--itl-ms", "0"])
        .args(["--output-tokens", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    pin_set(&mut cmd, cores);
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
    Ok(Mock {
        child,
        url,
        ca: None,
        http: reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("a client for the mock's routes")?,
    })
}

/// A CA and the certificate it signed for the mock (`localhost`,
/// 127.0.0.1), written as PEM files.
struct Pki {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Pki {
    fn write(dir: &Path) -> anyhow::Result<Pki> {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
        params
            .subject_alt_names
            .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
        let cert = params.signed_by(&key, &ca)?;
        let out = Pki {
            ca: dir.join("mock-ca.pem"),
            cert: dir.join("mock-cert.pem"),
            key: dir.join("mock-key.pem"),
        };
        for (path, pem) in [
            (&out.ca, ca.pem()),
            (&out.cert, cert.pem()),
            (&out.key, key.serialize_pem()),
        ] {
            std::fs::write(path, pem).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(out)
    }
}

/// The mock's ground truth (`/mock/stats`).
pub(super) async fn mock_stats(mock: &Mock) -> anyhow::Result<serde_json::Value> {
    mock.http
        .get(format!("{}/mock/stats", mock.url))
        .send()
        .await
        .context("asking the mock for its stats")?
        .json()
        .await
        .context("reading the mock's stats")
}

/// One request as the mock logged it; only its arrival matters here.
#[derive(serde::Deserialize)]
struct Arrival {
    unix_us: u64,
}

/// How long after `start_unix_us` the first `n` requests had all reached the
/// mock, ms (`None` below two requests): the time a burst of `n` starts
/// needs to get onto the wire, seen from the server, the same for any client.
pub(super) async fn first_wave_ms(
    http: &reqwest::Client,
    url: &str,
    n: u32,
    start_unix_us: f64,
) -> anyhow::Result<Option<f64>> {
    let mut log: Vec<Arrival> = http
        .get(format!("{url}/mock/requests"))
        .send()
        .await
        .context("asking the mock for its request log")?
        .json()
        .await
        .context("reading the mock's request log")?;
    log.sort_unstable_by_key(|r| r.unix_us);
    let n = n as usize;
    if n < 2 || log.len() < n || start_unix_us <= 0.0 {
        return Ok(None);
    }
    Ok(Some((log[n - 1].unix_us as f64 - start_unix_us) / 1e3))
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

/// A process's user + system CPU time, µs, from its rusage at exit; with its stdout.
#[allow(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also gives its rusage"
)]
pub(super) fn run_timed(
    mut cmd: Command,
    cores: &[usize],
    what: &str,
) -> anyhow::Result<(Vec<u8>, f64)> {
    use std::io::Read;
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    pin_set(&mut cmd, cores);
    let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let (mut out, mut err) = (
        child.stdout.take().context("a child's stdout")?,
        child.stderr.take().context("a child's stderr")?,
    );
    let errs = std::thread::spawn(move || {
        let _ = err.read_to_end(&mut stderr);
        stderr
    });
    out.read_to_end(&mut stdout)
        .with_context(|| format!("reading {what}"))?;
    let stderr = errs.join().unwrap_or_default();
    let end = cicada_sys::process::wait_child(child.id())
        .with_context(|| format!("waiting for {what}"))?;
    if !end.succeeded {
        bail!("{what} failed: {}", String::from_utf8_lossy(&stderr).trim());
    }
    Ok((stdout, end.cpu_us))
}

/// The machine's 1-minute load average (other work on it skews the figures).
pub(super) fn load_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::super::floor::unix_now_us;
    use super::*;

    #[tokio::test]
    async fn the_first_wave_ends_at_its_last_arrival() {
        cicada_client::tls::install_crypto_provider();
        let mock = cicada_mock::MockServer::start(
            cicada_mock::MockConfig {
                ttft_ms: 0.0,
                itl_ms: 0.0,
                ..cicada_mock::MockConfig::default()
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let url = mock.url();
        let client = reqwest::Client::new();
        let send = || {
            client
                .post(format!("{url}/v1/completions"))
                .json(&serde_json::json!({"model": "m", "prompt": "a b", "max_tokens": 1}))
                .send()
        };
        let start = unix_now_us();
        send().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(40)).await;
        send().await.unwrap();
        send().await.unwrap();
        let wave = |n| first_wave_ms(&client, &url, n, start);
        let two = wave(2).await.unwrap().unwrap();
        let three = wave(3).await.unwrap().unwrap();
        assert!(two >= 40.0 && three >= two, "{two} {three}");
        assert!(three < 40.0 + 1_000.0, "{three}");
        assert_eq!(wave(4).await.unwrap(), None);
        assert_eq!(wave(1).await.unwrap(), None);
    }
}
