//! A crate's module graph at every level: for each module, which of its
//! children name which (through `crate::`, `super::`, `self::`, a child's own
//! name or a name a `use` brought in), following re-exports to the module
//! that defines the item. A parent and its children are one unit (a parent
//! may use its children and they its items); its children among themselves
//! must import one way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::visit::Visit;

use super::source::{Source, flat_tokens, is_test_only, item_attrs, parse};

/// A module's path from the crate root (`[]` is the root).
pub type ModPath = Vec<String>;

/// The module a file holds: `src/lib.rs` -> `[]`, `src/a.rs` and
/// `src/a/mod.rs` -> `[a]`, `src/a/b.rs` -> `[a, b]`.
pub fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    match last.strip_suffix(".rs") {
        Some("mod") => {}
        Some("lib" | "main") if parts.is_empty() => {}
        Some(stem) => parts.push(stem.to_string()),
        None => parts.push(last),
    }
    parts
}

/// What a crate's non-test code names, and what each module's `use` items bind.
#[derive(Debug, Default)]
pub struct Crate {
    modules: BTreeSet<ModPath>,
    /// Per module: a name a `use` binds there -> the path it names, as written.
    bindings: BTreeMap<ModPath, BTreeMap<String, (ModPath, Vec<String>)>>,
    /// (module of the code, the module it sits in as written, path as written).
    refs: Vec<(ModPath, Vec<String>)>,
}

/// Collects one file's references.
struct Collect<'a> {
    krate: &'a mut Crate,
    /// The module being read (the file's, plus inline `mod`s).
    cur: ModPath,
}

