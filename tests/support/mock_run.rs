//! Small runs against the embedded mock, as the results tests make them
//! (`results`, `results_live`): a scenario text and `cicada run` of it.

use std::path::Path;
use std::time::Duration;

use crate::{Run, coord_run, write};

/// How long one such run may take before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(180);

/// A scenario against the embedded mock; `body` adds sections.
pub fn scenario(name: &str, seed: u64, body: &str) -> String {
    format!(
        r#"
name = "{name}"
seed = {seed}
[target]
backend = "mock"
[mock]
ttft_ms = 20
itl_ms = 2
[dataset]
kind = "random"
input_len = 16
output_len = 8
{body}
"#
    )
}

/// `cicada run` of a scenario text into `out`; extra flags appended.
pub fn run_in(dir: &Path, file: &str, text: &str, out: &Path, extra: &[&str]) -> Run {
    let sc = write(dir, file, text);
    let mut args = vec![
        "run",
        sc.to_str().unwrap(),
        "--workers",
        "2",
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    coord_run(&args, LIMIT)
}
