//! The house rules: the layout of the code, checked on the source itself so
//! that it holds (issue 17 set them up for the coordinator; issue 24 put
//! them on every crate).
//!
//! - No module circle anywhere: in every crate, at every level, a module's
//!   children import each other one way (`rules::modules`).
//! - No function outside test code is longer than [`MAX_FN_LINES`] lines.
//! - Wire types (`cicada_proto::v1`, its conversions) are read only at each
//!   side's edge: the coordinator's `fleet`, the worker's link, the bench's
//!   fleet simulator.
//! - No crate reaches past another's public API: each depends only on the
//!   crates below it in the layering (`rules::deps`), no item hides behind
//!   `#[doc(hidden)]`, and the worker shows nothing but its entry point.
//! - The plan crate is the I/O-free centre (issue 36): it reaches no
//!   runtime, network, tokenizer or file model and names no `std` I/O; the
//!   worker and the mock never reach the scenario model, however indirectly.
//! - The binary owns the process (issue 36): only the binary crates depend
//!   on clap and anyhow, only `cicada-sys` on libc, and no library returns
//!   a `Result<_, String>` (`rules::process`).
//!
//! - Outputs are sinks at the end of the pipeline (issue 36): the
//!   coordinator's merge prints, writes and serves nothing and names no
//!   output; the writers' crate (`cicada-results`) reads no Prometheus text.
//!
//! Each check runs first on a small made-up source that breaks its rule, so
//! a check that could not fail would fail here.

mod rules;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cicada_tests::repo_root;
use rules::deps::{
    NEVER_REACHES, dependencies, hidden_doors, io_mentions, layering_breaches, lock_graph,
    package_name, reach,
};
use rules::length::{MAX_FN_LINES, long_functions};
use rules::modules::{Crate, cycles, module_of};
use rules::outputs::{NOT_IN_RESULTS, NOT_IN_THE_MERGE, names_used};
use rules::process::{BINARIES, SYS, process_breaches, string_errors};
use rules::source::{Source, parse, read_sources};
use rules::wire::wire_mentions;

/// Module circles allowed for now: (crate directory, level), each with the
/// issue that removes it.
const CYCLE_ALLOWANCES: &[(&str, &str, &str)] = &[];

/// Every crate of the workspace: its directory under the repository.
fn crates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(repo_root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    out.sort();
    assert!(out.len() >= 10, "too few crates found: {out:?}");
    out
}

fn made_up(files: &[(&str, &str)]) -> (PathBuf, Vec<Source>) {
    let src = PathBuf::from("/x/src");
    let files = files
        .iter()
        .map(|(p, t)| (src.join(p), t.to_string()))
        .collect();
    (src, files)
}

