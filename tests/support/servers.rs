//! Real inference servers for the end-to-end tests: llama.cpp's `llama-server`
//! and vLLM (CPU build), installed by the project's own scripts
//! (`scripts/llama-server.sh`, `scripts/vllm-server.sh`) into a cache outside
//! the clone, with tiny random-weight models the scripts write. The first use
//! on a machine pays the build or install (minutes, said on stderr); a missing
//! prerequisite fails the test with the script's message. Nothing is skipped.
//!
//! Servers run in their own process group and die with the test process
//! (`PR_SET_PDEATHSIG`, plus a kill of the group when a server is dropped or,
//! for the shared vLLM server, when the test process exits).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::{free_port, repo_root};

/// Run an install script and return its version directory (its last stdout line).
pub fn install(script: &str) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let path = repo_root().join("scripts").join(script);
    eprintln!(
        "{}: installing or checking the real server (the first run on a machine builds it)",
        path.display()
    );
    let out = Command::new(&path)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    assert!(
        out.status.success(),
        "{} failed ({}): see its messages above",
        path.display(),
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout
        .lines()
        .last()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| panic!("{} printed no directory", path.display()));
    PathBuf::from(dir)
}

/// The core real servers run on; clients run on [`CLIENT_CORE`], so neither
/// measures the other's CPU contention (a Python client sharing cores with a
/// busy server reads its stream late and reports the delay as latency).
pub const SERVER_CORE: usize = 0;
/// The core the clients (`cicada` and its workers, `vllm bench serve`) run on.
pub const CLIENT_CORE: usize = 1;

/// Run `cmd`'s process (and what it spawns) on `core` only.
pub fn pin(cmd: &mut Command, core: usize) {
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(core, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        });
    }
}

/// `cicada` with `args`, pinned to [`CLIENT_CORE`] (its workers inherit it).
pub fn coord_run_pinned(args: &[&str], limit: Duration) -> crate::Run {
    let mut cmd = Command::new(crate::cicada());
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    pin(&mut cmd, CLIENT_CORE);
    let child = cmd.spawn().expect("starting coord");
    crate::wait_with_limit(child, limit)
}

/// Make `cmd`'s process lead its own group, die when its parent thread dies,
/// and (when `core` is given) run on that core only.
pub(crate) fn confine(cmd: &mut Command, core: Option<usize>) {
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if let Some(core) = core {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(core, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
            Ok(())
        });
    }
}

