//! The docs say what the code does: every command README.md and the user
//! guide (docs/guide/*.md) show runs as written, every relative link leads
//! somewhere, and the guide's reference pages name every backend, workload
//! and scenario key the code accepts.
//!
//! Each page's fenced blocks are read in order. An `sh` block runs: a page's
//! blocks are one bash script (`set -euo pipefail`), run in a scratch
//! directory holding the repository's `examples/` and `target/release/cicada`,
//! with `cicada` on the PATH and `cargo build` standing for the build this
//! test already has. A `toml` block must pass `cicada validate`; one without a
//! `[target]` table is a fragment, checked over the built-in mock's target. A
//! `text` block is output or a listing, shown and not run. A comment on the
//! line(s) before a fence says more (the guide's testing page lists them):
//! `<!-- not-run: why -->` skips it, `<!-- file: NAME -->` writes it as the
//! file NAME for later blocks, `<!-- background -->` starts it and goes on (it
//! must exit 0 by the page's end), `<!-- hosts: N -->` runs N copies at once
//! (each must exit 0), `<!-- env: NAME=VALUE -->` sets a variable the text
//! tells the reader to set. The test prints every block it runs or skips.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cicada_mock::{FaultRates, MockConfig};
use cicada_plan::shape::Ramp;
use cicada_scenarios::Scenario;
use cicada_scenarios::scenario::{
    AbortSpec, Backend, DatasetKind, HooksSpec, Load, Output, Pooling, RunSpec, Sampling,
    SaturationSpec, SteadySpec, StructuredSpec, Target, TokenizerSpec, WorkloadSpec,
    WorkloadTarget,
};
use cicada_scenarios::shape::{StageSpec, Sweep};
use cicada_tests::*;

/// The pages whose commands run: the README and the user guide.
fn pages() -> Vec<PathBuf> {
    let root = repo_root();
    let mut guide: Vec<PathBuf> = std::fs::read_dir(root.join("docs/guide"))
        .expect("docs/guide exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    let mut out = vec![root.join("README.md")];
    out.extend(guide);
    out
}

/// A page's path from the repository root, for messages.
fn name_of(page: &Path) -> String {
    page.strip_prefix(repo_root())
        .unwrap_or(page)
        .display()
        .to_string()
}

/// What the comments before a block ask of it.
#[derive(Debug, Default)]
struct Marks {
    not_run: Option<String>,
    file: Option<String>,
    background: bool,
    hosts: Option<u32>,
    env: Vec<(String, String)>,
}

/// One fenced code block.
#[derive(Debug)]
struct Block {
    /// Where it starts: `page:line` of its opening fence.
    at: String,
    lang: String,
    text: String,
    marks: Marks,
}

fn marks(at: &str, comments: &[String]) -> Marks {
    let mut m = Marks::default();
    for c in comments {
        let (key, value) = c.split_once(':').unwrap_or((c.as_str(), ""));
        let value = value.trim();
        match key.trim() {
            "not-run" => {
                assert!(!value.is_empty(), "{at}: not-run needs a reason");
                m.not_run = Some(value.to_string());
            }
            "file" => m.file = Some(value.to_string()),
            "background" => m.background = true,
            "hosts" => m.hosts = Some(value.parse().expect("hosts: N")),
            "env" => {
                for pair in value.split_whitespace() {
                    let (k, v) = pair.split_once('=').expect("env: NAME=VALUE");
                    m.env.push((k.to_string(), v.to_string()));
                }
            }
            other => panic!("{at}: unknown comment before a code block: {other:?}"),
        }
    }
    m
}

/// Every fenced block of a page, with the comments on the lines before it
/// (blank lines between them allowed). Fences may be indented (in a list);
/// the block's lines lose that indentation.
fn blocks(page: &str, md: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut comments: Vec<String> = Vec::new();
    let mut lines = md.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let t = line.trim();
        if let Some(c) = t.strip_prefix("<!--").and_then(|r| r.strip_suffix("-->")) {
            comments.push(c.trim().to_string());
            continue;
        }
        if t.is_empty() {
            continue;
        }
        let Some(lang) = t.strip_prefix("```") else {
            comments.clear();
            continue;
        };
        let at = format!("{page}:{}", i + 1);
        let indent = line.len() - line.trim_start().len();
        let mut text = String::new();
        let mut closed = false;
        for (_, l) in lines.by_ref() {
            if l.trim() == "```" {
                closed = true;
                break;
            }
            let lead = l.len() - l.trim_start().len();
            text.push_str(&l[lead.min(indent)..]);
            text.push('\n');
        }
        assert!(closed, "{at}: the code block never closes");
        assert!(
            !lang.trim().is_empty(),
            "{at}: say what the block is (```sh, ```toml, ```text, ...)"
        );
        let marks = marks(&at, &comments);
        comments.clear();
        out.push(Block {
            at,
            lang: lang.trim().to_string(),
            text,
            marks,
        });
    }
    out
}

