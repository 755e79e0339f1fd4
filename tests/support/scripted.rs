//! A scripted HTTP/1.1 server for tests of what the client does with odd
//! servers: each request's method and path pick a canned answer, or
//! silence (the connection stays open and nothing is ever written, as a
//! wedged server does). Every connection is closed after its answer.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the server does with one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Read the request, never answer, keep the connection open.
    Silent,
    /// Answer with this status, extra header lines (`Name: value`) and body.
    Answer {
        status: u16,
        headers: Vec<String>,
        body: String,
    },
}

impl Reply {
    /// `200 OK` with a JSON body.
    pub fn json(body: &str) -> Reply {
        Reply::Answer {
            status: 200,
            headers: vec!["Content-Type: application/json".into()],
            body: body.into(),
        }
    }

    /// A redirect to `location`.
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::Answer {
            status,
            headers: vec![format!("Location: {location}")],
            body: String::new(),
        }
    }
}

type Script = dyn Fn(&str, &str) -> Reply + Send + Sync;

/// A running scripted server on loopback; stops when dropped.
pub struct Scripted {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<String>>>,
    accept: Option<JoinHandle<()>>,
}

impl Scripted {
    /// Serve `script(method, path)` for every request.
    pub fn start(script: impl Fn(&str, &str) -> Reply + Send + Sync + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let url = format!("http://{}", listener.local_addr().expect("local address"));
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let accept = {
            let (stop, seen) = (stop.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut workers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            let (stop, seen, script) = (stop.clone(), seen.clone(), script.clone());
                            workers.push(std::thread::spawn(move || {
                                serve(conn, &*script, &seen, &stop)
                            }));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
                for w in workers {
                    let _ = w.join();
                }
            })
        };
        Scripted {
            url,
            stop,
            seen,
            accept: Some(accept),
        }
    }

    /// Every request so far, as `METHOD /path`.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
    }
}

/// Read one request head (and its body), answer it per `script`, close.
fn serve(mut conn: TcpStream, script: &Script, seen: &Mutex<Vec<String>>, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match conn.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    // read the body too: closing on unread bytes would reset the connection
    // and lose the answer
    while buf.len() < head_end + length && !stop.load(Ordering::Relaxed) {
        match conn.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    seen.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(format!("{method} {path}"));
    match script(method, path) {
        Reply::Silent => {
            // hold the connection open, unanswered, until the server stops
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Reply::Answer {
            status,
            headers,
            body,
        } => {
            let mut out = format!("HTTP/1.1 {status} Scripted\r\n");
            for h in headers {
                out.push_str(&h);
                out.push_str("\r\n");
            }
            out.push_str(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ));
            let _ = conn.write_all(out.as_bytes());
        }
    }
}
