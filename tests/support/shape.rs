//! The shape of what a run writes, with every measured value masked: the
//! keys of `result.json` in order, which values are numbers, strings, nulls or
//! booleans, the console's labels, `summary.csv`'s columns and which cells are
//! filled. Two runs of the same scenario have the same shape whatever the
//! machine measured, so a refactor that changes none of it changes no output.

use std::path::Path;

use serde_json::{Map, Value};

/// Strings longer than this are payloads (histograms, prompts), not labels.
const LONG_TEXT: usize = 160;

/// Keys whose values are the client's verdict on its own health, or how a
/// worker placed its start instant (its clock offset was within its
/// uncertainty of zero, or not): they follow how busy the machine was, not
/// what the code does.
const MACHINE_VERDICTS: [&str; 3] = ["client_bound", "reasons", "start_basis"];

/// The key (and `summary.csv` column) of the scenario's hash: 12 hex
/// characters that depend on the checkout's path, so CI's may draw only
/// digits; always `<hex>`.
const SCENARIO_HASH: &str = "scenario_hash";

/// Replace every run of ASCII digits (with an optional fraction) by `#`, and
/// every hexadecimal word of 6 or more characters mixing digits and letters
/// (hashes, ids) by `<hex>`.
pub fn mask_digits(s: &str) -> String {
    let mut words = String::with_capacity(s.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let hex = word.len() >= 6
            && word.chars().all(|c| c.is_ascii_hexdigit())
            && word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(|c| c.is_ascii_alphabetic());
        out.push_str(if hex { "<hex>" } else { word });
        word.clear();
    };
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut words);
            words.push(c);
        }
    }
    flush(&mut word, &mut words);
    let s = words;
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|n| n.is_ascii_digit() || *n == '.')
            {
                chars.next();
            }
            out.push('#');
        } else {
            out.push(c);
        }
    }
    out
}

/// Paths that depend on where the run happened: the output directory and
/// the checkout (CI clones elsewhere than a developer does).
fn mask_paths(s: &str, dir: &str) -> String {
    let repo = crate::repo_root();
    s.replace(dir, "<dir>")
        .replace(repo.to_string_lossy().as_ref(), "<repo>")
}