/// Quote a word for bash.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

const PRELUDE: &str = r####"set -euo pipefail
exec 2>&1
__bg=()
__cleanup() {
    local j
    for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done
    wait 2>/dev/null || true
    echo "### cleaned up at $SECONDS s"
}
trap __cleanup EXIT
# the binary this test runs is built already; a release build would take
# most of an hour on a small machine
cargo() {
    case "$*" in
        "build --release" | build) echo "doc test: cicada is built: $(command -v cicada)" ;;
        *) echo "doc test: 'cargo $*' is not run here; mark its block not-run" >&2; return 1 ;;
    esac
}
"####;

/// What the test does with a block, for its listing; and the script lines
/// that do it (empty when nothing runs).
fn plan(b: &Block) -> (String, String) {
    if let Some(why) = &b.marks.not_run {
        return (format!("skipped: {why}"), String::new());
    }
    let mut script = format!(
        "echo {}\"$SECONDS s\"\n",
        quoted(&format!("### {} ({}) at ", b.at, b.lang))
    );
    let write = |name: &str, text: &str| {
        format!(
            "cat > {} <<'__CICADA_DOC_EOF__'\n{text}__CICADA_DOC_EOF__\n",
            quoted(name)
        )
    };
    let action = match b.lang.as_str() {
        "sh" => {
            let env: String = b
                .marks
                .env
                .iter()
                .map(|(k, v)| format!("export {k}={}\n", quoted(v)))
                .collect();
            let body = format!("{env}{}", b.text);
            if b.marks.background {
                script.push_str(&format!("( {body} ) &\n__bg+=($!)\n"));
                "run in the background".to_string()
            } else if let Some(n) = b.marks.hosts {
                script.push_str(&format!(
                    "__h=()\nfor __i in $(seq {n}); do ( {body} ) & __h+=($!); done\n\
                     for __p in \"${{__h[@]}}\"; do wait \"$__p\"; done\n"
                ));
                format!("run on {n} hosts at once")
            } else {
                script.push_str(&body);
                "run".to_string()
            }
        }
        "toml" => {
            let (name, text, how) = match &b.marks.file {
                Some(name) => (name.clone(), b.text.clone(), "written and validated"),
                None if b.text.lines().any(|l| l.trim() == "[target]") => (
                    format!("doc-{}.toml", b.at.rsplit(':').next().unwrap()),
                    b.text.clone(),
                    "validated",
                ),
                None => (
                    format!("doc-{}.toml", b.at.rsplit(':').next().unwrap()),
                    format!("{}\n[target]\nbackend = \"mock\"\n", b.text),
                    "validated over the mock's target",
                ),
            };
            script.push_str(&write(&name, &text));
            script.push_str(&format!("cicada validate {}\n", quoted(&name)));
            how.to_string()
        }
        _ => match &b.marks.file {
            Some(name) => {
                script.push_str(&write(name, &b.text));
                format!("written as {name}")
            }
            None => "shown (not a command)".to_string(),
        },
    };
    (action, script)
}

