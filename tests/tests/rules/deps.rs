//! What a crate may reach: the workspace crates its manifest depends on,
//! and the doors it leaves open.

use std::path::Path;

use syn::visit::Visit;

use super::source::parse;

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
pub fn allowed(package: &str) -> Option<&'static [&'static str]> {
    Some(match package {
        "cicada-metrics" | "cicada-alias" => &[],
        "cicada-request" => &["cicada-metrics"],
        "cicada-plan" => &["cicada-metrics", "cicada-request"],
        "cicada-scenarios" => &[
            "cicada-metrics",
            "cicada-mock",
            "cicada-plan",
            "cicada-request",
        ],
        "cicada-proto" => &["cicada-metrics", "cicada-plan", "cicada-request"],
        "cicada-client" => &["cicada-metrics", "cicada-plan", "cicada-request"],
        "cicada-mock" => &["cicada-metrics", "cicada-request"],
        "cicada-results" => &["cicada-metrics", "cicada-plan", "cicada-scenarios"],
        "cicada-target" => &[
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
            "cicada-scenarios",
        ],
        "cicada-coordinator" => &[
            "cicada-client",
            "cicada-metrics",
            "cicada-mock",
            "cicada-plan",
            "cicada-proto",
            "cicada-results",
            "cicada-scenarios",
            "cicada-target",
        ],
        "cicada-bench" => &[
            "cicada-client",
            "cicada-coordinator",
            "cicada-metrics",
            "cicada-proto",
        ],
        "cicada" => &[
            "cicada-bench",
            "cicada-client",
            "cicada-coordinator",
            "cicada-results",
            "cicada-worker",
        ],
        _ => return None,
    })
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