/// A serialised payload (histograms): long, and only base64's alphabet.
fn is_base64(s: &str) -> bool {
    s.len() >= 24
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

/// The shape of a JSON value: numbers become `"<number>"`, strings keep their
/// text with digits masked (long ones become `"<text>"`), arrays keep each
/// distinct element shape once, in first-seen order.
pub fn json_shape(v: &Value, dir: &str) -> Value {
    match v {
        Value::Number(_) => Value::String("<number>".into()),
        // payloads first: a histogram's encoding is longer or shorter than
        // LONG_TEXT depending on what was measured
        Value::String(s) if is_base64(s) => Value::String("<base64>".into()),
        Value::String(s) if s.len() > LONG_TEXT => Value::String("<text>".into()),
        Value::String(s) => Value::String(mask_digits(&mask_paths(s, dir))),
        Value::Array(items) => {
            let mut seen: Vec<Value> = Vec::new();
            for item in items {
                let shape = json_shape(item, dir);
                if !seen.contains(&shape) {
                    seen.push(shape);
                }
            }
            Value::Array(seen)
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let shape = if MACHINE_VERDICTS.contains(&k.as_str()) {
                        Value::String("<verdict>".into())
                    } else if k == SCENARIO_HASH && v.is_string() {
                        Value::String("<hex>".into())
                    } else {
                        json_shape(v, dir)
                    };
                    (mask_digits(k), shape)
                })
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

/// Console text with numbers masked and runs of spaces collapsed (padding
/// follows the width of the numbers); the client's `CLIENT-BOUND` verdict and
/// the `clock: worker ...` line (printed when a worker's clock was uncertain),
/// which follow how busy the machine was, are left out.
pub fn console_shape(text: &str, dir: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("CLIENT-BOUND") && !l.starts_with("clock: worker"))
        .map(|l| {
            // a server bucket prints as "< 300", "300-500" or "> 7680":
            // which form depends on what was measured
            let masked = mask_digits(&mask_paths(l, dir))
                .replace("< #", "#-#")
                .replace("> #", "#-#");
            masked.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A CSV file's header, then each row with filled cells as `#`-masked text
/// and empty cells empty.
pub fn csv_shape(path: &Path, dir: &str) -> String {
    let (header, rows) = crate::read_csv(path);
    let hash = header.iter().position(|h| h == SCENARIO_HASH);
    let mut out = header.join(",");
    for row in rows {
        out.push('\n');
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| match hash {
                Some(h) if h == i && !c.is_empty() => "<hex>".to_string(),
                _ => mask_digits(&mask_paths(c, dir)),
            })
            .collect();
        out.push_str(&cells.join(","));
    }
    out
}

/// `timeseries.csv`'s header and the distinct (metric, unit, stat) it holds, sorted.
pub fn timeseries_shape(path: &Path) -> String {
    let (header, rows) = crate::read_csv(path);
    let col = |name: &str| header.iter().position(|h| h == name);
    let (Some(m), Some(u), Some(s)) = (col("metric"), col("unit"), col("stat")) else {
        return header.join(",");
    };
    let mut kinds: Vec<String> = rows
        .iter()
        .map(|r| format!("{},{},{}", r[m], r[u], r[s]))
        .collect();
    kinds.sort();
    kinds.dedup();
    format!("{}\n{}", header.join(","), kinds.join("\n"))
}

/// Compare `actual` with the golden file at `path`; with `CICADA_BLESS=1`
/// write it instead. Returns a description of the difference, if any.
pub fn check_golden(path: &Path, actual: &str) -> Option<String> {
    if std::env::var_os("CICADA_BLESS").is_some() {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("creating the golden directory");
        }
        std::fs::write(path, actual).expect("writing a golden file");
        return None;
    }
    let expected = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            return Some(format!(
                "{}: {e} (run with CICADA_BLESS=1 to write it)",
                path.display()
            ));
        }
    };
    if expected == actual {
        return None;
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let first = e
        .iter()
        .zip(&a)
        .position(|(x, y)| x != y)
        .unwrap_or(e.len().min(a.len()));
    let around = |lines: &[&str]| {
        lines
            .iter()
            .skip(first.saturating_sub(3))
            .take(8)
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Some(format!(
        "{} differs from line {}:\n  expected:\n{}\n  actual:\n{}\n(if the change is meant, rerun with CICADA_BLESS=1 and commit the golden file)",
        path.display(),
        first + 1,
        around(&e),
        around(&a)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_and_numbers_are_masked() {
        assert_eq!(mask_digits("P99 TTFT (ms): 12.50"), "P# TTFT (ms): #");
        assert_eq!(mask_digits("worker-12 at 1.2.3"), "worker-# at #");
        assert_eq!(
            mask_digits("hash 9f3a0c1e2b, deadbeef"),
            "hash <hex>, deadbeef"
        );
        assert_eq!(mask_digits("20261124-023012"), "#-#");
        assert!(is_base64("HISTFAAAAFF4nC3KzQ4AQBSEx/dWZCPi"));
        assert!(!is_base64("http://127.0.0.1:8000/v1/completions"));
        let long = "A".repeat(LONG_TEXT + 1);
        assert_eq!(json_shape(&Value::String(long), "/tmp/x"), "<base64>");
        let prose = "a b ".repeat(LONG_TEXT);
        assert_eq!(json_shape(&Value::String(prose), "/tmp/x"), "<text>");
        // a scenario hash is <hex> even when it drew only digits (CI's checkout path)
        assert_eq!(
            json_shape(
                &serde_json::json!({"scenario_hash": "301462908517"}),
                "/tmp/x"
            ),
            serde_json::json!({"scenario_hash": "<hex>"})
        );
        let v = serde_json::json!({"a": 1.5, "b": "x1", "c": [1, 2], "d": null, "e": [{"k": 1}, {"k": 2}]});
        assert_eq!(
            json_shape(&v, "/tmp/x"),
            serde_json::json!({"a": "<number>", "b": "x#", "c": ["<number>"], "d": null, "e": [{"k": "<number>"}]})
        );
    }
}
