//! Issue 17, "A house to live in": the rules of the code's layout, checked on
//! the source itself so that they hold after the refactor that set them up.
//!
//! - The coordinator's top-level modules import each other one way: no
//!   circle in the graph of `crate::...` / `super::` paths between them.
//! - No function outside test code is longer than [`MAX_FN_LINES`] lines,
//!   in any crate.
//! - Wire types (`cicada_proto::v1`, its conversions) are read in one place
//!   on the coordinator's side: its `fleet` module.
//! - The scenario model does not depend on the mock server, and the worker
//!   shows the coordinator nothing but its entry point.
//!
//! Each check runs first on a small made-up source that breaks its rule, so
//! a check that could not fail would fail here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cicada_tests::repo_root;
use syn::visit::Visit;

/// Longest a function may be, in lines from its signature to its closing brace.
const MAX_FN_LINES: usize = 120;

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
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

fn parse(path: &Path, text: &str) -> syn::File {
    syn::parse_file(text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `#[cfg(test)]` (or `#[cfg(any(test, ...))]`) and `#[test]`-like attributes.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
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

// ---------------------------------------------------------------- imports

/// The top-level module a source file of a crate belongs to: `src/run.rs` ->
/// `run`, `src/report/json.rs` -> `report`, `src/lib.rs` -> `crate`.
fn top_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let first = rel
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => "crate".to_string(),
        Some(stem) => stem.to_string(),
        None => first,
    }
}

/// How deep a file sits below its top-level module: `report/mod.rs` and
/// `run.rs` are 0 (their `super` is the crate root), `report/json.rs` is 1.
fn depth_below_top(src: &Path, file: &Path) -> usize {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let is_mod = parts.last().is_some_and(|p| p == "mod.rs");
    parts.len().saturating_sub(if is_mod { 2 } else { 1 })
}

/// Collects the top-level modules a file's non-test code names through
/// `crate::x` or enough `super::`s to climb to the crate root.
struct Imports<'a> {
    /// The file's own top-level module.
    own: &'a str,
    /// Modules of the crate's root, to tell `crate::x` (a module) from `crate::f` (a root item).
    modules: &'a BTreeSet<String>,
    /// `super`s from the current position to reach the crate root.
    to_root: usize,
    found: BTreeSet<String>,
}

