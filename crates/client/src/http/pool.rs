//! Each origin's connections, and what its server has taught us about
//! reusing them.
//!
//! A request may go again only when it provably never reached the server
//! (see `send`), so the pool must not hand out a connection the server is
//! about to close. Servers differ: some keep connections alive (vLLM's
//! uvicorn, for 5 s of idleness), some close after every response
//! (llama.cpp's `llama-server`, which also reads and discards what arrives
//! after its close, so a request that crosses the close leaves no proof of
//! being unread; a busy one closes tens of milliseconds late). The pool
//! learns which kind an origin is before it reuses anything, from
//! connections it does not hand out again while it learns:
//!
//! - **Unknown** (the start): a connection whose response ended is parked
//!   and checked once its settle window has passed (20 ms, or four round
//!   trips when longer); requests meanwhile open fresh connections.
//! - Found closed less than [`CLOSES_SOON`] after its response (then or at
//!   any later time): the origin **closes after every response**, and no
//!   connection of it is ever reused (each request opens its own).
//! - Found open past its window [`OPEN_SEEN`] times: the origin **keeps
//!   connections alive**, and parked ones are reused.
//! - Found closed later than that: the server's idle timeout; connections
//!   idle for 80 % of it are not reused again.
//! - A request that got no answer on a reused connection is evidence the
//!   same way, by how long its connection had been idle.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::conn::Conn;
use super::h1::H1Conn;
use super::h2::H2Conn;

/// Shortest time a connection stays parked before it may tell whether the
/// server closes connections after each response.
const SETTLE: Duration = Duration::from_millis(20);
/// Idle connections older than this are closed rather than reused.
const MAX_IDLE: Duration = Duration::from_secs(90);
/// A server that closed a connection this soon after its response closes
/// after responses (idle timeouts are seconds: uvicorn's 5 s, nginx's 75 s).
const CLOSES_SOON: Duration = Duration::from_secs(1);
/// Connections seen still open past their settle window before reuse begins.
const OPEN_SEEN: u32 = 3;

/// What the origin's server does with a connection after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Not known yet: nothing is reused.
    Unknown,
    /// It keeps connections open: reuse them (within the idle limit).
    KeepsAlive,
    /// It closes every connection after its response: never reuse.
    ClosesAfterResponse,
}

/// What the pool learned of the origin.
#[derive(Debug, Clone, Copy)]
struct Learning {
    reuse: Reuse,
    /// The server closed an idle connection after this long.
    idle_close: Option<Duration>,
    /// Connections seen open past their settle window while unknown.
    open_seen: u32,
}

/// A connection parked after its response.
#[derive(Debug)]
pub(crate) struct Parked<C> {
    pub conn: C,
    pub since: Instant,
    /// Its settle window (see the module docs).
    pub settle: Duration,
}

/// One origin's connections.
#[derive(Debug)]
pub(crate) struct Pool {
    learning: Mutex<Learning>,
    /// Idle HTTP/1.1 connections (our own reader), most recently used last.
    wire: Mutex<Vec<Parked<Conn>>>,
    /// Idle HTTP/1.1 connections on hyper, most recently used last.
    h1: Mutex<Vec<Parked<H1Conn>>>,
    /// HTTP/2 connections (each carries many streams).
    pub h2: Mutex<Vec<std::sync::Arc<H2Conn>>>,
    /// One HTTP/2 connection is dialled at a time, so a burst of requests
    /// fills one connection instead of opening one each.
    pub h2_dialing: tokio::sync::Mutex<()>,
    /// What its HTTP/2 connections taught about the server.
    pub h2_learned: std::sync::Arc<super::h2::H2Learned>,
    /// Whether the origin answered ALPN with h2 (`None`: not asked yet).
    pub speaks_h2: Mutex<Option<bool>>,
}

impl Default for Pool {
    fn default() -> Self {
        Self {
            learning: Mutex::new(Learning {
                reuse: Reuse::Unknown,
                idle_close: None,
                open_seen: 0,
            }),
            wire: Mutex::default(),
            h1: Mutex::default(),
            h2: Mutex::default(),
            h2_dialing: tokio::sync::Mutex::new(()),
            h2_learned: std::sync::Arc::default(),
            speaks_h2: Mutex::new(None),
        }
    }
}