fn rel(path: &Path) -> String {
    path.strip_prefix(repo_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

// ---------------------------------------------------------------- module circles

#[test]
fn a_made_up_circle_is_found() {
    // a -> b (through a re-export at the root) -> c -> a, at the top level
    let (src, files) = made_up(&[
        ("lib.rs", "mod a; mod b; mod c; pub use b::B;"),
        ("a.rs", "use crate::B; pub struct A;"),
        ("b/mod.rs", "mod inner; pub struct B;"),
        ("b/inner.rs", "fn f() { let _ = super::super::c::C; }"),
        (
            "c.rs",
            "pub struct C; fn g() { println!(\"{}\", crate::a::A); }",
        ),
    ]);
    let found = cycles(&src, &files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("crate: "), "{found:?}");
    assert!(found[0].contains("(caught: a, b, c;"), "{found:?}");

    // one level down: siblings p and q of module x, through `super::` and a
    // name a `use` brought in
    let (src, files) = made_up(&[
        ("lib.rs", "mod x;"),
        ("x/mod.rs", "mod p; mod q; pub struct Shared;"),
        ("x/p.rs", "use super::q; fn f() { q::g(); }"),
        ("x/q.rs", "fn g() { super::p::f(); }"),
    ]);
    assert_eq!(
        cycles(&src, &files),
        ["x: p -> q -> p (caught: p, q; their edges: p -> q, q -> p)"]
    );

    // a parent and its children are one unit; test code reaches anywhere;
    // `pub(crate)` names no module
    let (src, files) = made_up(&[
        ("lib.rs", "mod a; mod b; fn main() { a::run(); }"),
        (
            "a/mod.rs",
            "mod m; use crate::b::B; pub(crate) fn run() { m::go(); } pub struct T;",
        ),
        ("a/m.rs", "pub fn go() { let _ = super::T; }"),
        (
            "b.rs",
            "pub struct B;\n#[cfg(test)]\nmod tests { use crate::a::*; }",
        ),
    ]);
    assert!(cycles(&src, &files).is_empty());
    let krate = Crate::read(&src, &files);
    let levels = krate.levels();
    assert_eq!(
        levels[&Vec::<String>::new()]["a"],
        BTreeSet::from(["b".to_string()])
    );
    assert!(levels[&Vec::<String>::new()]["b"].is_empty());
}

#[test]
fn no_crate_has_a_module_circle() {
    let mut found = Vec::new();
    let mut modules = 0;
    for dir in crates() {
        let src = dir.join("src");
        let files = read_sources(&src);
        modules += files.len();
        for cycle in cycles(&src, &files) {
            let krate = rel(&dir);
            let allowed = CYCLE_ALLOWANCES
                .iter()
                .any(|(c, level, _)| *c == krate && cycle.starts_with(&format!("{level}: ")));
            if !allowed {
                found.push(format!("  {krate}: {cycle}"));
            }
        }
    }
    assert!(modules > 100, "too few modules read: {modules}");
    assert!(
        found.is_empty(),
        "modules that import each other in a circle (a module's children must import one way):\n{}",
        found.join("\n")
    );
}

// ---------------------------------------------------------------- function length

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
    for src in crates().into_iter().map(|c| c.join("src")) {
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

// ---------------------------------------------------------------- wire types

/// Where each crate may read wire types: its top-level modules that are its
/// edge to the other side (`None`: anywhere, the protocol crate itself).
fn wire_edge(krate: &str) -> Option<&'static [&'static str]> {
    match krate {
        "crates/proto" => None,
        "crates/coordinator" => Some(&["fleet"]),
        // the worker's link to the coordinator: dialling, the session, the uplink
        "crates/worker" => Some(&["link", "uplink"]),
        // simulated workers speak the protocol themselves
        "crates/bench" => Some(&["sim"]),
        _ => Some(&[]),
    }
}

#[test]
fn a_made_up_wire_read_is_found() {
    let text = "use cicada_proto::v1;\nuse cicada_proto::{VERSION, PING_INTERVAL};\nfn f(r: &cicada_proto::v1::Report) {}\n#[cfg(test)]\nmod tests { use cicada_proto::convert::encode_set; }\n";
    assert_eq!(wire_mentions(Path::new("made-up.rs"), text), [1, 3]);
}

#[test]
fn wire_types_are_read_only_at_each_edge() {
    let mut outside = Vec::new();
    for dir in crates() {
        let Some(edge) = wire_edge(&rel(&dir)) else {
            continue;
        };
        let src = dir.join("src");
        for (path, text) in read_sources(&src) {
            let top = module_of(&src, &path).first().cloned().unwrap_or_default();
            if edge.contains(&top.as_str()) {
                continue;
            }
            for line in wire_mentions(&path, &text) {
                outside.push(format!("  {}:{line}", rel(&path)));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "gRPC wire types are read outside their crate's edge:\n{}",
        outside.join("\n")
    );
}

// ---------------------------------------------------------------- outputs

#[test]
fn a_made_up_output_in_the_merge_is_found() {
    let text = "use cicada_results::files::Files;\nfn add() {\n    eprintln!(\"merged\");\n    let _ = std::fs::write(\"x\", \"\");\n}\n#[cfg(test)]\nmod tests { fn t() { println!(); } }\n";
    let found = names_used(Path::new("made-up.rs"), text, NOT_IN_THE_MERGE);
    let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [1, 3, 4], "{found:?}");
}

#[test]
fn the_merge_hands_its_results_on_and_results_read_no_prometheus() {
    let mut found = Vec::new();
    let merge = repo_root().join("crates/coordinator/src/merge.rs");
    let text = std::fs::read_to_string(&merge).unwrap();
    for (line, name) in names_used(&merge, &text, NOT_IN_THE_MERGE) {
        found.push(format!(
            "  {}:{line}: {name} (the merge names an output or holds one)",
            rel(&merge)
        ));
    }
    for (path, text) in read_sources(&repo_root().join("crates/results/src")) {
        for (line, name) in names_used(&path, &text, NOT_IN_RESULTS) {
            found.push(format!(
                "  {}:{line}: {name} (the Prometheus reader is cicada-probe's)",
                rel(&path)
            ));
        }
    }
    assert!(
        found.is_empty(),
        "outputs are sinks at the end of the pipeline:\n{}",
        found.join("\n")
    );
}

// ---------------------------------------------------------------- public APIs

#[test]
fn a_made_up_reach_past_the_api_is_found() {
    let manifest = "[package]\nname = \"cicada-plan\"\n\n[dependencies]\ncicada-metrics.workspace = true\ncicada-scenarios = { path = \"../scenarios\" }\nserde.workspace = true\n\n[dev-dependencies]\ncicada-worker.workspace = true\n";
    assert_eq!(
        layering_breaches(manifest).unwrap(),
        ["cicada-plan -> cicada-scenarios"]
    );
    let coordinator = "[package]\nname = \"cicada-coordinator\"\n[dependencies]\ncicada-worker.workspace = true\n";
    assert_eq!(
        layering_breaches(coordinator).unwrap(),
        ["cicada-coordinator -> cicada-worker"]
    );
    assert!(layering_breaches("[package]\nname = \"cicada-new\"\n").is_err());
    let text = "pub struct A;\n#[doc(hidden)]\npub fn door() {}\n/// fine\npub fn open() {}\n";
    assert_eq!(hidden_doors(Path::new("made-up.rs"), text), [2]);
}

#[test]
fn every_crate_depends_only_on_the_crates_below_it() {
    let mut breaches = Vec::new();
    for dir in crates() {
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        match layering_breaches(&text) {
            Ok(b) => breaches.extend(b),
            Err(e) => breaches.push(format!("{}: {e}", rel(&dir))),
        }
    }
    assert!(
        breaches.is_empty(),
        "crates reaching past the layering (tests/tests/rules/deps.rs):\n{}",
        breaches.join("\n")
    );
}

#[test]
fn no_crate_leaves_a_hidden_door() {
    let mut doors = Vec::new();
    for dir in crates() {
        for (path, text) in read_sources(&dir.join("src")) {
            for line in hidden_doors(&path, &text) {
                doors.push(format!("  {}:{line}", rel(&path)));
            }
        }
    }
    assert!(
        doors.is_empty(),
        "#[doc(hidden)] items (make them private or document them):\n{}",
        doors.join("\n")
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

// ---------------------------------------------------------------- the plan at the centre

/// Every workspace crate's normal dependencies, by package name.
fn workspace_graph() -> BTreeMap<String, Vec<String>> {
    crates()
        .iter()
        .map(|dir| {
            let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            (package_name(&text).unwrap(), dependencies(&text))
        })
        .collect()
}

#[test]
fn a_made_up_reach_through_the_graph_is_found() {
    let workspace = BTreeMap::from([
        ("a".to_string(), vec!["b".to_string()]),
        ("b".to_string(), vec!["ext".to_string()]),
    ]);
    let lock = lock_graph(
        "[[package]]\nname = \"ext\"\nversion = \"1.0.0\"\ndependencies = [\n \"deep 0.2.0\",\n \"other\",\n]\n\n[[package]]\nname = \"deep\"\nversion = \"0.2.0\"\n",
    );
    assert_eq!(
        reach("a", &workspace, &lock),
        ["b", "deep", "ext", "other"].map(String::from).into()
    );
    // a workspace crate's dev-dependencies are not followed
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nb.workspace = true\n[dev-dependencies]\nc.workspace = true\n";
    assert_eq!(dependencies(manifest), ["b"]);
    let text = "use std::{fs, time::Duration};\nuse std::io::Read as _;\nfn f() { let _ = std::net::Ipv4Addr::LOCALHOST; }\nuse std::collections::BTreeMap;\n#[cfg(test)]\nmod tests { use std::fs; }\n";
    assert_eq!(io_mentions(Path::new("made-up.rs"), text), [1, 2, 3]);
}

#[test]
fn the_plan_worker_and_mock_reach_only_what_their_jobs_need() {
    let workspace = workspace_graph();
    let lock = lock_graph(&std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap());
    // the graph is followed: the worker reaches the runtime and the tokenizer it uses
    let worker = reach("cicada-worker", &workspace, &lock);
    assert!(worker.contains("tokio") && worker.contains("tokenizers"));
    let mut found = Vec::new();
    for (package, never, why) in NEVER_REACHES {
        assert!(workspace.contains_key(*package), "{package} is not a crate");
        let reached = reach(package, &workspace, &lock);
        for bad in never.iter().filter(|n| reached.contains(**n)) {
            found.push(format!("  {package} reaches {bad}: {why}"));
        }
    }
    assert!(
        found.is_empty(),
        "crates reaching what their job does not need (tests/tests/rules/deps.rs):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_plan_crate_does_no_io() {
    let mut found = Vec::new();
    for (path, text) in read_sources(&repo_root().join("crates/plan/src")) {
        for line in io_mentions(&path, &text) {
            found.push(format!("  {}:{line}", rel(&path)));
        }
    }
    assert!(
        found.is_empty(),
        "the plan crate names the standard library's I/O (it is data and arithmetic):\n{}",
        found.join("\n")
    );
}

// ---------------------------------------------------------------- the process

/// Files still holding a `Result<_, String>` outside test code, each with
/// what removes it: (path prefix, why).
const STRING_ERROR_ALLOWANCES: &[(&str, &str)] = &[(
    "crates/scenarios/src/vllm_fixture.rs",
    "test code: the module is declared under #[cfg(test)]",
)];

#[test]
fn a_made_up_process_breach_is_found() {
    let library = "[package]\nname = \"cicada-client\"\n[dependencies]\nclap.workspace = true\nanyhow.workspace = true\nlibc.workspace = true\nbytes.workspace = true\n[dev-dependencies]\nanyhow.workspace = true\n";
    assert_eq!(
        process_breaches(library),
        [
            "cicada-client -> clap",
            "cicada-client -> anyhow",
            "cicada-client -> libc"
        ]
    );
    let binary = "[package]\nname = \"cicada\"\n[dependencies]\nclap.workspace = true\nanyhow.workspace = true\nlibc.workspace = true\n";
    assert_eq!(process_breaches(binary), ["cicada -> libc"]);
    let sys = "[package]\nname = \"cicada-sys\"\n[dependencies]\nlibc.workspace = true\n";
    assert!(process_breaches(sys).is_empty());
    let text = "fn a() -> Result<(), String> { Ok(()) }\nfn b() -> std::result::Result<u8, std::string::String> { Ok(1) }\nfn c() -> Result<String, E> { todo!() }\nstruct S { r: Option<Result<Vec<u8>, String>> }\n#[cfg(test)]\nmod tests { fn d() -> Result<(), String> { Ok(()) } }\nimpl S { #[test] fn e() -> Result<(), String> { Ok(()) } }\n";
    assert_eq!(string_errors(Path::new("made-up.rs"), text), [1, 2, 4]);
}

#[test]
fn only_the_binaries_read_flags_or_carry_anyhow_and_only_sys_calls_libc() {
    let mut breaches = Vec::new();
    for dir in crates() {
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        breaches.extend(process_breaches(&text));
    }
    assert!(
        breaches.is_empty(),
        "only the binaries ({BINARIES:?}) depend on clap and anyhow, only {SYS} on libc \
         (tests/tests/rules/process.rs):\n{}",
        breaches.join("\n")
    );
}

#[test]
fn libraries_return_typed_errors() {
    let mut found = Vec::new();
    for dir in crates() {
        if BINARIES.iter().any(|b| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .ok()
                .and_then(|t| package_name(&t))
                .is_some_and(|p| p == *b)
        }) {
            continue;
        }
        for (path, text) in read_sources(&dir.join("src")) {
            let at = rel(&path);
            if STRING_ERROR_ALLOWANCES
                .iter()
                .any(|(p, _)| at.starts_with(p))
            {
                continue;
            }
            for line in string_errors(&path, &text) {
                found.push(format!("  {at}:{line}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a library returns a bare String as its error; give it a thiserror type:\n{}",
        found.join("\n")
    );
}