impl Imports<'_> {
    fn segments(&mut self, names: &[String]) {
        let rest = match names.first().map(String::as_str) {
            Some("crate") => &names[1..],
            // the crate root names its modules without `crate::`
            Some(first)
                if self.own == "crate" && self.to_root == 0 && self.modules.contains(first) =>
            {
                names
            }
            Some("super") => {
                let supers = names.iter().take_while(|n| *n == "super").count();
                if supers < self.to_root {
                    return; // stays inside this top-level module
                }
                &names[supers..]
            }
            _ => return,
        };
        let target = match rest.first() {
            Some(m) if self.modules.contains(m) => m.clone(),
            // a root item (`crate::main`), or `crate::{a, b}` handled per leaf
            Some(_) | None => "crate".to_string(),
        };
        if target != self.own {
            self.found.insert(target);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.segments(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.segments(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.segments(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Imports<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Trait(t) => &t.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            return;
        }
        match item {
            syn::Item::Use(u) => self.use_tree(&mut Vec::new(), &u.tree),
            syn::Item::Mod(m) => {
                self.to_root += 1;
                syn::visit::visit_item_mod(self, m);
                self.to_root -= 1;
            }
            other => syn::visit::visit_item(self, other),
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.segments(&names);
        syn::visit::visit_path(self, path);
    }

    /// `pub(crate)` names no module.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    /// Paths inside macro calls (`format!("{}", crate::x::Y)`) are only tokens.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let tokens: Vec<String> = flat_tokens(mac.tokens.clone());
        for (i, t) in tokens.iter().enumerate() {
            if (t == "crate" || t == "super") && (i == 0 || tokens[i - 1] != "::") {
                let mut names = vec![t.clone()];
                let mut j = i + 1;
                while tokens.get(j).is_some_and(|c| c == "::") {
                    match tokens.get(j + 1) {
                        Some(n) => names.push(n.clone()),
                        None => break,
                    }
                    j += 2;
                }
                self.segments(&names);
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// A token stream's identifiers and punctuation, groups opened up, `::` joined.
fn flat_tokens(stream: proc_macro2::TokenStream) -> Vec<String> {
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

/// One source file: its path under `src/` and its text.
type Source = (PathBuf, String);

/// Edges between a crate's top-level modules (`crate` is the root file).
fn module_graph(src: &Path, files: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files
        .iter()
        .map(|(p, _)| top_module(src, p))
        .filter(|m| m != "crate")
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let own = top_module(src, path);
        let mut imports = Imports {
            own: &own,
            modules: &modules,
            to_root: depth_below_top(src, path) + usize::from(own != "crate"),
            found: BTreeSet::new(),
        };
        imports.visit_file(&parse(path, text));
        graph.entry(own.clone()).or_default().extend(imports.found);
    }
    graph
}

/// A circle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = path[from..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_string(), Mark::Open);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut marks, &mut Vec::new()))
}

fn read_sources(src: &Path) -> Vec<Source> {
    rust_files(src)
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

#[test]
fn a_made_up_circle_is_found() {
    let src = Path::new("/x/src");
    let files: Vec<Source> = [
        ("lib.rs", "pub mod a; pub mod b; pub mod c;"),
        ("a.rs", "use crate::b::B; pub struct A;"),
        ("b/mod.rs", "mod inner; pub struct B;"),
        ("b/inner.rs", "fn f() { let _ = super::super::c::C; }"),
        (
            "c.rs",
            "pub struct C; fn g() { println!(\"{}\", crate::a::A); }",
        ),
    ]
    .iter()
    .map(|(p, t)| (src.join(p), t.to_string()))
    .collect();
    let graph = module_graph(src, &files);
    assert_eq!(graph["b"], BTreeSet::from(["c".to_string()]));
    assert_eq!(
        graph["crate"],
        BTreeSet::new(),
        "mod declarations are not imports"
    );
    let cycle = find_cycle(&graph).expect("a -> b -> c -> a is a circle");
    assert_eq!(cycle.len(), 4, "{cycle:?}");
    // test code may reach anywhere; `super` inside a module stays home
    let files: Vec<Source> = [
        ("lib.rs", "pub mod a; pub mod b; fn main() { a::run(); }"),
        (
            "a.rs",
            "use crate::b::B; pub(crate) mod m { use super::X; }",
        ),
        (
            "b.rs",
            "pub struct B;\n#[cfg(test)]\nmod tests { use crate::a::*; }",
        ),
    ]
    .iter()
    .map(|(p, t)| (src.join(p), t.to_string()))
    .collect();
    let graph = module_graph(src, &files);
    assert_eq!(find_cycle(&graph), None, "{graph:?}");
    assert_eq!(graph["crate"], BTreeSet::from(["a".to_string()]));
}

#[test]
fn the_coordinator_modules_import_each_other_one_way() {
    let src = repo_root().join("crates/coordinator/src");
    let graph = module_graph(&src, &read_sources(&src));
    assert!(graph.len() > 5, "too few modules found: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        let edges: Vec<String> = graph
            .iter()
            .map(|(m, to)| {
                format!(
                    "  {m} -> {}",
                    to.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        panic!(
            "the coordinator's modules import in a circle: {}\nevery edge:\n{}",
            cycle.join(" -> "),
            edges.join("\n")
        );
    }
}

// ---------------------------------------------------------------- function length

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

fn long_functions(path: &Path, text: &str) -> Vec<(String, usize)> {
    let file = parse(path, text);
    // a file that is test code as a whole (`#![cfg(test)]`)
    if is_test_only(&file.attrs) {
        return Vec::new();
    }
    let mut v = LongFunctions { found: Vec::new() };
    v.visit_file(&file);
    v.found
}

#[test]
fn a_made_up_long_function_is_found() {
    let body = "    let x = 1;\n".repeat(MAX_FN_LINES);
    let text = format!(
        "fn long() {{\n{body}}}\nfn short() {{}}\nimpl S {{\n    fn method() {{\n{body}    }}\n}}\n#[cfg(test)]\nmod tests {{\n    fn long_test_helper() {{\n{body}    }}\n}}\n"
    );
    let found = long_functions(Path::new("made-up.rs"), &text);
    let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["long (line 1)", "method (line 125)"], "{found:?}");
    assert_eq!(found[0].1, MAX_FN_LINES + 2);
    let test_file = format!("#![cfg(test)]\nfn long_fixture() {{\n{body}}}\n");
    assert!(long_functions(Path::new("fixture.rs"), &test_file).is_empty());
}

#[test]
fn no_function_is_longer_than_the_limit() {
    let mut offenders = Vec::new();
    for src in std::fs::read_dir(repo_root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
    {
        for (path, text) in read_sources(&src) {
            for (name, lines) in long_functions(&path, &text) {
                let rel = path
                    .strip_prefix(repo_root())
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                offenders.push(format!("  {rel}: {name}: {lines} lines"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "functions longer than {MAX_FN_LINES} lines (split them along their phases):\n{}",
        offenders.join("\n")
    );
}

// ---------------------------------------------------------------- edges

/// Lines of non-test code in `text` that name the wire types.
fn wire_mentions(path: &Path, text: &str) -> Vec<usize> {
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
                    .is_some_and(|n| n != "VERSION" && n != "MAX_MESSAGE_BYTES")
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
                let only_constants = matches!(&*p.tree, syn::UseTree::Name(n) if n.ident == "VERSION" || n.ident == "MAX_MESSAGE_BYTES");
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

#[test]
fn a_made_up_wire_read_is_found() {
    let text = "use cicada_proto::v1;\nuse cicada_proto::VERSION;\nfn f(r: &cicada_proto::v1::Report) {}\n#[cfg(test)]\nmod tests { use cicada_proto::convert::encode_set; }\n";
    assert_eq!(wire_mentions(Path::new("made-up.rs"), text), [1, 3]);
}

#[test]
fn wire_types_are_read_only_at_the_fleet_edge() {
    let src = repo_root().join("crates/coordinator/src");
    let mut outside = Vec::new();
    for (path, text) in read_sources(&src) {
        if top_module(&src, &path) == "fleet" {
            continue;
        }
        for line in wire_mentions(&path, &text) {
            outside.push(format!(
                "  {}:{line}",
                path.strip_prefix(&src).unwrap().display()
            ));
        }
    }
    assert!(
        outside.is_empty(),
        "gRPC wire types are read outside the coordinator's fleet module:\n{}",
        outside.join("\n")
    );
}

/// The names in a Cargo.toml's `[dependencies]` table.
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if in_deps && let Some((name, _)) = line.split_once(['=', '.']) {
            out.push(name.trim().to_string());
        }
    }
    out
}

#[test]
fn the_scenario_model_does_not_depend_on_the_mock() {
    let deps = dependencies(&repo_root().join("crates/scenarios/Cargo.toml"));
    assert!(
        deps.iter().any(|d| d == "serde"),
        "no dependencies read: {deps:?}"
    );
    assert!(
        !deps.iter().any(|d| d == "cicada-mock"),
        "cicada-scenarios depends on cicada-mock: {deps:?}"
    );
}

#[test]
fn the_worker_shows_only_its_entry_point() {
    let lib = repo_root().join("crates/worker/src/lib.rs");
    let file = parse(&lib, &std::fs::read_to_string(&lib).unwrap());
    let public: Vec<String> = file
        .items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) if matches!(m.vis, syn::Visibility::Public(_)) => {
                Some(m.ident.to_string())
            }
            _ => None,
        })
        .collect();
    assert!(
        public.is_empty(),
        "the worker makes modules public: {public:?}"
    );
}
