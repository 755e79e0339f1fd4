//! Reading a crate's source: its files, parsed, and which code is test code.

use std::path::{Path, PathBuf};

/// One source file: its path and its text.
pub type Source = (PathBuf, String);

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every source file under `src`, read.
pub fn read_sources(src: &Path) -> Vec<Source> {
    rust_files(src)
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// `text` parsed as a Rust file, or a panic naming `path`.
pub fn parse(path: &Path, text: &str) -> syn::File {
    syn::parse_file(text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `#[cfg(test)]` (or `#[cfg(any(test, ...))]`) and `#[test]`-like attributes.
pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let path = a.path();
        if path.is_ident("test") || path.segments.last().is_some_and(|s| s.ident == "test") {
            return true;
        }
        path.is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| {
                l.tokens
                    .to_string()
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|w| w == "test")
            })
    })
}

/// The attributes of an item, for telling test code apart.
pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Mod(m) => &m.attrs,
        syn::Item::Fn(f) => &f.attrs,
        syn::Item::Use(u) => &u.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Const(c) => &c.attrs,
        syn::Item::Static(s) => &s.attrs,
        syn::Item::Struct(s) => &s.attrs,
        syn::Item::Enum(e) => &e.attrs,
        syn::Item::Trait(t) => &t.attrs,
        syn::Item::Type(t) => &t.attrs,
        syn::Item::Macro(m) => &m.attrs,
        _ => &[],
    }
}

/// A token stream's identifiers and punctuation, groups opened up, `::` joined.
pub fn flat_tokens(stream: proc_macro2::TokenStream) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for tt in stream {
        match tt {
            proc_macro2::TokenTree::Group(g) => out.extend(flat_tokens(g.stream())),
            proc_macro2::TokenTree::Punct(p) => {
                if p.as_char() == ':' && out.last().is_some_and(|l| l == ":") {
                    out.pop();
                    out.push("::".into());
                } else {
                    out.push(p.as_char().to_string());
                }
            }
            other => out.push(other.to_string()),
        }
    }
    out
}
