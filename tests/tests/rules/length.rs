//! Functions longer than a limit, outside test code.

use syn::visit::Visit;

use super::source::{is_test_only, parse};
use std::path::Path;

/// Longest a function may be, in lines from its signature to its closing brace.
pub const MAX_FN_LINES: usize = 120;

/// Functions outside test code longer than [`MAX_FN_LINES`], as `name (lines)`.
struct LongFunctions {
    found: Vec<(String, usize)>,
}

impl LongFunctions {
    fn check(&mut self, name: &syn::Ident, from: proc_macro2::Span, to: proc_macro2::Span) {
        let lines = to.end().line.saturating_sub(from.start().line) + 1;
        if lines > MAX_FN_LINES {
            self.found
                .push((format!("{name} (line {})", from.start().line), lines));
        }
    }
}

impl<'ast> Visit<'ast> for LongFunctions {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_test_only(&f.attrs) {
            return;
        }
        use syn::spanned::Spanned;
        self.check(&f.sig.ident, f.sig.span(), f.block.brace_token.span.close());
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_only(&f.attrs) {
            return;
        }
        use syn::spanned::Spanned;
        self.check(&f.sig.ident, f.sig.span(), f.block.brace_token.span.close());
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default
            && !is_test_only(&f.attrs)
        {
            use syn::spanned::Spanned;
            self.check(&f.sig.ident, f.sig.span(), block.brace_token.span.close());
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_test_only(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }
}

pub fn long_functions(path: &Path, text: &str) -> Vec<(String, usize)> {
    let file = parse(path, text);
    // a file that is test code as a whole (`#![cfg(test)]`)
    if is_test_only(&file.attrs) {
        return Vec::new();
    }
    let mut v = LongFunctions { found: Vec::new() };
    v.visit_file(&file);
    v.found
}
