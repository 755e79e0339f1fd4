//! A `cicada run --web` fleet as the web tests drive it: started with its
//! page on a free loopback port, stopped from the page as a user stops it,
//! and the stages its summary names.

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