/// Stop a process group: SIGTERM, then SIGKILL after `grace`.
pub(crate) fn stop_group(child: &mut Child, grace: Duration) {
    let pgid = child.id() as i32;
    // SAFETY: signalling a process group we created.
    unsafe {
        libc::kill(-pgid, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: as above; the group may already be gone.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// The tail of a server's log, for failure messages.
pub(crate) fn log_tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Wait until `url` answers 200, or panic with the server's log.
pub(crate) fn wait_healthy(child: &mut Child, url: &str, log: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "the server exited ({status}) before it was ready; its log:\n{}",
                log_tail(log)
            );
        }
        if matches!(crate::try_get_text(url), Some((200, _))) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{url} not healthy within {limit:?}; the server's log:\n{}",
            log_tail(log)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A running `llama-server` with the tiny model.
pub struct LlamaServer {
    child: Child,
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    /// Parallel slots (`--parallel`).
    pub slots: u32,
    /// Context of one slot, in tokens.
    pub ctx_per_slot: u32,
    /// The model's tokenizer as a Hugging Face `tokenizer.json`.
    pub tokenizer: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl LlamaServer {
    /// Start llama-server with `slots` slots of `ctx_per_slot` tokens each, on one core.
    pub fn start(slots: u32, ctx_per_slot: u32) -> LlamaServer {
        Self::start_with(slots, ctx_per_slot, &[])
    }

    /// [`LlamaServer::start`] with more llama-server flags (`--ignore-eos`, a
    /// chat template, a reasoning format).
    pub fn start_with(slots: u32, ctx_per_slot: u32, flags: &[&str]) -> LlamaServer {
        Self::start_model("tiny-llama.gguf", slots, ctx_per_slot, flags)
    }

    /// [`LlamaServer::start_with`] serving another model `llama-server.sh`
    /// wrote (`tiny-reranker.gguf`), named by its file in `models/`.
    pub fn start_model(model: &str, slots: u32, ctx_per_slot: u32, flags: &[&str]) -> LlamaServer {
        let dir = install("llama-server.sh");
        let scratch = crate::scratch();
        let log = scratch.path().join("llama-server.log");
        let port = free_port();
        let mut cmd = Command::new(dir.join("bin/llama-server"));
        cmd.args(["-m"])
            .arg(dir.join("models").join(model))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--parallel", &slots.to_string()])
            .args(["--ctx-size", &(slots * ctx_per_slot).to_string()])
            .args(["--threads", "1", "--threads-batch", "1"])
            .args(["--jinja", "--metrics", "--no-webui"])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("server log"))
            .stderr(std::fs::File::create(log.with_extension("err")).expect("server log"));
        confine(&mut cmd, Some(SERVER_CORE));
        let mut child = cmd.spawn().expect("starting llama-server");
        let url = format!("http://127.0.0.1:{port}");
        wait_healthy(
            &mut child,
            &format!("{url}/health"),
            &log.with_extension("err"),
            Duration::from_secs(120),
        );
        LlamaServer {
            child,
            url,
            slots,
            ctx_per_slot,
            tokenizer: dir.join("models/tokenizer.json"),
            log,
            _dir: scratch,
        }
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        log_tail(&self.log.with_extension("err"))
    }

    /// The server's log file (`--verbose` puts each task's parameters in it).
    pub fn log_path(&self) -> PathBuf {
        self.log.with_extension("err")
    }

    /// Requests the server took up so far, by its own log: one
    /// `processing task` line per request a slot started on.
    pub fn tasks_started(&self) -> usize {
        std::fs::read_to_string(self.log.with_extension("err"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("| processing task"))
            .count()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        stop_group(&mut self.child, Duration::from_secs(5));
    }
}

/// A running vLLM server with the tiny model, shared by every test of one
/// test binary (it takes about a minute to start).
pub struct VllmServer {
    /// Base URL.
    pub url: String,
    /// The model directory (also the tokenizer).
    pub model: PathBuf,
    /// The model id the server serves.
    pub name: String,
    /// The `vllm` executable of the venv (for `vllm bench serve`).
    pub vllm: PathBuf,
    /// `env.sh`'s variables, for running `vllm bench serve` beside it.
    pub env: Vec<(String, String)>,
    /// The server's log (stdout and stderr).
    pub log: PathBuf,
}

impl VllmServer {
    /// The server's whole log so far (`--enable-log-requests` puts a line
    /// per request in it, naming its LoRA adapter).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The tail of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }
}

/// A program of the venv `scripts/vllm-server.sh` installs (`vllm`,
/// `python`), with its environment (offline; no server is started).
pub fn vllm_venv(program: &str) -> Command {
    let dir = install("vllm-server.sh");
    let mut cmd = Command::new(dir.join("venv/bin").join(program));
    cmd.envs(read_env(&dir.join("env.sh"))).stdin(Stdio::null());
    cmd
}

/// The directory of the tiny model `scripts/vllm-server.sh` makes (its
/// `tokenizer.json` and the transformers config files beside it).
pub fn vllm_tiny_model() -> PathBuf {
    let dir = install("vllm-server.sh");
    read_env(&dir.join("env.sh"))
        .into_iter()
        .find(|(k, _)| k == "VLLM_TINY_MODEL")
        .map(|(_, v)| PathBuf::from(v))
        .unwrap_or_else(|| panic!("{}: no VLLM_TINY_MODEL", dir.join("env.sh").display()))
}

/// `vllm bench serve`, vLLM's own client (point it at any server).
pub fn vllm_bench_serve() -> Command {
    let mut cmd = vllm_venv("vllm");
    cmd.args(["bench", "serve"]);
    cmd
}

/// `flag` with each `${NAME}` replaced by `env.sh`'s NAME (a path the
/// install script wrote, e.g. a LoRA adapter's directory).
fn expand(flag: &str, env: &[(String, String)]) -> String {
    let mut out = flag.to_string();
    for (k, v) in env {
        out = out.replace(&format!("${{{k}}}"), v);
    }
    assert!(
        !out.contains("${"),
        "{flag}: a variable env.sh does not set"
    );
    out
}

/// Variables exported by an `env.sh` (lines `export K="V"`).
pub(crate) fn read_env(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let v = v.trim_matches('"');
            let v = v.replace("$PATH", &std::env::var("PATH").unwrap_or_default());
            (k.to_string(), v.replace('\\', ""))
        })
        .collect()
}

/// The flags every test's vLLM server gets besides its own.
const VLLM_FLAGS: &[&str] = &["--dtype", "float32"];
/// The tiny model's context.
const TINY_LEN: &[&str] = &["--max-model-len", "2048"];

impl VllmServer {
    /// The shared server, started on first use.
    pub fn shared() -> &'static VllmServer {
        Self::shared_with(&[])
    }

    /// The shared server started with more `vllm serve` flags (a tool-call
    /// parser, a structured-outputs config); one test binary uses one set.
    pub fn shared_with(flags: &'static [&'static str]) -> &'static VllmServer {
        static SERVER: OnceLock<(&'static [&'static str], VllmServer)> = OnceLock::new();
        let (started, server) = SERVER.get_or_init(|| (flags, Self::start(None, TINY_LEN, flags)));
        assert_eq!(
            *started, flags,
            "one test binary shares one vLLM server: start it with one set of flags"
        );
        server
    }

    /// The shared server serving another model `vllm-server.sh` wrote (the
    /// `env.sh` variable `model_var` names its directory, e.g.
    /// `VLLM_TINY_WHISPER`), with `flags` (its context length among them).
    pub fn shared_model(model_var: &str, flags: &'static [&'static str]) -> &'static VllmServer {
        static SERVER: OnceLock<VllmServer> = OnceLock::new();
        SERVER.get_or_init(|| Self::start(Some(model_var), &[], flags))
    }

    /// The shared server started in vLLM's development mode
    /// (`VLLM_SERVER_DEV_MODE=1`, which serves `/reset_prefix_cache`), with
    /// `flags`; a test binary uses it instead of [`VllmServer::shared_with`].
    pub fn shared_dev(flags: &'static [&'static str]) -> &'static VllmServer {
        static SERVER: OnceLock<VllmServer> = OnceLock::new();
        SERVER.get_or_init(|| {
            Self::start_env(None, TINY_LEN, flags, &[("VLLM_SERVER_DEV_MODE", "1")])
        })
    }

    /// A server of the caller's own with more `vllm serve` flags, beside the
    /// binary's shared one (e.g. the same model without a prefix cache);
    /// it lives until the test binary ends.
    pub fn started_with(flags: &[&str]) -> VllmServer {
        Self::start(None, TINY_LEN, flags)
    }

    fn start(model_var: Option<&str>, len: &[&str], flags: &[&str]) -> VllmServer {
        Self::start_env(model_var, len, flags, &[])
    }

    fn start_env(
        model_var: Option<&str>,
        len: &[&str],
        flags: &[&str],
        more_env: &[(&str, &str)],
    ) -> VllmServer {
        let dir = install("vllm-server.sh");
        let env = read_env(&dir.join("env.sh"));
        let var = |k: &str| {
            env.iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| PathBuf::from(v))
                .unwrap_or_else(|| panic!("{}: no {k}", dir.join("env.sh").display()))
        };
        let model = var(model_var.unwrap_or("VLLM_TINY_MODEL"));
        let vllm = dir.join("venv/bin/vllm");
        let name = "tiny".to_string();
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let log =
            std::env::temp_dir().join(format!("cicada-vllm-{}-{port}.log", std::process::id()));
        let (tx, rx) = std::sync::mpsc::channel();
        let mut envs = env.clone();
        envs.extend(more_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let (vllm_bin, model_dir, log_path) = (vllm.clone(), model.clone(), log.clone());
        let flags: Vec<String> = VLLM_FLAGS
            .iter()
            .chain(len)
            .chain(flags)
            .map(|f| expand(f, &env))
            .collect();
        // the thread that spawns the server lives as long as the process:
        // PR_SET_PDEATHSIG fires when the spawning *thread* ends
        std::thread::spawn(move || {
            let mut cmd = Command::new(&vllm_bin);
            cmd.arg("serve")
                .arg(&model_dir)
                .args(["--served-model-name", "tiny"])
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(&flags)
                .envs(envs)
                // one core for the server, the other for the clients
                .env("OMP_NUM_THREADS", "1")
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&log_path).expect("vllm log"))
                .stderr(Stdio::from(
                    std::fs::File::options()
                        .append(true)
                        .open(&log_path)
                        .expect("vllm log"),
                ));
            confine(&mut cmd, Some(SERVER_CORE));
            let child = cmd.spawn();
            let _ = tx.send(child);
            loop {
                std::thread::park();
            }
        });
        let mut child = rx
            .recv()
            .expect("the vLLM spawning thread")
            .unwrap_or_else(|e| panic!("starting {}: {e}", vllm.display()));
        let pgid = child.id() as i32;
        stop_at_exit(pgid, log.clone());
        wait_healthy(
            &mut child,
            &format!("{url}/health"),
            &log,
            Duration::from_secs(300),
        );
        // the child handle stays with the process; the group dies at exit
        std::mem::forget(child);
        VllmServer {
            url,
            model,
            name,
            vllm,
            env,
            log,
        }
    }
}

