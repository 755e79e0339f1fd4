//! Building the request pool off the async runtime, with a progress bar on
//! stderr (drawn only when stderr is a terminal) and the dataset's report.

use std::sync::Mutex;

use cicada_scenarios::Scenario;
use cicada_scenarios::dataset::{Pool, Progress, Silent, build_pool_with};
use cicada_scenarios::tokenizer::Tokenizer;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::RunError;

/// An indicatif bar per phase of the build.
struct Bar {
    current: Mutex<Option<ProgressBar>>,
}

impl Bar {
    fn with<R>(&self, f: impl FnOnce(&mut Option<ProgressBar>) -> R) -> R {
        let mut guard = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }
}

impl Progress for Bar {
    fn start(&self, what: &str, total: u64, unit: &str) {
        // a wide bar takes what the terminal has left, so the line never wraps
        let template = if unit == "bytes" {
            "{msg} [{wide_bar}] {binary_bytes}/{binary_total_bytes} {eta}"
        } else {
            "{msg} [{wide_bar}] {pos}/{len} {prefix} {eta}"
        };
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        bar.set_prefix(unit.to_string());
        self.with(|cur| {
            if let Some(old) = cur.replace(bar) {
                old.finish_and_clear();
            }
        });
    }

    fn advance(&self, n: u64) {
        self.with(|cur| {
            if let Some(b) = cur {
                b.inc(n);
            }
        });
    }

    fn finish(&self) {
        self.with(|cur| {
            if let Some(b) = cur.take() {
                b.finish_and_clear();
            }
        });
    }
}

/// Build the pool on a blocking thread (tokenising uses every core), showing
/// progress unless `quiet`, then print the dataset's report to stderr.
pub async fn build(
    scenario: &Scenario,
    tokenizer: Option<&Tokenizer>,
    quiet: bool,
) -> Result<Pool, RunError> {
    let (s, t) = (scenario.clone(), tokenizer.cloned());
    let pool = tokio::task::spawn_blocking(move || {
        let bar = Bar {
            current: Mutex::new(None),
        };
        let progress: &dyn Progress = if quiet { &Silent } else { &bar };
        let pool = build_pool_with(&s, t.as_ref(), progress);
        progress.finish();
        pool
    })
    .await
    .map_err(RunError::Pool)?
    .map_err(|e| RunError::BadInput(e.to_string()))?;
    eprintln!("dataset: {}", pool.report);
    if pool.report.inexact > 0 {
        eprintln!(
            "warning: {} prompts could not be fitted to their exact token length (their real length is used)",
            pool.report.inexact
        );
    }
    Ok(pool)
}
