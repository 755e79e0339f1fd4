//! Mapping between byte offsets in a scenario's TOML text and dotted key paths,
//! so every error can name the file, the line and the key.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Every key of a TOML document with the spans of its key and value.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    text: String,
    entries: Vec<(String, Range<usize>, Range<usize>)>,
}

impl SourceMap {
    /// Index `text`; `Err` carries the parser's error for syntax problems.
    pub fn new(text: &str) -> Result<Self, toml::de::Error> {
        let doc = DeTable::parse(text)?;
        let mut entries = Vec::new();
        walk_table(doc.get_ref(), "", &mut entries);
        Ok(Self {
            text: text.to_string(),
            entries,
        })
    }

    /// 1-based line of the key `path`, or of its closest ancestor present in the text.
    pub fn line_of(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some((_, key, _)) = self.entries.iter().find(|(k, _, _)| k == p) {
                return Some(self.line_col(key.start).0);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }

    /// True when `path` itself is written in the text.
    pub fn contains(&self, path: &str) -> bool {
        self.entries.iter().any(|(k, _, _)| k == path)
    }

    /// The innermost key whose key or value span contains `offset`.
    pub fn key_at(&self, offset: usize) -> Option<&str> {
        self.entries
            .iter()
            .filter_map(|(p, k, v)| {
                if k.contains(&offset) {
                    Some((k.len(), p))
                } else if v.contains(&offset) {
                    Some((v.len(), p))
                } else {
                    None
                }
            })
            .min_by_key(|(size, _)| *size)
            .map(|(_, p)| p.as_str())
    }

    /// 1-based (line, column) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        line_col(&self.text, offset)
    }
}

/// The byte offset itself if it falls on a character boundary of `text`, else
/// the boundary before it (offsets from a parser may point inside a character).
pub(crate) fn floor_boundary(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while !text.is_char_boundary(o) {
        o -= 1;
    }
    o
}

/// 1-based (line, column) of a byte offset, counting `\n` line ends (so `\r\n`
/// too) and characters, not bytes, within the line.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..floor_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |nl| nl + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// Best guess at the dotted key being parsed at `offset` of text that is not
/// valid TOML (so no [`SourceMap`] exists): the table header or `key = value`
/// statement that the offending line belongs to, following values that span
/// lines (arrays, inline tables, multi-line strings) back to their key.
pub(crate) fn key_near(text: &str, offset: usize) -> Option<String> {
    let (text, offset) = match text.strip_prefix('\u{feff}') {
        Some(rest) => (rest, offset.saturating_sub('\u{feff}'.len_utf8())),
        None => (text, offset),
    };
    let mut section = String::new();
    let mut current: Option<String> = None;
    let mut value = ValueScan::default();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        if value.is_open() {
            value.scan(line);
        } else {
            let body = line.trim_start();
            if body.starts_with('[') {
                let name = header_name(body);
                section.clone_from(&name);
                current = Some(name);
            } else if !(body.is_empty() || body.starts_with('#')) {
                let (key, rest) = match split_key(body) {
                    Some((k, rest)) => (k, rest),
                    None => (body.split_whitespace().next().unwrap_or(""), ""),
                };
                let key = normalize_key(key);
                current = Some(if key.is_empty() {
                    section.clone()
                } else {
                    join(&section, &key)
                });
                value.scan(rest);
            }
        }
        start += line.len();
        if offset < start {
            break;
        }
    }
    current.filter(|k| !k.is_empty())
}

/// The dotted name of a `[table]` or `[[array.of.tables]]` header line, even unclosed.
fn header_name(line: &str) -> String {
    let inner = line.trim_start_matches('[');
    let end = inner.find([']', '#']).unwrap_or(inner.len());
    normalize_key(&inner[..end])
}

/// `key` and the text after its `=` (outside quotes), if the line has one.
fn split_key(line: &str) -> Option<(&str, &str)> {
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '=') => return Some((&line[..i], &line[i + 1..])),
            _ => {}
        }
    }
    None
}

/// `a . "b.c"` -> `a.b.c`: dotted key parts trimmed and unquoted.
fn normalize_key(raw: &str) -> String {
    raw.split('.')
        .map(|p| p.trim().trim_matches(['"', '\'']))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(".")
}

/// Whether a value is still open at the end of a line: nesting of `[`/`{`
/// outside strings, or an unterminated multi-line string.
#[derive(Debug, Default)]
struct ValueScan {
    depth: usize,
    multiline: Option<&'static str>,
}

impl ValueScan {
    fn is_open(&self) -> bool {
        self.depth > 0 || self.multiline.is_some()
    }

