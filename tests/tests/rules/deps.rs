//! What a crate may reach: the workspace crates its manifest depends on,
//! and the doors it leaves open.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::visit::Visit;

use super::source::{is_test_only, parse};

/// The names in a Cargo.toml's `[dependencies]` table (not dev or build).
pub fn dependencies(manifest_text: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in manifest_text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if in_deps
            && !line.starts_with('#')
            && let Some((name, _)) = line.split_once(['=', '.'])
        {
            out.push(name.trim().to_string());
        }
    }
    out
}

/// The package name in a Cargo.toml.
pub fn package_name(manifest_text: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest_text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(rest) = line.strip_prefix("name") {
            let value = rest.trim_start().strip_prefix('=')?.trim();
            return Some(value.trim_matches('"').to_string());
        }
    }
    None
}

/// The workspace crates `package` may depend on: the crates below it in the
/// house's layering (each crate has one job and reaches only what that job
/// needs). `None` for a package the table does not know.
///
/// `cicada-plan` is the centre: the contract between coordinator and
/// worker, below the client, the wire, the worker and the scenario model,
/// above only `cicada-request` and `cicada-metrics`. The worker and the mock
/// stand beside `cicada-scenarios`, the coordinator's file model, never on
/// it ([`NEVER_REACHES`] says so through every path). `cicada-sys` is the
/// floor: libc only, the one door to the kernel for every crate that needs it.
/// The web UI sits below the coordinator: the run feeds its board as one of
/// its sinks, and the page never reaches the run itself.
pub fn allowed(package: &str) -> Option<&'static [&'static str]> {
    Some(match package {
        "cicada-metrics" | "cicada-alias" | "cicada-sys" | "cicada-serve" => &[],
        "cicada-request" => &["cicada-metrics"],
        "cicada-plan" => &["cicada-metrics", "cicada-request"],
        "cicada-mock" => &["cicada-metrics", "cicada-request", "cicada-sys"],
        "cicada-scenarios" => &[
            "cicada-metrics",
            "cicada-mock",
            "cicada-plan",
            "cicada-request",
        ],
        "cicada-proto" => &["cicada-metrics", "cicada-plan", "cicada-request"],
        "cicada-client" => &[
            "cicada-metrics",
            "cicada-plan",
            "cicada-request",
            "cicada-sys",
        ],
        "cicada-results" => &["cicada-metrics", "cicada-plan", "cicada-scenarios"],
        "cicada-report" => &["cicada-metrics", "cicada-results"],
        "cicada-probe" => &[
            "cicada-client",
            "cicada-metrics",
            "cicada-mock",
            "cicada-plan",
            "cicada-results",
            "cicada-scenarios",
        ],
        "cicada-worker" => &[
            "cicada-client",
            "cicada-metrics",
            "cicada-plan",
            "cicada-proto",
            "cicada-request",
            "cicada-sys",
        ],
        "cicada-web" => &[
            "cicada-metrics",
            "cicada-plan",
            "cicada-results",
            "cicada-scenarios",
            "cicada-serve",
        ],
        "cicada-coordinator" => &[
            "cicada-client",
            "cicada-metrics",
            "cicada-mock",
            "cicada-plan",
            "cicada-probe",
            "cicada-proto",
            "cicada-results",
            "cicada-scenarios",
            "cicada-serve",
            "cicada-sys",
            "cicada-web",
        ],
        "cicada-bench" => &[
            "cicada-client",
            "cicada-coordinator",
            "cicada-metrics",
            "cicada-proto",
            // the send-cost harness builds its own requests for the client
            "cicada-request",
            "cicada-sys",
        ],
        // the binary reads the flags and hands each library its own settings
        "cicada" => &[
            "cicada-bench",
            "cicada-client",
            "cicada-coordinator",
            "cicada-mock",
            "cicada-plan",
            "cicada-report",
            "cicada-results",
            "cicada-scenarios",
            "cicada-sys",
            "cicada-worker",
        ],
        _ => return None,
    })
}

/// What a crate must never reach through its normal dependencies, however
/// indirectly: (crate, crates it must not reach, why).
pub const NEVER_REACHES: &[(&str, &[&str], &str)] = &[
    (
        "cicada-plan",
        &[
            "tokio",
            "hyper",
            "reqwest",
            "tonic",
            "socket2",
            "tokenizers",
            "hf-hub",
            "cicada-scenarios",
        ],
        "the plan is data and arithmetic: no runtime, network, tokenizer or file model",
    ),
    (
        "cicada-worker",
        &["cicada-scenarios", "hf-hub"],
        "the worker runs plans; the scenario file, its datasets and the hub are the coordinator's",
    ),
    (
        "cicada-mock",
        &["cicada-scenarios", "tokenizers", "hf-hub"],
        "the mock owns its specification and counts words, not tokens",
    ),
];

