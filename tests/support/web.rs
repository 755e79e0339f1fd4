//! A `cicada run --web` fleet as the web tests drive it: started with its
//! page on a free loopback port, stopped from the page as a user stops it,
//! and the stages its summary names; one HTTP request as a script sends it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{Run, cicada, free_port, post_form, read_csv, wait_with_limit};

/// `cicada run sc --workers N --output-dir out --web 127.0.0.1:<free port>`
/// plus `extra`, its output piped; the child and the page's base URL.
pub fn start_web_run(sc: &Path, out: &Path, workers: &str, extra: &[&str]) -> (Child, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(cicada())
        .args(["run", &sc.to_string_lossy(), "--workers", workers])
        .args(["--output-dir", &out.to_string_lossy(), "--web", &addr])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting cicada");
    (child, format!("http://{addr}"))
}

/// `cicada web sc --workers N --output-dir out --web 127.0.0.1:<free port>`
/// plus `extra` (idle with its fleet attached until `POST /swarm`), its
/// output piped; the child and the page's base URL.
pub fn start_web_wait(sc: &Path, out: &Path, workers: &str, extra: &[&str]) -> (Child, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(cicada())
        .args(["web", &sc.to_string_lossy(), "--workers", workers])
        .args(["--output-dir", &out.to_string_lossy(), "--web", &addr])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting cicada web");
    (child, format!("http://{addr}"))
}

/// An HTTP answer as a script reads it.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// `content-type` (empty when absent).
    pub content_type: String,
    /// `content-disposition` (empty when absent).
    pub disposition: String,
    /// `allow` (empty when absent).
    pub allow: String,
    /// The body, as text.
    pub body: String,
}

impl Answer {
    /// The body as JSON (panics, saying what came, when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

/// One request: `method url` with `headers` and `body`; `None` when
/// nothing answers (yet).
pub fn request(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Option<Answer> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime");
    rt.block_on(async {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
        let mut req = reqwest::Client::new().request(method, url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.body(body.to_string()).send().await.ok()?;
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let (content_type, disposition, allow) = (
            header("content-type"),
            header("content-disposition"),
            header("allow"),
        );
        let status = resp.status().as_u16();
        Some(Answer {
            status,
            content_type,
            disposition,
            allow,
            body: resp.text().await.ok()?,
        })
    })
}

/// A child process (a `cicada run` or `cicada web` under test) killed if
/// the test fails before it ends, else it would run out its duration.
pub struct Guarded(pub Option<Child>);

impl Guarded {
    /// Wait up to `limit` for it to end (it is not killed then).
    pub fn wait(mut self, limit: Duration) -> Run {
        let child = self.0.take().expect("the child is waited for once");
        wait_with_limit(child, limit)
    }

    /// SIGINT it (a `cicada web` stays up after its run until Ctrl-C) and
    /// wait up to `limit` for it to end.
    pub fn interrupt(self, limit: Duration) -> Run {
        if let Some(child) = self.0.as_ref() {
            // SAFETY: plain FFI call on our own child, not yet reaped
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
        self.wait(limit)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `POST /stop` (the page's Stop), then wait up to `limit` for the run to
/// end as a first Ctrl-C ends it: exit 130, results written.
pub fn stop_from_page(base: &str, child: Child, limit: Duration) -> Run {
    let (code, body) = post_form(&format!("{base}/stop"), "").expect("an answer to POST /stop");
    assert_eq!(code, 200, "{body}");
    let run = wait_with_limit(child, limit);
    assert_eq!(
        run.code,
        Some(130),
        "stopped as Ctrl-C stops\n{}",
        run.stderr
    );
    run
}

/// The `stage_name` of each `summary.csv` row under `out`, in order.
pub fn stage_names(out: &Path) -> Vec<String> {
    let (header, rows) = read_csv(&out.join("summary.csv"));
    let name = header
        .iter()
        .position(|h| h == "stage_name")
        .expect("a stage_name column");
    rows.iter().map(|r| r[name].clone()).collect()
}

/// A scenario named `name` (seed `seed`) against the chat route of a
/// standalone mock at `mock_url`; `tables` are the rest of it (`[dataset]`,
/// `[load]`, ...).
pub fn mock_chat_scenario(name: &str, seed: u64, mock_url: &str, tables: &str) -> String {
    format!(
        r#"name = "{name}"
seed = {seed}
[target]
backend = "openai-chat"
base_url = "{mock_url}"
model = "cicada-mock"
{tables}"#
    )
}
