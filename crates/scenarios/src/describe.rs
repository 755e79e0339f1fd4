//! Turning what the TOML parser and serde say into errors a person can act
//! on: located at a line, naming the dotted key, in TOML's words rather than
//! Rust's (`a table`, not `struct Load`; `a whole number`, not `u32`).

use crate::error::ScenarioError;
use crate::source::{SourceMap, floor_boundary, key_near, line_col};

/// Sections of a scenario that must be tables, with the keys inside them that must be too.
const SECTIONS: [(&str, &[&str]); 9] = [
    ("target", &["headers"]),
    ("tokenizer", &[]),
    ("dataset", &[]),
    ("load", &[]),
    ("sampling", &["extra_body"]),
    ("slo", &[]),
    ("mock", &["faults"]),
    ("output", &[]),
    ("hooks", &[]),
];

/// Sections written as arrays of tables (`[[stages]]`).
const ARRAYS_OF_TABLES: [&str; 1] = ["stages"];

/// A TOML syntax error, located at the parser's line and column and naming the
/// key being parsed there when it can be told.
pub(crate) fn syntax_error(origin: &str, text: &str, e: &toml::de::Error) -> ScenarioError {
    let offset = floor_boundary(text, e.span().map_or(0, |s| s.start));
    let (line, column) = line_col(text, offset);
    let key = SourceMap::new(text)
        .ok()
        .and_then(|m| m.key_at(offset).map(str::to_string))
        .or_else(|| key_near(text, offset));
    let message = if value_missing_at(text, offset) {
        "missing value after `=`".to_string()
    } else {
        one_line(e.message())
    };
    ScenarioError::Syntax {
        origin: origin.to_string(),
        line,
        column,
        key: key.map(|k| printable(&k)),
        message: printable(&message),
    }
}

/// Bytes that are not UTF-8, located like a syntax error.
pub(crate) fn encoding_error(origin: &str, bytes: &[u8], e: &std::str::Utf8Error) -> ScenarioError {
    let valid = e.valid_up_to();
    // the prefix is valid UTF-8 by definition; lossy keeps this total anyway
    let text = String::from_utf8_lossy(&bytes[..valid]);
    let (line, column) = line_col(&text, valid);
    ScenarioError::Syntax {
        origin: origin.to_string(),
        line,
        column,
        key: key_near(&text, valid).map(|k| printable(&k)),
        message: format!(
            "byte 0x{:02X} is not UTF-8; save the scenario as UTF-8 text",
            bytes.get(valid).copied().unwrap_or_default()
        ),
    }
}

/// The line holding `offset` reads `key =` and nothing (or a comment) after.
fn value_missing_at(text: &str, offset: usize) -> bool {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let after = text[offset..line_end].trim();
    text[line_start..offset].trim_end().ends_with('=')
        && (after.is_empty() || after.starts_with('#'))
}

/// `s` with control characters escaped (`\n` -> `\\n`), so that text from a
/// file or the command line cannot break an error's one line.
pub(crate) fn printable(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Messages are printed on one line with the location in front.
fn one_line(message: &str) -> String {
    message
        .trim_end()
        .trim_end_matches(", expected nothing")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Sections given as something other than one table, as (key, message).
/// Checked before serde, which would describe `[[load]]` by its first field.
pub(crate) fn section_problems(table: &toml::Table) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (section, inner) in SECTIONS {
        match table.get(section) {
            None => {}
            Some(toml::Value::Table(t)) => {
                for key in inner {
                    if let Some(v) = t.get(*key)
                        && !v.is_table()
                    {
                        out.push((
                            format!("{section}.{key}"),
                            format!(
                                "must be a table (`[{section}.{key}]` or `{key} = {{ ... }}`), got {}",
                                a(v)
                            ),
                        ));
                    }
                }
            }
            Some(toml::Value::Array(items)) if items.iter().all(toml::Value::is_table) => {
                out.push((
                    section.to_string(),
                    format!("`[[{section}]]` makes an array of tables; write `[{section}]`"),
                ));
            }
            Some(v) => out.push((
                section.to_string(),
                format!("must be a table (a `[{section}]` section), got {}", a(v)),
            )),
        }
    }
    for section in ARRAYS_OF_TABLES {
        match table.get(section) {
            None => {}
            Some(toml::Value::Array(items)) if items.iter().all(toml::Value::is_table) => {}
            Some(toml::Value::Table(_)) => out.push((
                section.to_string(),
                format!(
                    "write `[[{section}]]` (one per item, an array of tables), not `[{section}]`"
                ),
            )),
            Some(v) => out.push((
                section.to_string(),
                format!(
                    "must be an array of tables (`[[{section}]]` sections), got {}",
                    a(v)
                ),
            )),
        }
    }
    out
}

/// "a string", "an integer": the TOML type of a value with its article.
fn a(v: &toml::Value) -> String {
    let t = v.type_str();
    let article = if t.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {t}")
}

/// Turn serde's message into (dotted key, message), naming unknown and
/// missing keys precisely.
pub(crate) fn describe_serde_error(
    e: &serde_path_to_error::Error<toml::de::Error>,
) -> (String, String) {
    let path = e.path().to_string();
    let mut path = if path == "." { String::new() } else { path };
    let mut message = one_line(e.inner().message());
    // sections that read their own keys (`[dataset]`) say which one: `at `key`: ...`
    while let Some((inner, rest)) = quoted_after(&message, "at `") {
        let Some(rest) = rest.strip_prefix(": ") else {
            break;
        };
        path = if path.is_empty() {
            inner.to_string()
        } else {
            format!("{path}.{inner}")
        };
        message = rest.to_string();
    }
    let child = |field: &str| {
        if path.is_empty() {
            field.to_string()
        } else if path == field || path.ends_with(&format!(".{field}")) {
            path.clone()
        } else {
            format!("{path}.{field}")
        }
    };
    if let Some((field, rest)) = quoted_after(&message, "unknown field `") {
        return (
            child(field),
            format!("unknown key; {}", rest.trim_start_matches(',').trim_start()),
        );
    }
    if let Some((field, _)) = quoted_after(&message, "missing field `") {
        return (child(field), "required in this section".to_string());
    }
    if let Some((value, rest)) = quoted_after(&message, "unknown variant `") {
        return (
            path,
            format!(
                "unknown value \"{value}\"; {}",
                rest.trim_start_matches(',').trim_start()
            ),
        );
    }
    (
        if path.is_empty() {
            "(top level)".to_string()
        } else {
            path
        },
        in_toml_words(&message),
    )
}

/// For messages `<prefix>NAME` rest`, the name and the rest.
fn quoted_after<'m>(message: &'m str, prefix: &str) -> Option<(&'m str, &'m str)> {
    let rest = message.strip_prefix(prefix)?;
    let end = rest.find('`')?;
    Some((&rest[..end], &rest[end + 1..]))
}

