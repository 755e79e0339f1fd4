//! Where the gRPC wire types are named.

use std::path::Path;

use syn::visit::Visit;

use super::source::{is_test_only, parse};

/// What `cicada_proto` holds besides wire types: plain constants anyone may use.
const CONSTANTS: [&str; 4] = [
    "VERSION",
    "MAX_MESSAGE_BYTES",
    "TRANSPORT_KEEPALIVE_TIMEOUT",
    "PING_INTERVAL",
];

/// Lines of non-test code in `text` that name the wire types.
pub fn wire_mentions(path: &Path, text: &str) -> Vec<usize> {
    struct Wire {
        lines: Vec<usize>,
    }
    impl<'ast> Visit<'ast> for Wire {
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
        fn visit_path(&mut self, p: &'ast syn::Path) {
            let names: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            if names.first().is_some_and(|n| n == "cicada_proto")
                && names
                    .get(1)
                    .is_some_and(|n| !CONSTANTS.contains(&n.as_str()))
            {
                use syn::spanned::Spanned;
                self.lines.push(p.span().start().line);
            }
            syn::visit::visit_path(self, p);
        }
        fn visit_use_tree(&mut self, t: &'ast syn::UseTree) {
            if let syn::UseTree::Path(p) = t
                && p.ident == "cicada_proto"
            {
                let only_constants = only_constants(&p.tree);
                if !only_constants {
                    self.lines.push(p.ident.span().start().line);
                }
            }
            syn::visit::visit_use_tree(self, t);
        }
    }
    let mut w = Wire { lines: Vec::new() };
    w.visit_file(&parse(path, text));
    w.lines
}

/// A `use cicada_proto::...` tree that brings in constants alone.
fn only_constants(tree: &syn::UseTree) -> bool {
    match tree {
        syn::UseTree::Name(n) => CONSTANTS.contains(&n.ident.to_string().as_str()),
        syn::UseTree::Group(g) => g.items.iter().all(only_constants),
        _ => false,
    }
}