/// A connection whose aliveness can be checked without reading a response.
pub(crate) trait Reusable {
    /// Whether the server has not closed it (and nothing unexpected waits).
    fn still_open(&mut self) -> bool;
}

impl Reusable for Conn {
    fn still_open(&mut self) -> bool {
        self.looks_open()
    }
}

impl Reusable for H1Conn {
    fn still_open(&mut self) -> bool {
        self.reusable()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    /// What the origin is known to do with connections.
    pub fn reuse(&self) -> Reuse {
        lock(&self.learning).reuse
    }

    /// A parked connection to reuse (and how long it was idle), if the
    /// origin allows it and one is still open; learns from every parked
    /// connection it checks (see the module docs).
    fn checkout<C: Reusable>(&self, parked: &Mutex<Vec<Parked<C>>>) -> Option<(C, Duration)> {
        loop {
            let learning = *lock(&self.learning);
            if learning.reuse == Reuse::ClosesAfterResponse {
                lock(parked).clear();
                return None;
            }
            let mut candidate = {
                let mut list = lock(parked);
                let settled = |p: &Parked<C>| p.since.elapsed() >= p.settle;
                let i = match learning.reuse {
                    // only a connection past its window can tell anything
                    Reuse::Unknown => list.iter().rposition(settled)?,
                    _ => list.len().checked_sub(1)?,
                };
                list.remove(i)
            };
            let idle = candidate.since.elapsed();
            let stale = idle >= MAX_IDLE
                || learning
                    .idle_close
                    .is_some_and(|limit| idle >= limit.mul_f64(0.8));
            if stale {
                continue;
            }
            let open = candidate.conn.still_open();
            self.learn(open, idle);
            // while unknown, a connection only teaches: it is not reused
            if open && learning.reuse == Reuse::KeepsAlive {
                return Some((candidate.conn, idle));
            }
        }
    }

    /// A parked connection was found `open` (or closed) `idle` after its
    /// response ended.
    fn learn(&self, open: bool, idle: Duration) {
        let mut l = lock(&self.learning);
        match (open, l.reuse) {
            (_, Reuse::ClosesAfterResponse) => {}
            (true, Reuse::Unknown) => {
                l.open_seen += 1;
                if l.open_seen >= OPEN_SEEN {
                    l.reuse = Reuse::KeepsAlive;
                }
            }
            (true, Reuse::KeepsAlive) => {}
            (false, _) if idle < CLOSES_SOON => {
                tracing::info!("the server closes connections after responses: not reusing them");
                l.reuse = Reuse::ClosesAfterResponse;
            }
            // closed long after: an idle timeout
            (false, _) => l.idle_close = Some(l.idle_close.map_or(idle, |d| d.min(idle))),
        }
    }

    /// A request written on a connection reused after `idle` got no answer:
    /// the server closed it under the request (a late close after a
    /// response, or an idle timeout firing).
    pub fn dropped_on_reuse(&self, idle: Duration) {
        self.learn(false, idle);
    }

    /// Park a connection whose response ended, to be reused later (unless
    /// the origin never allows it). `rtt` sizes its settle window, which
    /// only matters while the pool learns: once it knows, `rtt` is not
    /// asked (a `getsockopt` per request saved).
    fn park<C>(
        &self,
        parked: &Mutex<Vec<Parked<C>>>,
        conn: C,
        rtt: impl FnOnce() -> Option<Duration>,
    ) {
        let settle = match self.reuse() {
            Reuse::ClosesAfterResponse => return,
            Reuse::KeepsAlive => SETTLE,
            Reuse::Unknown => rtt().map_or(SETTLE, |r| (r * 4).max(SETTLE)),
        };
        lock(parked).push(Parked {
            conn,
            since: Instant::now(),
            settle,
        });
    }

    /// A reusable HTTP/1.1 connection of our own reader, if any, and how
    /// long it was idle.
    pub fn checkout_wire(&self) -> Option<(Conn, Duration)> {
        self.checkout(&self.wire)
    }

    /// Park one of our own HTTP/1.1 connections.
    pub fn park_wire(&self, conn: Conn, rtt: impl FnOnce() -> Option<Duration>) {
        self.park(&self.wire, conn, rtt);
    }

    /// A reusable hyper HTTP/1.1 connection, if any, and how long it was idle.
    pub fn checkout_h1(&self) -> Option<(H1Conn, Duration)> {
        self.checkout(&self.h1)
    }

    /// Park a hyper HTTP/1.1 connection.
    pub fn park_h1(&self, conn: H1Conn, rtt: impl FnOnce() -> Option<Duration>) {
        self.park(&self.h1, conn, rtt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection that says what it is told.
    struct Fake(bool);
    impl Reusable for Fake {
        fn still_open(&mut self) -> bool {
            self.0
        }
    }

    /// Park `open` connections and check them past their windows until the
    /// origin decides.
    async fn show(pool: &Pool, parked: &Mutex<Vec<Parked<Fake>>>, open: bool, times: u32) {
        for _ in 0..times {
            pool.park(parked, Fake(open), || None);
            tokio::time::advance(Duration::from_millis(25)).await;
            assert!(pool.checkout(parked).is_none(), "reused while learning");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_reused_before_the_server_showed_it_keeps_connections() {
        let pool = Pool::default();
        let parked: Mutex<Vec<Parked<Fake>>> = Mutex::default();
        pool.park(&parked, Fake(true), || None);
        assert!(pool.checkout(&parked).is_none(), "inside its settle window");
        tokio::time::advance(Duration::from_millis(25)).await;
        assert!(pool.checkout(&parked).is_none(), "checked, not reused");
        assert_eq!(pool.reuse(), Reuse::Unknown);
        show(&pool, &parked, true, OPEN_SEEN - 1).await;
        assert_eq!(pool.reuse(), Reuse::KeepsAlive);
        pool.park(&parked, Fake(true), || None);
        assert!(pool.checkout(&parked).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_closes_after_responses_is_never_reused() {
        let pool = Pool::default();
        let parked: Mutex<Vec<Parked<Fake>>> = Mutex::default();
        show(&pool, &parked, false, 1).await;
        assert_eq!(pool.reuse(), Reuse::ClosesAfterResponse);
        // from now on nothing is even parked
        pool.park(&parked, Fake(true), || None);
        tokio::time::advance(Duration::from_millis(25)).await;
        assert!(pool.checkout(&parked).is_none());
    }

    /// llama-server under load closes tens of milliseconds late: a server
    /// first seen keeping connections, then seen closing one soon after
    /// its response (or dropping a request on one), is not reused again.
    #[tokio::test(start_paused = true)]
    async fn a_late_close_after_a_response_ends_reuse() {
        let pool = Pool::default();
        let parked: Mutex<Vec<Parked<Fake>>> = Mutex::default();
        show(&pool, &parked, true, OPEN_SEEN).await;
        assert_eq!(pool.reuse(), Reuse::KeepsAlive);
        pool.park(&parked, Fake(false), || None);
        tokio::time::advance(Duration::from_millis(60)).await;
        assert!(pool.checkout(&parked).is_none());
        assert_eq!(pool.reuse(), Reuse::ClosesAfterResponse);

        let pool = Pool::default();
        show(&pool, &parked, true, OPEN_SEEN).await;
        pool.dropped_on_reuse(Duration::from_millis(40));
        assert_eq!(pool.reuse(), Reuse::ClosesAfterResponse);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_timeout_is_learned_and_respected() {
        let pool = Pool::default();
        let parked: Mutex<Vec<Parked<Fake>>> = Mutex::default();
        show(&pool, &parked, true, OPEN_SEEN).await;
        // the server closed one idle for 5 s
        pool.park(&parked, Fake(false), || None);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(pool.checkout(&parked).is_none());
        assert_eq!(pool.reuse(), Reuse::KeepsAlive);
        // one idle for 4.5 s (over 80 % of 5 s) is not even checked
        pool.park(&parked, Fake(true), || None);
        tokio::time::advance(Duration::from_millis(4500)).await;
        assert!(pool.checkout(&parked).is_none());
        // one idle for 1 s is reused
        pool.park(&parked, Fake(true), || None);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(pool.checkout(&parked).is_some());
    }
}