/// serde's "invalid type: map, expected u32" in TOML's words.
fn in_toml_words(message: &str) -> String {
    let (found, expected) = match message.rsplit_once(", expected ") {
        Some((f, e)) => (f, Some(e)),
        None => (message, None),
    };
    let found = found
        .replace("invalid type: map", "invalid type: table")
        .replace("invalid type: sequence", "invalid type: array")
        .replace("floating point `", "float `");
    let Some(expected) = expected else {
        return found;
    };
    let expected = match expected.trim() {
        "u8" | "u16" | "u64" | "usize" => "a whole number ≥ 0".to_string(),
        "u32" => "a whole number from 0 to 4294967295".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a map" => "a table".to_string(),
        "a sequence" => "an array".to_string(),
        e if e.starts_with("struct ") => "a table".to_string(),
        e => e.to_string(),
    };
    format!("{found}, expected {expected}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_types_read_as_toml_types() {
        assert_eq!(
            in_toml_words("invalid type: floating point `10.5`, expected u64"),
            "invalid type: float `10.5`, expected a whole number ≥ 0"
        );
        assert_eq!(
            in_toml_words("invalid type: sequence, expected struct Load"),
            "invalid type: array, expected a table"
        );
        assert_eq!(in_toml_words("plain words"), "plain words");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("a\nb\t\u{7}é"), "a\\nb\\t\\u{7}é");
        assert_eq!(printable("plain"), "plain");
    }

    #[test]
    fn missing_values_are_called_missing() {
        let text = "a = 1\nb =  # nothing\nc = 2";
        assert!(value_missing_at(text, text.find("  #").unwrap() + 1));
        assert!(!value_missing_at(text, 4));
    }

    #[test]
    fn every_table_of_the_model_is_a_known_section() {
        let t = toml::Table::try_from(crate::Scenario::default()).unwrap();
        for (key, value) in &t {
            if value.is_table() {
                assert!(
                    SECTIONS.iter().any(|(s, _)| s == key),
                    "add [{key}] to SECTIONS"
                );
            }
        }
    }

    #[test]
    fn sections_must_be_tables() {
        let t: toml::Table = toml::from_str("load = 5\n[[slo]]\n[mock]\nfaults = 1").unwrap();
        let keys: Vec<String> = section_problems(&t).into_iter().map(|p| p.0).collect();
        assert_eq!(keys, ["load", "slo", "mock.faults"]);
    }

    #[test]
    fn stages_must_be_an_array_of_tables() {
        for text in ["[stages]\nusers = 1", "stages = 5", "stages = [1]"] {
            let t: toml::Table = toml::from_str(text).unwrap();
            let problems = section_problems(&t);
            assert_eq!(problems.len(), 1, "{text}");
            assert_eq!(problems[0].0, "stages");
            assert!(problems[0].1.contains("[[stages]]"), "{}", problems[0].1);
        }
        let ok: toml::Table = toml::from_str("[[stages]]\nusers = 1").unwrap();
        assert!(section_problems(&ok).is_empty());
    }
}