/// Kill process group `pgid` when this process exits normally.
fn stop_at_exit(pgid: i32, log: PathBuf) {
    static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
    // a failing test printed the log's tail already; CICADA_KEEP_SERVER_LOGS keeps them
    static LOGS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    extern "C" fn kill_groups() {
        let groups = GROUPS.lock().map(|g| g.clone()).unwrap_or_default();
        for g in groups {
            // SAFETY: signalling process groups this process created.
            unsafe {
                libc::kill(-g, libc::SIGTERM);
            }
        }
        std::thread::sleep(Duration::from_secs(2));
        for g in GROUPS.lock().map(|g| g.clone()).unwrap_or_default() {
            // SAFETY: as above.
            unsafe {
                libc::kill(-g, libc::SIGKILL);
            }
        }
        if std::env::var_os("CICADA_KEEP_SERVER_LOGS").is_none() {
            for log in LOGS.lock().map(|l| l.clone()).unwrap_or_default() {
                let _ = std::fs::remove_file(log);
            }
        }
    }
    let mut groups = GROUPS.lock().unwrap_or_else(|p| p.into_inner());
    if groups.is_empty() {
        // SAFETY: registering a plain extern "C" function.
        unsafe {
            libc::atexit(kill_groups);
        }
    }
    groups.push(pgid);
    LOGS.lock().unwrap_or_else(|p| p.into_inner()).push(log);
}
