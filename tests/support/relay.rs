//! A TCP relay that makes one direction of a link slow: what the upstream
//! sends reaches the client `delay` later (in order), what the client sends
//! goes through at once. Stands in for a far or congested link where the
//! machine has no `netem`.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A listening relay to `upstream`; it serves every client that connects
/// (one that dials before the upstream listens is dropped and may retry).
#[derive(Debug)]
pub struct SlowDownlink {
    /// Where the client dials.
    pub addr: SocketAddr,
}

impl SlowDownlink {
    /// Listen on loopback; bytes from `upstream` reach the client `delay` late.
    pub fn start(upstream: SocketAddr, delay: Duration) -> SlowDownlink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the relay");
        let addr = listener.local_addr().expect("the relay's address");
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(up) = TcpStream::connect(upstream) else {
                    continue;
                };
                thread::spawn(move || relay(client, up, delay));
            }
        });
        SlowDownlink { addr }
    }
}

/// Relay one connection: client to upstream at once, upstream to client late.
fn relay(client: TcpStream, up: TcpStream, delay: Duration) {
    let _ = client.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let (c2, u2) = match (client.try_clone(), up.try_clone()) {
        (Ok(c), Ok(u)) => (c, u),
        _ => return,
    };
    thread::spawn(move || pump(c2, u2));
    // upstream -> client, each chunk held until `delay` after it came
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let mut up_read = up;
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = up_read.read(&mut buf) {
            if n == 0
                || tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    });
    let mut client = client;
    for (due, bytes) in rx {
        thread::sleep(due.saturating_duration_since(Instant::now()));
        if client.write_all(&bytes).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Write);
}

/// Copy `from` to `to` until either side closes.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