/// Ports the runnable blocks name on this machine's addresses: they must be
/// free before the pages run.
fn ports(text: &str) -> BTreeSet<u16> {
    let mut out = BTreeSet::new();
    for host in ["127.0.0.1:", "0.0.0.0:", "$COORDINATOR:"] {
        for (i, _) in text.match_indices(host) {
            let digits: String = text[i + host.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(p) = digits.parse() {
                out.insert(p);
            }
        }
    }
    out
}

/// Run one page's script in a fresh directory; its exit code and output.
fn run_page(script: &str, limit: Duration) -> (Option<i32>, String) {
    let dir = scratch();
    let root = repo_root();
    std::os::unix::fs::symlink(root.join("examples"), dir.path().join("examples")).unwrap();
    let release = dir.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    std::os::unix::fs::symlink(cicada(), release.join("cicada")).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(script)
        .current_dir(dir.path())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for var in [
        "CICADA_TOKEN",
        "CICADA_COORDINATOR",
        "CICADA_EXPECT_WORKERS",
        "CICADA_WEB_TOKEN",
        "CICADA_WORKER_BIN",
        "CICADA_LOG",
    ] {
        cmd.env_remove(var);
    }
    let child = cmd.spawn().expect("starting bash");
    let pgid = child.id() as i32;
    // a page that hangs is killed with everything it started
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(limit).is_err() {
            // SAFETY: kills the process group this test started
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    });
    let out = child.wait_with_output().expect("waiting for bash");
    let _ = done.send(());
    let _ = watchdog.join();
    // leftovers of the page (a mock it started) go with it
    // SAFETY: the process group this test started
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn every_command_in_the_readme_and_the_guide_runs_as_written() {
    let _g = serial();
    let mut listing = Vec::new();
    let mut scripts = Vec::new();
    let mut needed = BTreeSet::new();
    for page in pages() {
        let name = name_of(&page);
        let md = std::fs::read_to_string(&page).unwrap();
        let mut script = String::from(PRELUDE);
        let mut runs = false;
        for b in blocks(&name, &md) {
            let (action, lines) = plan(&b);
            if b.lang == "sh" && !lines.is_empty() {
                runs = true;
                needed.extend(ports(&b.text));
            }
            if b.lang == "toml" && !lines.is_empty() {
                runs = true;
            }
            listing.push(format!("{:<32} {:<5} {action}", b.at, b.lang));
            script.push_str(&lines);
        }
        script.push_str("for __p in ${__bg[@]+\"${__bg[@]}\"}; do wait \"$__p\"; done\necho \"### page done at $SECONDS s\"\n");
        if runs {
            scripts.push((name, script));
        }
    }
    eprintln!("doc blocks:\n{}", listing.join("\n"));
    let busy: Vec<u16> = needed
        .into_iter()
        .filter(|p| std::net::TcpListener::bind(("0.0.0.0", *p)).is_err())
        .collect();
    assert!(
        busy.is_empty(),
        "ports {busy:?} are in use on this machine; the docs' commands use them"
    );
    let mut failures = Vec::new();
    for (name, script) in scripts {
        let began = Instant::now();
        let (code, output) = run_page(&script, Duration::from_secs(600));
        eprintln!("{name}: exit {code:?} in {:.1?}", began.elapsed());
        for step in output.lines().filter(|l| l.starts_with("### ")) {
            eprintln!("  {step}");
        }
        if code != Some(0) || !output.contains("### page done") {
            let last = output
                .lines()
                .rev()
                .find(|l| l.starts_with("### ") && !l.starts_with("### cleaned up"))
                .unwrap_or("### (before the first block)");
            let tail: Vec<&str> = output.lines().rev().take(60).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            failures.push(format!(
                "{name}: exit {code:?}; the last block started: {}\n{}",
                last.trim_start_matches("### "),
                tail.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The README's test command is the one CI runs.
#[test]
fn the_readme_test_command_is_what_ci_runs() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let shown: Vec<String> = blocks("README.md", &readme)
        .into_iter()
        .filter(|b| b.text.starts_with("cargo test"))
        .map(|b| b.text.trim().to_string())
        .collect();
    let ci = std::fs::read_to_string(repo_root().join(".ci/run")).unwrap();
    let last = ci
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap()
        .to_string();
    assert_eq!(shown, vec![last], "README's test command against .ci/run's");
}

/// GitHub's anchor for a heading: lower case, letters, digits, `-` and `_`
/// kept, spaces made `-`, everything else dropped.
fn slug(heading: &str) -> String {
    // a link in a heading counts by its text
    let mut text = String::new();
    let mut rest = heading;
    while let Some(i) = rest.find("](") {
        let close = rest[i..].find(')').map_or(rest.len(), |j| i + j + 1);
        text.push_str(&rest[..i]);
        rest = &rest[close..];
    }
    text.push_str(rest);
    text.chars()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a Markdown page offers: its headings' slugs (numbered as
/// GitHub numbers repeats) and its `<a id="...">` tags.
fn anchors(md: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(h) = line.strip_prefix('#') {
            let h = h.trim_start_matches('#');
            if h.starts_with(' ') {
                let s = slug(h.trim());
                let n = seen.entry(s.clone()).or_default();
                out.insert(if *n == 0 {
                    s.clone()
                } else {
                    format!("{s}-{n}")
                });
                *n += 1;
            }
        }
        for (i, _) in line.match_indices("<a id=\"") {
            let id: String = line[i + 7..].chars().take_while(|c| *c != '"').collect();
            out.insert(id);
        }
    }
    out
}

/// The link targets of a page, outside code: `(line, target)`.
fn links(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // inline code holds no links
        let plain: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        for (i, _) in plain.match_indices("](") {
            let target: String = plain[i + 2..].chars().take_while(|c| *c != ')').collect();
            out.push((n + 1, target));
        }
    }
    out
}

#[test]
fn relative_links_lead_to_a_file_and_heading() {
    let root = repo_root();
    let mut pages = pages();
    pages.extend(
        [
            "docs/METRICS.md",
            "docs/PERFORMANCE.md",
            "deploy/k8s/README.md",
        ]
        .map(|p| root.join(p)),
    );
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let md = std::fs::read_to_string(page).unwrap();
        for (line, target) in links(&md) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            let at = format!("{}:{line}: {target}", name_of(page));
            if !dest.exists() {
                broken.push(format!("{at}: no such file"));
                continue;
            }
            if !anchor.is_empty() {
                let text = std::fs::read_to_string(&dest).unwrap_or_default();
                if !anchors(&text).contains(anchor) {
                    broken.push(format!("{at}: no such heading or anchor"));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser right?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The keys a derived `Deserialize` struct accepts, read off what it asks a
/// deserializer for (the types are the one list of keys).
fn keys_of<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::{self, Deserializer, Visitor};
    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("fields read"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    assert!(
        !fields.is_empty(),
        "{} lists no keys",
        std::any::type_name::<T>()
    );
    fields
}

/// [`keys_of`] the type of a value (for types this crate cannot name).
fn keys_like<T: serde::de::DeserializeOwned>(_: &T) -> &'static [&'static str] {
    keys_of::<T>()
}

/// A page names a key as `` `key` ``, `` `[key]` ``, or writes `key = ` in a block.
fn names(text: &str, key: &str) -> bool {
    [
        format!("`{key}`"),
        format!("`[{key}]`"),
        format!("`[[{key}]]`"),
        format!("\n{key} ="),
        format!("{{ {key} ="),
    ]
    .iter()
    .any(|form| text.contains(form))
}

#[test]
fn the_guide_names_every_backend_workload_and_scenario_key() {
    let guide =
        |page: &str| std::fs::read_to_string(repo_root().join("docs/guide").join(page)).unwrap();
    let (backends, workloads, scenario, mock) = (
        guide("backends.md"),
        guide("workloads.md"),
        guide("scenario.md"),
        guide("mock.md"),
    );
    let mut missing = Vec::new();
    for b in Backend::ALL {
        if !names(&backends, b.name()) {
            missing.push(format!("backends.md: backend `{}`", b.name()));
        }
    }
    for k in DatasetKind::ALL {
        if !names(&workloads, k.name()) {
            missing.push(format!("workloads.md: kind `{}`", k.name()));
        }
        for key in k.keys() {
            if !names(&workloads, key) {
                missing.push(format!("workloads.md: `{}` of kind {}", key, k.name()));
            }
        }
    }
    let s = Scenario::default();
    let sections: [(&str, &[&str]); 20] = [
        ("", keys_of::<Scenario>()),
        ("target", keys_of::<Target>()),
        ("tokenizer", keys_of::<TokenizerSpec>()),
        ("load", keys_of::<Load>()),
        ("load.ramp", keys_of::<Ramp>()),
        ("stages", keys_of::<StageSpec>()),
        ("sweep", keys_of::<Sweep>()),
        ("sampling", keys_of::<Sampling>()),
        ("structured", keys_of::<StructuredSpec>()),
        ("slo", keys_like(&s.slo)),
        ("pooling", keys_of::<Pooling>()),
        ("output", keys_of::<Output>()),
        ("run", keys_of::<RunSpec>()),
        ("hooks", keys_of::<HooksSpec>()),
        ("steady_state", keys_of::<SteadySpec>()),
        ("saturation", keys_of::<SaturationSpec>()),
        ("abort", keys_of::<AbortSpec>()),
        ("workloads", keys_of::<WorkloadSpec>()),
        ("workloads.target", keys_of::<WorkloadTarget>()),
        ("mock", &["mock.faults"]),
    ];
    for (section, keys) in sections {
        for key in keys {
            if !names(&scenario, key) {
                missing.push(format!("scenario.md: `{key}` of [{section}]"));
            }
        }
    }
    // the mock's keys are its flags: `ttft_ms` is `--ttft-ms`
    for key in keys_of::<MockConfig>().iter().filter(|k| **k != "faults") {
        if !mock.contains(&format!("--{}", key.replace('_', "-"))) {
            missing.push(format!("mock.md: `--{}`", key.replace('_', "-")));
        }
    }
    for key in keys_of::<FaultRates>() {
        if !mock.contains(&format!("--fault-{}", key.replace('_', "-"))) {
            missing.push(format!("mock.md: `--fault-{}`", key.replace('_', "-")));
        }
    }
    assert!(
        missing.is_empty(),
        "not in the guide:\n{}",
        missing.join("\n")
    );
}