impl Collect<'_> {
    fn bind(&mut self, name: String, path: Vec<String>) {
        self.krate
            .bindings
            .entry(self.cur.clone())
            .or_default()
            .insert(name, (self.cur.clone(), path));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut path = prefix.clone();
                if name != "self" {
                    path.push(name.clone());
                }
                let bound = if name == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    name
                };
                self.krate.refs.push((self.cur.clone(), path.clone()));
                self.bind(bound, path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.krate.refs.push((self.cur.clone(), path.clone()));
                self.bind(r.rename.to_string(), path);
            }
            syn::UseTree::Glob(_) => self.krate.refs.push((self.cur.clone(), prefix.clone())),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collect<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_test_only(item_attrs(item)) {
            return;
        }
        match item {
            syn::Item::Use(u) => self.use_tree(&mut Vec::new(), &u.tree),
            syn::Item::Mod(m) => {
                self.cur.push(m.ident.to_string());
                syn::visit::visit_item_mod(self, m);
                self.cur.pop();
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
        self.krate.refs.push((self.cur.clone(), names));
        syn::visit::visit_path(self, path);
    }

    /// `pub(crate)`, `pub(super)` name no dependency.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    /// Paths inside macro calls (`format!("{}", crate::x::Y)`) are only tokens.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let tokens = flat_tokens(mac.tokens.clone());
        for (i, t) in tokens.iter().enumerate() {
            let starts = i == 0 || tokens[i - 1] != "::";
            if starts && tokens.get(i + 1).is_some_and(|n| n == "::") {
                let mut names = vec![t.clone()];
                let mut j = i + 1;
                while tokens.get(j).is_some_and(|c| c == "::") {
                    match tokens.get(j + 1) {
                        Some(n) => names.push(n.clone()),
                        None => break,
                    }
                    j += 2;
                }
                self.krate.refs.push((self.cur.clone(), names));
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

impl Crate {
    /// Read a crate's files (`src` is its source directory).
    pub fn read(src: &Path, files: &[Source]) -> Crate {
        let mut krate = Crate::default();
        for (path, _) in files {
            krate.modules.insert(module_of(src, path));
        }
        for (path, text) in files {
            let file = parse(path, text);
            if is_test_only(&file.attrs) {
                continue;
            }
            let mut c = Collect {
                krate: &mut krate,
                cur: module_of(src, path),
            };
            c.visit_file(&file);
        }
        krate
    }

    /// The longest module of this crate that `path` lies in.
    fn module_prefix(&self, path: &[String]) -> ModPath {
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| self.modules.contains(p))
            .unwrap_or_default()
    }

    /// `path` as written in module `cur`, made absolute; `None` for what lies
    /// outside the crate (other crates, std, local items and generics).
    fn absolute(&self, cur: &[String], path: &[String], depth: usize) -> Option<ModPath> {
        let first = path.first()?;
        let here = self.module_prefix(cur);
        let abs: ModPath = match first.as_str() {
            "crate" => path[1..].to_vec(),
            "super" => {
                let supers = path.iter().take_while(|n| *n == "super").count();
                let mut base = cur.to_vec();
                for _ in 0..supers {
                    base.pop()?;
                }
                base.extend_from_slice(&path[supers..]);
                base
            }
            "self" => cur.iter().chain(&path[1..]).cloned().collect(),
            name if self
                .modules
                .contains(&[&here[..], &[name.to_string()]].concat()) =>
            {
                here.iter().chain(path).cloned().collect()
            }
            name => {
                if depth > 8 {
                    return None;
                }
                let (at, target) = self.bindings.get(cur).and_then(|b| b.get(name))?;
                let mut abs = self.absolute(at, target, depth + 1)?;
                abs.extend_from_slice(&path[1..]);
                abs
            }
        };
        Some(abs)
    }

    /// The module that defines what an absolute path names, following the
    /// re-exports (`pub use x::Y`) it passes through.
    fn defining_module(&self, mut abs: ModPath) -> ModPath {
        for _ in 0..8 {
            let m = self.module_prefix(&abs);
            let Some(name) = abs.get(m.len()) else {
                return m;
            };
            let Some((at, target)) = self.bindings.get(&m).and_then(|b| b.get(name)) else {
                return m;
            };
            match self.absolute(at, target, 0) {
                Some(mut next) => {
                    next.extend_from_slice(&abs[m.len() + 1..]);
                    abs = next;
                }
                None => return m,
            }
        }
        self.module_prefix(&abs)
    }

    /// Every edge between two modules of the crate: (from, to), `to` being
    /// where the named item is defined.
    pub fn edges(&self) -> BTreeSet<(ModPath, ModPath)> {
        let mut out = BTreeSet::new();
        for (cur, path) in &self.refs {
            let Some(abs) = self.absolute(cur, path, 0) else {
                continue;
            };
            let from = self.module_prefix(cur);
            let to = self.defining_module(abs);
            if from != to {
                out.insert((from, to));
            }
        }
        out
    }

    /// For each module with children: the graph among its children (each
    /// child standing for its whole subtree).
    pub fn levels(&self) -> BTreeMap<ModPath, Graph> {
        let edges = self.edges();
        let mut out: BTreeMap<ModPath, Graph> = BTreeMap::new();
        for m in &self.modules {
            if let Some((_, parent)) = m.split_last() {
                let child = m.last().cloned().unwrap_or_default();
                out.entry(parent.to_vec())
                    .or_default()
                    .entry(child)
                    .or_default();
            }
        }
        for (from, to) in &edges {
            let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if from.len() > common && to.len() > common {
                out.entry(from[..common].to_vec())
                    .or_default()
                    .entry(from[common].clone())
                    .or_default()
                    .insert(to[common].clone());
            }
        }
        out
    }
}

/// Edges between the children of one module.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// A circle in `graph`, as the nodes along it, if there is one.
pub fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
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

/// Nodes of `graph` that reach each other (its circles), each group sorted.
pub fn tangles(graph: &Graph) -> Vec<Vec<String>> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = graph.get(from).into_iter().flatten().collect();
        while let Some(n) = stack.pop() {
            if seen.insert(n.clone()) {
                stack.extend(graph.get(n).into_iter().flatten());
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (n, r) in &reaches {
        if !r.contains(*n) || out.iter().any(|g| g.contains(n)) {
            continue;
        }
        let group: Vec<String> = r
            .iter()
            .filter(|m| reaches.get(m).is_some_and(|back| back.contains(*n)))
            .cloned()
            .collect();
        out.push(group);
    }
    out
}

/// Every circle of a crate, one line per level that has one: the circle
/// found first, then every module caught in a circle at that level.
pub fn cycles(src: &Path, files: &[Source]) -> Vec<String> {
    let krate = Crate::read(src, files);
    krate
        .levels()
        .iter()
        .filter_map(|(level, graph)| {
            let cycle = find_cycle(graph)?;
            let at = if level.is_empty() {
                "crate".to_string()
            } else {
                level.join("::")
            };
            let groups = tangles(graph);
            let all: Vec<String> = groups.iter().map(|g| g.join(", ")).collect();
            let edges: Vec<String> = groups
                .iter()
                .flat_map(|g| {
                    g.iter().flat_map(move |from| {
                        graph[from]
                            .iter()
                            .filter(|to| g.contains(to))
                            .map(move |to| format!("{from} -> {to}"))
                    })
                })
                .collect();
            Some(format!(
                "{at}: {} (caught: {}; their edges: {})",
                cycle.join(" -> "),
                all.join("; "),
                edges.join(", ")
            ))
        })
        .collect()
}