/// Each package's dependencies as a `Cargo.lock` lists them (every version
/// of a name merged): the external crates' graph.
pub fn lock_graph(lock_text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut name = String::new();
    let mut in_deps = false;
    for line in lock_text.lines().map(str::trim) {
        if line == "[[package]]" {
            in_deps = false;
        } else if let Some(v) = line.strip_prefix("name = ") {
            name = v.trim_matches('"').to_string();
            out.entry(name.clone()).or_default();
        } else if line.starts_with("dependencies = [") {
            in_deps = true;
        } else if line == "]" {
            in_deps = false;
        } else if in_deps && let Some(dep) = line.trim_matches([',', '"']).split(' ').next() {
            out.entry(name.clone()).or_default().insert(dep.to_string());
        }
    }
    out
}

/// Every crate `package` reaches through normal dependencies: workspace
/// crates by their manifests' `[dependencies]` (`workspace`: package name to
/// those), the rest by the lock file's graph.
pub fn reach(
    package: &str,
    workspace: &BTreeMap<String, Vec<String>>,
    lock: &BTreeMap<String, BTreeSet<String>>,
) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![package.to_string()];
    while let Some(p) = todo.pop() {
        let next: Vec<String> = match workspace.get(&p) {
            Some(deps) => deps.clone(),
            None => lock.get(&p).into_iter().flatten().cloned().collect(),
        };
        for d in next {
            if seen.insert(d.clone()) {
                todo.push(d);
            }
        }
    }
    seen
}

/// Lines of non-test code in `text` that name the standard library's I/O:
/// `std::fs`, `std::io`, `std::net`, `std::process`, `std::env`.
pub fn io_mentions(path: &Path, text: &str) -> Vec<usize> {
    const IO: [&str; 5] = ["fs", "io", "net", "process", "env"];
    struct Io(Vec<usize>);
    impl<'ast> Visit<'ast> for Io {
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
            let mut names = p.segments.iter().map(|s| s.ident.to_string());
            if names.next().is_some_and(|n| n == "std")
                && names.next().is_some_and(|n| IO.contains(&n.as_str()))
            {
                use syn::spanned::Spanned;
                self.0.push(p.span().start().line);
            }
            syn::visit::visit_path(self, p);
        }
        fn visit_use_path(&mut self, p: &'ast syn::UsePath) {
            let io = |t: &syn::UseTree| match t {
                syn::UseTree::Path(q) => IO.contains(&q.ident.to_string().as_str()),
                syn::UseTree::Name(q) => IO.contains(&q.ident.to_string().as_str()),
                syn::UseTree::Rename(q) => IO.contains(&q.ident.to_string().as_str()),
                _ => false,
            };
            let named = match &*p.tree {
                syn::UseTree::Group(g) => g.items.iter().any(io),
                t => io(t),
            };
            if p.ident == "std" && named {
                self.0.push(p.ident.span().start().line);
            }
            syn::visit::visit_use_path(self, p);
        }
    }
    let mut v = Io(Vec::new());
    v.visit_file(&parse(path, text));
    v.0
}

/// Dependencies the layering does not allow yet, each with the issue that
/// removes it.
pub const ALLOWANCES: &[(&str, &str, &str)] = &[];

/// Workspace crates `manifest_text` depends on that `allowed` does not list
/// (and no allowance covers).
pub fn layering_breaches(manifest_text: &str) -> Result<Vec<String>, String> {
    let package = package_name(manifest_text).ok_or("no package name")?;
    let allowed = allowed(&package)
        .ok_or_else(|| format!("{package} is not in the layering table (rules/deps.rs)"))?;
    Ok(dependencies(manifest_text)
        .into_iter()
        .filter(|d| d.starts_with("cicada"))
        .filter(|d| !allowed.contains(&d.as_str()))
        .filter(|d| !ALLOWANCES.iter().any(|(p, to, _)| *p == package && to == d))
        .map(|d| format!("{package} -> {d}"))
        .collect())
}

/// Lines of `text` holding a `#[doc(hidden)]` item: public API in all but
/// name, a door for another crate to reach past the documented one.
pub fn hidden_doors(path: &Path, text: &str) -> Vec<usize> {
    struct Hidden(Vec<usize>);
    impl<'ast> Visit<'ast> for Hidden {
        fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
            if a.path().is_ident("doc")
                && a.meta
                    .require_list()
                    .is_ok_and(|l| l.tokens.to_string().trim() == "hidden")
            {
                self.0.push(a.pound_token.span.start().line);
            }
        }
    }
    let mut h = Hidden(Vec::new());
    h.visit_file(&parse(path, text));
    h.0
}
