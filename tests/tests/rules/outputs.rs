//! Outputs sit at the end of the pipeline (issue 36): the merge names no
//! output, and the writers' crate reads no server's `/metrics`.

use std::path::Path;

use syn::visit::Visit;

use super::source::{is_test_only, parse};

/// What the coordinator's merge may not name: the outputs and their means,
/// a sink to hold, or a clock (it keeps merged numbers only).
pub const NOT_IN_THE_MERGE: &[&str] = &[
    "IntervalSink",
    "Instant",
    "println",
    "eprintln",
    "print",
    "eprint",
    "fs",
    "Files",
    "Console",
    "Progress",
    "Feed",
    "BoardSink",
    "LiveSink",
    "LiveMetrics",
];

/// What the writers' crate may not name: the Prometheus text reader.
pub const NOT_IN_RESULTS: &[&str] = &["Exposition", "prom"];

/// The lines (with the name) where `text`'s non-test code names one of `banned`.
pub fn names_used(path: &Path, text: &str, banned: &[&str]) -> Vec<(usize, String)> {
    struct Names<'b> {
        banned: &'b [&'b str],
        found: Vec<(usize, String)>,
    }
    impl<'ast> Visit<'ast> for Names<'_> {
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            if !is_test_only(&m.attrs) {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            if !is_test_only(&f.attrs) {
                syn::visit::visit_item_fn(self, f);
            }
        }
        fn visit_ident(&mut self, i: &'ast proc_macro2::Ident) {
            let name = i.to_string();
            if self.banned.contains(&name.as_str()) {
                self.found.push((i.span().start().line, name));
            }
        }
    }
    let mut v = Names {
        banned,
        found: Vec::new(),
    };
    v.visit_file(&parse(path, text));
    v.found
}
