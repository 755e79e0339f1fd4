//! Headless Chromium driven over the DevTools protocol, for tests that use
//! a page as a person does: type into a form, click a button, read the DOM,
//! take a screenshot. The protocol runs over a pair of pipes
//! (`--remote-debugging-pipe`: commands on the browser's fd 3, answers and
//! events on its fd 4, each message JSON ended by a NUL byte), so no port
//! is opened and no WebSocket client is needed.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Child;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

/// Longest one command may take to be answered (a busy 2-core machine
/// starts Chromium slowly).
const ANSWER_LIMIT: Duration = Duration::from_secs(60);

/// A page in a headless Chromium the test drives.
pub struct Tab {
    child: Child,
    commands: std::fs::File,
    messages: Receiver<Value>,
    session: String,
    next_id: u64,
    /// Console messages, uncaught exceptions and error log entries seen so far.
    problems: Vec<String>,
    _profile: tempfile::TempDir,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 succeeded, so both descriptors are open and ours alone.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// In the child, before exec: `read` becomes fd 3 and `write` fd 4 (dup2
/// clears close-on-exec on the copies; the originals close at exec).
fn wire_child(cmd: &mut std::process::Command, read: RawFd, write: RawFd) {
    // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::fcntl(read, libc::F_DUPFD_CLOEXEC, 10);
            let w = libc::fcntl(write, libc::F_DUPFD_CLOEXEC, 10);
            if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A one-line account of a problem event, or `None` for any other message.
fn problem(msg: &Value) -> Option<String> {
    let p = &msg["params"];
    match msg["method"].as_str()? {
        "Runtime.consoleAPICalled" => Some(format!("console.{}: {}", p["type"], p["args"])),
        "Runtime.exceptionThrown" => Some(format!("uncaught: {}", p["exceptionDetails"])),
        "Log.entryAdded" if p["entry"]["level"] == "error" => Some(format!("log: {}", p["entry"])),
        _ => None,
    }
}

impl Tab {
    /// Start Chromium with a `width` x `height` window, attach to its page,
    /// switch on console and log reports, and load `url`.
    pub fn open(url: &str, width: u32, height: u32) -> Tab {
        let profile = crate::scratch();
        let (to_browser_r, to_browser_w) = pipe();
        let (from_browser_r, from_browser_w) = pipe();
        let mut cmd = super::browser(profile.path());
        cmd.arg("--remote-debugging-pipe")
            .arg(format!("--window-size={width},{height}"))
            .arg("about:blank")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        use std::os::fd::AsRawFd;
        wire_child(
            &mut cmd,
            to_browser_r.as_raw_fd(),
            from_browser_w.as_raw_fd(),
        );
        let child = cmd.spawn().expect("starting chromium");
        drop((to_browser_r, from_browser_w));
        let (tx, messages) = channel();
        let reader = std::fs::File::from(from_browser_r);
        std::thread::spawn(move || {
            for chunk in BufReader::new(reader).split(0) {
                let Ok(bytes) = chunk else { return };
                if let Ok(v) = serde_json::from_slice::<Value>(&bytes)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let mut tab = Tab {
            child,
            commands: std::fs::File::from(to_browser_w),
            messages,
            session: String::new(),
            next_id: 0,
            problems: Vec::new(),
            _profile: profile,
        };
        tab.attach();
        tab.call("Page.navigate", json!({ "url": url }));
        tab
    }

    fn attach(&mut self) {
        let targets = self.browser_call("Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["targetId"].as_str())
            .unwrap_or_else(|| panic!("chromium has no page: {targets}"))
            .to_string();
        let attached = self.browser_call(
            "Target.attachToTarget",
            json!({ "targetId": page, "flatten": true }),
        );
        self.session = attached["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {attached}"))
            .to_string();
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            self.call(domain, json!({}));
        }
    }

    fn send(&mut self, method: &str, params: Value, session: bool) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if session {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        self.commands
            .write_all(&bytes)
            .unwrap_or_else(|e| panic!("{method}: writing to chromium: {e}"));
        let deadline = Instant::now() + ANSWER_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = match self.messages.recv_timeout(left) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => panic!("{method}: chromium never answered"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: chromium went away"),
            };
            if let Some(p) = problem(&msg) {
                self.problems.push(p);
            } else if msg["id"] == id {
                if let Some(e) = msg.get("error") {
                    panic!("{method}: chromium refused: {e}");
                }
                return msg["result"].clone();
            }
        }
    }

    fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, false)
    }

    /// One protocol command on the page; its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, true)
    }

    /// The value of a JavaScript expression in the page (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("`{expression}` threw: {e}");
        }
        r["result"]["value"].clone()
    }

    /// Wait (up to `limit`) until `expression` is true in the page (while
    /// the page is still loading it may throw: that counts as not yet).
    pub fn wait_for(&mut self, expression: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        let guarded = format!(
            "(function(){{try{{return ({expression})===true;}}catch(e){{return false;}}}})()"
        );
        while self.eval(&guarded) != json!(true) {
            assert!(
                Instant::now() < deadline,
                "the page never showed `{expression}`"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Click the middle of the element `selector` names with the mouse, as a person does.
    pub fn click(&mut self, selector: &str) {
        let sel = serde_json::to_string(selector).expect("a selector is a string");
        let at = self.eval(&format!(
            "(function(){{var e=document.querySelector({sel});if(!e){{return null;}}\
             e.scrollIntoView({{block:'center'}});var r=e.getBoundingClientRect();\
             return [r.left+r.width/2,r.top+r.height/2];}})()"
        ));
        let (x, y) = match (at[0].as_f64(), at[1].as_f64()) {
            (Some(x), Some(y)) => (x, y),
            _ => panic!("no element `{selector}` to click"),
        };
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
            );
        }
    }

    /// Click the field `selector` names, select what it holds and type `text` over it.
    pub fn type_into(&mut self, selector: &str, text: &str) {
        self.click(selector);
        let sel = serde_json::to_string(selector).expect("a selector is a string");
        self.eval(&format!("document.querySelector({sel}).select()"));
        self.call("Input.insertText", json!({ "text": text }));
    }

    /// Save a PNG of the window to `out`.
    pub fn screenshot(&mut self, out: &Path) {
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        let data = shot["data"].as_str().expect("screenshot data");
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("the screenshot is base64");
        std::fs::write(out, png).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    }

    /// Console messages, uncaught exceptions and error log entries so far
    /// (a page that logs nothing on purpose has none).
    pub fn problems(&mut self) -> Vec<String> {
        while let Ok(msg) = self.messages.try_recv() {
            if let Some(p) = problem(&msg) {
                self.problems.push(p);
            }
        }
        self.problems.clone()
    }
}

impl Drop for Tab {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
