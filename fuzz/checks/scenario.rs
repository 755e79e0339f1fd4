//! Checks for the scenario parser, shared by the `scenario` fuzz target and
//! the workspace test that replays its corpus
//! (`crates/scenarios/tests/fuzz_corpus.rs`).
//!
//! Input layout: scenario text, then optionally a NUL byte and `--set`
//! overrides separated by NUL bytes (`text\0load.request_rate=4\0name=x`).

use cicada_scenarios::{Override, ScenarioError, parse};

/// Name the scenario goes by in errors.
const ORIGIN: &str = "fuzz.toml";

/// Every error is located: a syntax error at a line of the text, a key
/// problem at the file (with a line inside it, when there is one) or the
/// command line, an override error only when there are overrides; and it
/// prints as located lines with no blank line.
fn assert_located(e: &ScenarioError, text: &str, overrides: usize) {
    let lines = text.split('\n').count();
    match e {
        ScenarioError::Syntax {
            origin,
            line,
            column,
            ..
        } => {
            assert_eq!(origin, ORIGIN);
            assert!((1..=lines).contains(line), "line {line} of {lines}");
            assert!(*column >= 1);
        }
        ScenarioError::Invalid { problems } => {
            assert!(!problems.is_empty(), "Invalid without problems");
            for p in problems {
                assert!(!p.key.is_empty() && !p.message.is_empty(), "{p:?}");
                if p.origin == ORIGIN {
                    assert!(p.line.is_none_or(|l| (1..=lines).contains(&l)), "{p:?}");
                } else {
                    assert_eq!(p.origin, "command line (--set)");
                    assert!(overrides > 0 && p.line.is_none(), "{p:?}");
                }
            }
        }
        ScenarioError::Override { .. } => assert!(overrides > 0, "{e}"),
        other => panic!("parse cannot fail this way: {other:?}"),
    }
    let shown = e.to_string();
    for line in shown.split('\n') {
        assert!(
            line.starts_with(ORIGIN) || line.starts_with("command line (--set"),
            "unlocated line {line:?} in {shown:?}"
        );
    }
}

/// Parse arbitrary text with and without overrides: a scenario or a located
/// error, never a panic; a scenario written back as TOML parses to itself.
pub fn check(data: &[u8]) {
    let mut parts = data.split(|&b| b == 0);
    let text = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let mut overrides = Vec::new();
    for spec in parts {
        let spec = String::from_utf8_lossy(spec);
        match spec.parse::<Override>() {
            Ok(o) => overrides.push(o),
            Err(e) => assert_located(&e, "", 1),
        }
    }
    for set in [&[][..], &overrides[..]] {
        match parse(&text, ORIGIN, set) {
            Ok(scenario) => {
                let written = toml::to_string(&scenario).expect("a valid scenario serialises");
                let again = parse(&written, ORIGIN, &[])
                    .unwrap_or_else(|e| panic!("written back:\n{written}\nfails: {e}"));
                assert_eq!(again, scenario, "round trip through\n{written}");
            }
            Err(e) => assert_located(&e, &text, set.len()),
        }
    }
}