    fn scan(&mut self, mut line: &str) {
        loop {
            if let Some(delim) = self.multiline {
                match line.find(delim) {
                    Some(i) => {
                        self.multiline = None;
                        line = &line[i + delim.len()..];
                    }
                    None => return,
                }
            }
            let Some(i) = line.find(['"', '\'', '#', '[', '{', ']', '}']) else {
                return;
            };
            let rest = &line[i + 1..];
            line = match line.as_bytes()[i] {
                b'#' => return,
                b'[' | b'{' => {
                    self.depth += 1;
                    rest
                }
                b']' | b'}' => {
                    self.depth = self.depth.saturating_sub(1);
                    rest
                }
                q => {
                    let triple = if q == b'"' { "\"\"\"" } else { "'''" };
                    if line[i..].starts_with(triple) {
                        self.multiline = Some(triple);
                        &line[i + 3..]
                    } else {
                        // a one-line string ends at its closing quote or the line end
                        let close = if q == b'"' {
                            closing_basic_quote(rest)
                        } else {
                            rest.find('\'')
                        };
                        match close {
                            Some(j) => &rest[j + 1..],
                            None => return,
                        }
                    }
                }
            };
        }
    }
}

/// Index of the `"` that closes a basic string, skipping `\"` escapes.
fn closing_basic_quote(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn walk_table(
    table: &DeTable<'_>,
    prefix: &str,
    out: &mut Vec<(String, Range<usize>, Range<usize>)>,
) {
    for (key, value) in table.iter() {
        let path = join(prefix, key.get_ref());
        out.push((path.clone(), key.span(), value.span()));
        walk_value(value, &path, out);
    }
}

fn walk_value(
    value: &Spanned<DeValue<'_>>,
    path: &str,
    out: &mut Vec<(String, Range<usize>, Range<usize>)>,
) {
    match value.get_ref() {
        DeValue::Table(t) => walk_table(t, path, out),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let p = format!("{path}[{i}]");
                out.push((p.clone(), item.span(), item.span()));
                walk_value(item, &p, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name = \"x\"\n\n[load]\nrequest_rate = 5\nmax_concurrency = 8\n\n[[stages]]\nusers = 3\n[[stages]]\nusers = 4\n";

    #[test]
    fn lines_of_keys_and_ancestors() {
        let m = SourceMap::new(DOC).unwrap();
        assert_eq!(m.line_of("name"), Some(1));
        assert_eq!(m.line_of("load.request_rate"), Some(4));
        assert_eq!(m.line_of("load.max_concurrency"), Some(5));
        assert_eq!(m.line_of("load.nope"), m.line_of("load"));
        assert_eq!(m.line_of("stages[1].users"), Some(10));
        assert_eq!(m.line_of("absent"), None);
        assert!(m.contains("load.request_rate"));
    }

    #[test]
    fn key_at_offset_finds_innermost() {
        let m = SourceMap::new(DOC).unwrap();
        let off = DOC.find("= 5").unwrap() + 2;
        assert_eq!(m.key_at(off), Some("load.request_rate"));
        assert_eq!(m.line_col(off), (4, 16));
    }

    #[test]
    fn keys_near_broken_text() {
        let at = |text: &str, needle: &str| key_near(text, text.find(needle).unwrap());
        let t = "name = \"x\"\n[load]\nrequest_rate = \"4\n";
        assert_eq!(at(t, "\"4").as_deref(), Some("load.request_rate"));
        assert_eq!(at(t, "x").as_deref(), Some("name"));
        let t = "[output]\nmetric_percentiles = [50, # open\n  99\ndir = \"r\"\n";
        assert_eq!(at(t, "dir").as_deref(), Some("output.metric_percentiles"));
        let t = "[ mock . faults ]\n\"reset\" 0.1\n";
        assert_eq!(at(t, "0.1").as_deref(), Some("mock.faults.reset"));
        let t = "\u{feff}[load\nx = 1";
        assert_eq!(at(t, "[load").as_deref(), Some("load"));
        let t = "s = \"\"\"a [\nb\"\"\"\nt = {\n";
        assert_eq!(at(t, "t =").as_deref(), Some("t"));
        assert_eq!(at(t, "b\"").as_deref(), Some("s"));
        assert_eq!(key_near("", 0), None);
        assert_eq!(line_col("é\r\nxé", 6), (2, 2));
        assert_eq!(line_col("é\r\nxé", 7), (2, 3));
        assert_eq!(line_col("é", 1), (1, 1));
    }

    #[test]
    fn syntax_errors_are_reported() {
        let err = SourceMap::new("[load\nx=1").unwrap_err();
        assert!(err.span().is_some());
    }
}
