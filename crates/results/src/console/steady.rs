//! The steady-state block: the window in which the load was at its plateau
//! and the headline figures over it, beside the whole step's above.

use super::{console_metrics, float, int, metric_lines, section};
use crate::RunResult;

/// The block, when the step's load has a plateau to find.
pub(super) fn lines(out: &mut String, r: &RunResult) {
    if let Some(sat) = &r.saturated {
        let what = if sat.stopped {
            "stopped early at"
        } else {
            "found at"
        };
        int(out, "Saturation:", format!("{what} {:.1} s", sat.at_s));
        int(out, "  reason:", &sat.reason);
    }
    if let Some(a) = &r.aborted {
        int(out, "Aborted:", format!("stopped at {:.1} s", a.at_s));
        int(out, "  reason:", a.reason());
    }
    let Some(st) = &r.steady else {
        return;
    };
    section(out, "Steady state");
    let Some(w) = &st.window else {
        int(
            out,
            "Steady-state window:",
            "none (the load never reached its plateau)",
        );
        int(out, "  rule:", st.plateau.criterion());
        return;
    };
    let percentiles = &r.scenario.output.metric_percentiles;
    let s = w.summary(r.scenario.any_slo_set(), percentiles);
    int(
        out,
        "Steady-state window (s):",
        format!(
            "{:.2} to {:.2} ({} intervals)",
            w.start_us as f64 / 1e6,
            w.end_us as f64 / 1e6,
            w.intervals
        ),
    );
    int(out, "  rule:", st.plateau.criterion());
    int(
        out,
        "Requests in the window:",
        format!("{} (ok {}, failed {})", s.sent, s.completed, s.failed),
    );
    float(out, "Request throughput (req/s):", s.request_throughput);
    if !r.pools() {
        float(out, "Output token throughput (tok/s):", s.output_throughput);
    }
    float(
        out,
        "Total token throughput (tok/s):",
        s.total_token_throughput,
    );
    for m in console_metrics(r) {
        metric_lines(out, &s, m, percentiles);
    }
}
