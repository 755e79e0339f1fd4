//! Headless Chromium for page tests. CI starts from a clean machine, so the
//! first use installs Debian's `chromium` package when `/usr/bin/chromium`
//! is missing (apt-get, as root or through passwordless sudo) and fails
//! loudly, saying why, when that is impossible. Nothing here reaches beyond
//! loopback once installed: the flags switch off Chromium's own networking.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::wait_with_limit;

pub mod devtools;

/// Where Debian's package puts the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Longest one browser invocation may take.
const BROWSER_LIMIT: Duration = Duration::from_secs(90);

/// Longest the package installation may take.
const INSTALL_LIMIT: Duration = Duration::from_secs(900);

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `apt-get ARGS` as root (directly, or with `sudo -n`); returns (success, output).
fn apt_get(args: &[&str]) -> (bool, String) {
    let mut cmd = if is_root() {
        Command::new("apt-get")
    } else {
        let mut c = Command::new("sudo");
        c.args(["-n", "apt-get"]);
        c
    };
    cmd.args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return (false, format!("cannot start apt-get: {e}")),
    };
    let run = wait_with_limit(child, INSTALL_LIMIT);
    (
        run.code == Some(0),
        format!("{}\n{}", run.stdout, run.stderr),
    )
}

/// The Chromium binary, installed on first use when missing.
pub fn chromium() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = PathBuf::from(CHROMIUM);
        if path.exists() {
            return path;
        }
        eprintln!("{CHROMIUM} is missing: installing Debian's chromium package (apt-get)");
        let (mut ok, mut log) = apt_get(&["install", "-y", "chromium"]);
        if !ok {
            // a clean machine may not have the package lists yet
            let (updated, update_log) = apt_get(&["update"]);
            log.push_str(&update_log);
            if updated {
                let (again, again_log) = apt_get(&["install", "-y", "chromium"]);
                ok = again;
                log.push_str(&again_log);
            }
        }
        assert!(
            ok && path.exists(),
            "the HTML report test needs headless Chromium and could not install it \
             (`apt-get install -y chromium` as root or via passwordless sudo failed); \
             install Debian's chromium package and rerun.\napt-get said:\n{log}"
        );
        path
    })
    .clone()
}

/// A browser invocation with the flags that keep headless Chromium quiet
/// and offline (no sync, updates, QUIC or background fetches).
fn browser(profile: &Path) -> Command {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

fn file_url(page: &Path) -> String {
    let abs = std::fs::canonicalize(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    format!("file://{}", abs.display())
}

/// Load `page` and return the DOM after its scripts ran (`--dump-dom`).
pub fn dump_dom(page: &Path) -> String {
    dump_url(&file_url(page)).0
}

/// Load `url` (a page served over loopback) and return the DOM after its
/// scripts ran for `budget_ms` of virtual time, and the browser's stderr,
/// which holds the page's console messages (`--enable-logging=stderr`).
pub fn dump_url_for(url: &str, budget_ms: u32) -> (String, String) {
    let profile = crate::scratch();
    let child = browser(profile.path())
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg(url)
        .spawn()
        .expect("starting chromium");
    let run = wait_with_limit(child, BROWSER_LIMIT);
    assert_eq!(
        run.code,
        Some(0),
        "chromium --dump-dom failed\nstderr:\n{}",
        run.stderr
    );
    (run.stdout, run.stderr)
}

fn dump_url(url: &str) -> (String, String) {
    dump_url_for(url, 5000)
}

/// Every console message of the page in a browser's stderr (`CONSOLE`
/// lines, whatever their level, and uncaught errors): a page that logs
/// nothing on purpose has none.
pub fn console_messages(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .map(str::to_string)
        .collect()
}

/// Load `url` in a `width` x `height` window and save a PNG screenshot to `out`.
pub fn screenshot_url(url: &str, out: &Path, width: u32, height: u32) {
    let profile = crate::scratch();
    let child = browser(profile.path())
        .arg(format!("--screenshot={}", out.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("--virtual-time-budget=4000")
        .arg(url)
        .spawn()
        .expect("starting chromium");
    let run = wait_with_limit(child, BROWSER_LIMIT);
    assert!(
        run.code == Some(0) && out.exists(),
        "chromium --screenshot failed (exit {:?})\nstderr:\n{}",
        run.code,
        run.stderr
    );
}

/// Load `page` in a `width` x `height` window and save a PNG screenshot to `out`.
pub fn screenshot(page: &Path, out: &Path, width: u32, height: u32) {
    let profile = crate::scratch();
    let child = browser(profile.path())
        .arg(format!("--screenshot={}", out.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("--virtual-time-budget=5000")
        .arg(file_url(page))
        .spawn()
        .expect("starting chromium");
    let run = wait_with_limit(child, BROWSER_LIMIT);
    assert!(
        run.code == Some(0) && out.exists(),
        "chromium --screenshot failed (exit {:?})\nstderr:\n{}",
        run.code,
        run.stderr
    );
}

/// Pixels of a screenshot within 24 of `rgb` in every channel: how a page
/// test tells that a chart's coloured ink was drawn.
pub fn pixels_like(img: &[u8], channels: usize, rgb: (u8, u8, u8)) -> usize {
    img.chunks(channels)
        .filter(|p| {
            (p[0] as i32 - rgb.0 as i32).abs() < 24
                && (p[1] as i32 - rgb.1 as i32).abs() < 24
                && (p[2] as i32 - rgb.2 as i32).abs() < 24
        })
        .count()
}
