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
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before
            .rfind('\n')
            .map_or(before.len(), |nl| before.len() - nl - 1)
            + 1;
        (line, column)
    }
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
    fn syntax_errors_are_reported() {
        let err = SourceMap::new("[load\nx=1").unwrap_err();
        assert!(err.span().is_some());
    }
}
