//! Runs against one target as the backend tests make them (`backends`,
//! `target_access`): a scenario of 24 random prompts at once, six at a time,
//! and `cicada run` of it.

use std::path::Path;
use std::time::Duration;

use crate::{Run, coord_run_env, read_json, write};

/// How long one such run may take before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(120);

/// A scenario with `target` as its `[target]` section; `body` adds sections.
pub fn scenario(target: &str, body: &str) -> String {
    format!(
        r#"
name = "backends"
seed = 5
[target]
{target}
[dataset]
kind = "random"
input_len = 12
output_len = 8
[load]
num_prompts = 24
request_rate = "inf"
max_concurrency = 6
{body}
"#
    )
}

/// Run `cicada run` on a scenario text; returns the run and result.json.
pub fn run_text(
    dir: &Path,
    text: &str,
    workers: &str,
    env: &[(&str, &str)],
) -> (Run, serde_json::Value) {
    let sc = write(dir, "s.toml", text);
    let out = dir.join("out");
    let r = coord_run_env(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            workers,
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        env,
        LIMIT,
    );
    let j = if out.join("result.json").exists() {
        read_json(&out.join("result.json"))
    } else {
        serde_json::Value::Null
    };
    (r, j)
}
