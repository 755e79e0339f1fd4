//! `--fail-if`: a threshold on one figure that turns a comparison into a CI
//! gate. `p99_ttft_ms > +10%` fails when B's p99 TTFT is more than 10 %
//! above A's; `request_throughput < -5%` when B's throughput fell by more
//! than 5 %; `p99_ttft_ms > +5ms` on the change in the figure's own unit;
//! `p99_ttft_ms > 250ms` (no sign, no %) on B's own value.

use super::figures::{Figure, by_name};

/// A `--fail-if` expression that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "--fail-if \"{expr}\": {reason} (expected FIGURE OP VALUE, e.g. \"p99_ttft_ms > +10%\", \"request_throughput < -5%\", \"mean_tpot_ms > +2ms\", \"p99_e2el_ms >= 900ms\")"
)]
pub struct GateError {
    expr: String,
    reason: String,
}

/// How a threshold compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    fn holds(self, x: f64, limit: f64) -> bool {
        match self {
            Op::Gt => x > limit,
            Op::Ge => x >= limit,
            Op::Lt => x < limit,
            Op::Le => x <= limit,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }
}

/// What the threshold is set on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// The change B − A relative to A, a fraction (`+10%` is 0.1).
    Relative(f64),
    /// The change B − A in the figure's unit (`+5ms`).
    Change(f64),
    /// B's own value (`250ms`).
    Value(f64),
}

/// One `--fail-if` threshold.
#[derive(Debug, Clone)]
pub struct Gate {
    /// The expression as given.
    pub expr: String,
    pub figure: &'static Figure,
    pub op: Op,
    pub limit: Limit,
}

impl std::str::FromStr for Gate {
    type Err = GateError;

    fn from_str(expr: &str) -> Result<Self, GateError> {
        let err = |reason: String| GateError {
            expr: expr.to_string(),
            reason,
        };
        let at = expr
            .find(['<', '>'])
            .ok_or_else(|| err("no comparison (>, >=, < or <=)".into()))?;
        let (name, rest) = expr.split_at(at);
        let (op, value) = if let Some(v) = rest.strip_prefix(">=") {
            (Op::Ge, v)
        } else if let Some(v) = rest.strip_prefix("<=") {
            (Op::Le, v)
        } else if let Some(v) = rest.strip_prefix('>') {
            (Op::Gt, v)
        } else {
            (Op::Lt, &rest[1..])
        };
        let name = name.trim();
        let figure = by_name(name).ok_or_else(|| {
            let names: Vec<&str> = super::figures::FIGURES.iter().map(|f| f.name).collect();
            err(format!(
                "unknown figure \"{name}\"; one of {}",
                names.join(", ")
            ))
        })?;
        let limit = parse_limit(value.trim(), figure).map_err(|e| err(e.to_string()))?;
        Ok(Gate {
            expr: expr.to_string(),
            figure,
            op,
            limit,
        })
    }
}

/// Why a threshold's value cannot be read (the reason a [`GateError`] gives).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum LimitError {
    #[error("no value after the comparison")]
    Empty,
    #[error("\"{value}\" is not a number, a percentage or a number of {unit}")]
    NotNumber { value: String, unit: &'static str },
    #[error("\"{0}\" is not finite")]
    NotFinite(String),
}

/// `+10%`, `-5%`, `+5ms`, `250ms`, `+2`, `12.5req/s`.
fn parse_limit(v: &str, figure: &Figure) -> Result<Limit, LimitError> {
    if v.is_empty() {
        return Err(LimitError::Empty);
    }
    let signed = v.starts_with(['+', '-']);
    let (number, relative) = match v.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (v.strip_suffix(figure.unit).unwrap_or(v).trim(), false),
    };
    let x: f64 = number.parse().map_err(|_| LimitError::NotNumber {
        value: v.to_string(),
        unit: figure.unit,
    })?;
    if !x.is_finite() {
        return Err(LimitError::NotFinite(v.to_string()));
    }
    Ok(match (relative, signed) {
        (true, _) => Limit::Relative(x / 100.0),
        (false, true) => Limit::Change(x),
        (false, false) => Limit::Value(x),
    })
}

/// A gate's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub expr: String,
    /// Whether the threshold was crossed (the gate fails).
    pub failed: bool,
    /// What was measured against the limit, in words.
    pub detail: String,
}

impl Gate {
    /// Judge the gate on A's and B's figure (point estimates); `None` when
    /// a side lacks the figure (the gate then fails: it cannot pass unseen).
    pub fn judge(&self, a: Option<f64>, b: Option<f64>) -> Verdict {
        let unit = self.figure.unit;
        let (failed, detail) = match (a, b, self.limit) {
            (_, Some(b), Limit::Value(l)) => (
                self.op.holds(b, l),
                format!("B = {b:.4} {unit} (limit {} {l} {unit})", self.op.symbol()),
            ),
            (Some(a), Some(b), Limit::Change(l)) => (
                self.op.holds(b - a, l),
                format!(
                    "B − A = {:+.4} {unit} (limit {} {l:+} {unit})",
                    b - a,
                    self.op.symbol()
                ),
            ),
            (Some(a), Some(b), Limit::Relative(l)) if a != 0.0 => {
                let change = (b - a) / a;
                (
                    self.op.holds(change, l),
                    format!(
                        "B vs A {:+.2}% (limit {} {:+}%)",
                        change * 100.0,
                        self.op.symbol(),
                        l * 100.0
                    ),
                )
            }
            (Some(_), Some(_), Limit::Relative(_)) => {
                (true, "A is 0: no relative change".to_string())
            }
            _ => (true, "a side has no such figure".to_string()),
        };
        Verdict {
            expr: self.expr.clone(),
            failed,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(s: &str) -> Gate {
        s.parse().unwrap()
    }

    #[test]
    fn thresholds_read_and_judge() {
        let g = gate("p99_ttft_ms > +10%");
        assert_eq!((g.op, g.limit), (Op::Gt, Limit::Relative(0.1)));
        assert!(g.judge(Some(100.0), Some(111.0)).failed);
        assert!(!g.judge(Some(100.0), Some(109.0)).failed);
        let g = gate("request_throughput<-5%");
        assert!(g.judge(Some(100.0), Some(94.0)).failed);
        assert!(!g.judge(Some(100.0), Some(96.0)).failed);
        let g = gate(" mean_tpot_ms >= +2ms ");
        assert_eq!(g.limit, Limit::Change(2.0));
        assert!(g.judge(Some(10.0), Some(12.0)).failed);
        let g = gate("p99_e2el_ms > 250ms");
        assert_eq!(g.limit, Limit::Value(250.0));
        assert!(g.judge(Some(900.0), Some(251.0)).failed);
        assert!(!g.judge(None, Some(249.0)).failed);
        assert!(
            gate("output_throughput <= -3 tok/s")
                .judge(Some(10.0), Some(7.0))
                .failed
        );
        assert!(gate("mean_ttft_ms > +1").judge(None, Some(7.0)).failed);
    }

    #[test]
    fn malformed_thresholds_say_what_is_wrong() {
        for (bad, says) in [
            ("p99_ttft_ms +10%", "no comparison"),
            ("p98_ttft_ms > +10%", "unknown figure \"p98_ttft_ms\""),
            ("p99_ttft_ms >", "no value"),
            ("p99_ttft_ms > ten%", "not a number"),
            (
                "p99_ttft_ms > +5s",
                "not a number, a percentage or a number of ms",
            ),
        ] {
            let e = bad.parse::<Gate>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains("expected FIGURE OP VALUE"), "{e}");
        }
    }
}
