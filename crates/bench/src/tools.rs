//! oha and wrk, the general HTTP load generators `--http-rate` puts cicada
//! beside: where `scripts/load-tools.sh` installed them, how each is run on
//! the client's core, and what it measured.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::procs::run_timed;

/// The wrk package version `scripts/load-tools.sh` installs (Debian's).
pub(super) const WRK_VERSION: &str = "4.1.0-3+b2";
/// The oha version `scripts/load-tools.sh` builds (crates.io).
pub(super) const OHA_VERSION: &str = "1.16.0";

/// Where the load tools are.
#[derive(Debug, Clone)]
pub(super) struct LoadTools {
    pub oha: PathBuf,
    pub wrk: PathBuf,
}

impl LoadTools {
    /// The directory `scripts/load-tools.sh` installs this version pair into.
    pub fn default_dir() -> Option<PathBuf> {
        let root = std::env::var_os("CICADA_CACHE")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("cicada")))
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/cicada")))?;
        Some(
            root.join("load-tools")
                .join(format!("wrk-{WRK_VERSION}-oha-{OHA_VERSION}")),
        )
    }

    /// The tools installed in `dir`, or an error that says how to install them.
    pub fn find(dir: &Path) -> anyhow::Result<LoadTools> {
        let tools = LoadTools {
            oha: dir.join("bin/oha"),
            wrk: dir.join("bin/wrk"),
        };
        if !dir.join("READY").is_file() || !tools.oha.is_file() || !tools.wrk.exists() {
            bail!(
                "oha and wrk are not installed in {}: run scripts/load-tools.sh (or pass --no-load-tools to measure cicada alone; the output then says so)",
                dir.display()
            );
        }
        Ok(tools)
    }
}

/// What oha measured at a fixed rate.
pub(super) struct OhaFigures {
    pub rps: f64,
    pub mean_latency_ms: f64,
    pub cpu_us: f64,
}

/// oha at `rate` req/s for `seconds` with `connections` workers against
/// `url`, POSTing `body`, pinned to `core`.
pub(super) async fn oha(
    tools: &LoadTools,
    url: &str,
    body: &str,
    rate: u32,
    connections: u32,
    seconds: u64,
    core: usize,
) -> anyhow::Result<OhaFigures> {
    let mut cmd = Command::new(&tools.oha);
    cmd.args(["--no-tui", "--output-format", "json"])
        .args(["-z", &format!("{seconds}s")])
        .args(["-q", &rate.to_string()])
        .args(["-c", &connections.to_string()])
        .args(["-m", "POST", "-H", "content-type: application/json"])
        .args(["-d", body])
        .arg(url);
    let what = format!("oha at {rate} req/s");
    let (out, cpu_us) = tokio::task::spawn_blocking(move || run_timed(cmd, &[core], &what))
        .await
        .context("waiting for oha")??;
    let v: serde_json::Value = serde_json::from_slice(&out).context("reading oha's JSON")?;
    let field = |p: &str| {
        v.pointer(p)
            .and_then(serde_json::Value::as_f64)
            .with_context(|| format!("oha's JSON has no {p}"))
    };
    let ok = field("/summary/successRate")?;
    if ok < 1.0 {
        bail!("oha saw failures (success rate {ok}) at {rate} req/s");
    }
    Ok(OhaFigures {
        rps: field("/summary/requestsPerSec")?,
        mean_latency_ms: field("/summary/average")? * 1e3,
        cpu_us,
    })
}

/// What wrk measured in a closed loop.
pub(super) struct WrkFigures {
    pub rps: f64,
    pub cpu_us: f64,
}

/// wrk with one thread and `connections` connections for `seconds` against
/// `url`, POSTing `body`, pinned to `core`.
pub(super) async fn wrk(
    tools: &LoadTools,
    url: &str,
    body: &str,
    connections: u32,
    seconds: u64,
    core: usize,
) -> anyhow::Result<WrkFigures> {
    let script = std::env::temp_dir().join(format!("cicada-wrk-{}.lua", std::process::id()));
    let lua = format!(
        "wrk.method = \"POST\"\nwrk.body = {}\nwrk.headers[\"Content-Type\"] = \"application/json\"\n",
        lua_string(body)
    );
    std::fs::write(&script, lua).with_context(|| format!("writing {}", script.display()))?;
    let mut cmd = Command::new(&tools.wrk);
    cmd.args(["-t1", &format!("-c{connections}"), &format!("-d{seconds}s")])
        .arg("-s")
        .arg(&script)
        .arg(url);
    let what = format!("wrk with {connections} connections");
    let run = tokio::task::spawn_blocking(move || run_timed(cmd, &[core], &what))
        .await
        .context("waiting for wrk");
    let _ = std::fs::remove_file(&script);
    let (out, cpu_us) = run??;
    let text = String::from_utf8_lossy(&out);
    if let Some(line) = text
        .lines()
        .find(|l| l.contains("Non-2xx or 3xx responses"))
    {
        bail!("wrk saw failures: {}", line.trim());
    }
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .with_context(|| format!("wrk printed no Requests/sec: {text}"))?;
    Ok(WrkFigures { rps, cpu_us })
}

/// `s` as a Lua string literal.
fn lua_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lua_strings_escape_quotes_and_backslashes() {
        assert_eq!(lua_string(r#"{"a":"b\c"}"#), r#""{\"a\":\"b\\c\"}""#);
    }

    #[test]
    fn missing_tools_name_the_install_script() {
        let dir = std::env::temp_dir().join("cicada-no-load-tools-here");
        let e = LoadTools::find(&dir).unwrap_err().to_string();
        assert!(e.contains("scripts/load-tools.sh"), "{e}");
        assert!(e.contains("--no-load-tools"), "{e}");
    }
}
