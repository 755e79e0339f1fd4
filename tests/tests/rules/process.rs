//! What only the binary may do (issue 36: the binary owns the process):
//! read flags (clap) and carry untyped errors (anyhow); what only the sys
//! crate may do: call libc; and what no library does: return a bare
//! `String` as its error.

use std::path::Path;

use syn::visit::Visit;

use super::deps::{dependencies, package_name};
use super::source::{is_test_only, parse};

/// The binary crates: the `cicada` command line and the old names.
pub const BINARIES: [&str; 2] = ["cicada", "cicada-alias"];

/// The one crate that calls libc.
pub const SYS: &str = "cicada-sys";

/// Dependencies a library still holds that only the binary may, each with
/// what keeps it there for now and what removes it: (crate, dependency, why).
pub const PROCESS_ALLOWANCES: &[(&str, &str, &str)] = &[(
    "cicada-bench",
    "anyhow",
    "the selftest harness (`cicada selftest`): linked only into the binary, behind its `bench` feature; it drives oha, wrk and cicada processes and its errors are diagnostics for the person running it (the binary prints them and exits 1), which no caller matches on",
)];

/// Dependencies in `manifest_text` its package may not hold: clap and
/// anyhow outside the binaries, libc outside the sys crate, as
/// `package -> dependency` (allowances left out).
pub fn process_breaches(manifest_text: &str) -> Vec<String> {
    let Some(package) = package_name(manifest_text) else {
        return vec!["a manifest without a package name".into()];
    };
    dependencies(manifest_text)
        .into_iter()
        .filter(|d| match d.as_str() {
            "clap" | "anyhow" => !BINARIES.contains(&package.as_str()),
            "libc" => package != SYS,
            _ => false,
        })
        .filter(|d| {
            !PROCESS_ALLOWANCES
                .iter()
                .any(|(p, dep, _)| *p == package && dep == d)
        })
        .map(|d| format!("{package} -> {d}"))
        .collect()
}

/// Lines of non-test code in `text` naming a `Result<_, String>`: an error
/// a caller can only print, where a library owes a typed one.
pub fn string_errors(path: &Path, text: &str) -> Vec<usize> {
    struct Found(Vec<usize>);
    impl<'ast> Visit<'ast> for Found {
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
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            if !is_test_only(&f.attrs) {
                syn::visit::visit_impl_item_fn(self, f);
            }
        }
        fn visit_path_segment(&mut self, s: &'ast syn::PathSegment) {
            if s.ident == "Result"
                && let syn::PathArguments::AngleBracketed(a) = &s.arguments
            {
                let types: Vec<&syn::Type> = a
                    .args
                    .iter()
                    .filter_map(|g| match g {
                        syn::GenericArgument::Type(t) => Some(t),
                        _ => None,
                    })
                    .collect();
                if let [_, syn::Type::Path(e)] = types[..]
                    && e.qself.is_none()
                    && e.path.segments.last().is_some_and(|l| l.ident == "String")
                {
                    self.0.push(s.ident.span().start().line);
                }
            }
            syn::visit::visit_path_segment(self, s);
        }
    }
    let mut v = Found(Vec::new());
    v.visit_file(&parse(path, text));
    v.0
}
