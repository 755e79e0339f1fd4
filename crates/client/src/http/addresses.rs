//! Which address of a name to connect to (RFC 8305, Happy Eyeballs v2).
//!
//! A name may resolve to several addresses: `localhost` to `::1` and
//! `127.0.0.1` (Debian's and Fedora's default hosts file) in front of a
//! server that listens on 127.0.0.1 only, a Kubernetes headless Service to
//! one address per pod. The resolver's order (getaddrinfo's RFC 6724
//! sorting) is interleaved by family (§4), addresses that recently refused
//! or timed out go last, and the dialer races them (`dial`): the next one
//! starts when the previous fails or after the attempt delay, the first to
//! connect wins. So a name with a dead address costs no request.
//!
//! `target.addresses = "first"` (default) sends every new connection to the
//! first live address, as curl and aiohttp do; `"spread"` takes the live
//! addresses in turn (a headless Service's pods).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use cicada_request::AddressChoice;
use tokio::time::Instant;

use super::HttpError;

/// How long resolved addresses are trusted before the name is looked up again.
const DNS_TTL: Duration = Duration::from_secs(30);
/// How long an address that refused or timed out is tried last.
const DEAD_FOR: Duration = Duration::from_secs(30);

/// A name's addresses and what connecting to them taught.
#[derive(Debug, Default)]
pub(crate) struct AddressBook {
    inner: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    /// In RFC 8305 order.
    list: Vec<SocketAddr>,
    fetched: Option<Instant>,
    /// Addresses that refused or timed out, and when.
    dead: HashMap<SocketAddr, Instant>,
    /// Next start for `AddressChoice::Spread`.
    next: usize,
}

/// Interleave `addrs` by family, starting with the first one's (RFC 8305
/// §4, "First Address Family Count" 1), keeping the order within a family.
pub(crate) fn interleave(addrs: Vec<SocketAddr>) -> Vec<SocketAddr> {
    let Some(first) = addrs.first() else {
        return addrs;
    };
    let v6_first = first.is_ipv6();
    let (mut a, mut b): (Vec<_>, Vec<_>) = addrs.into_iter().partition(|x| x.is_ipv6() == v6_first);
    let mut out = Vec::with_capacity(a.len() + b.len());
    a.reverse();
    b.reverse();
    loop {
        match (a.pop(), b.pop()) {
            (None, None) => return out,
            (x, y) => out.extend(x.into_iter().chain(y)),
        }
    }
}

fn lock(m: &Mutex<Book>) -> std::sync::MutexGuard<'_, Book> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AddressBook {
    /// The addresses of `host:port` to try, in order: a literal IP alone;
    /// else the resolved ones (looked up again after [`DNS_TTL`]) in RFC 8305
    /// order, live ones first, rotated for `AddressChoice::Spread`.
    pub async fn candidates(
        &self,
        host: &str,
        port: u16,
        spread: AddressChoice,
    ) -> Result<Vec<SocketAddr>, HttpError> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let fresh = lock(&self.inner)
            .fetched
            .is_some_and(|t| t.elapsed() < DNS_TTL);
        if !fresh {
            let list: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
                .await
                .map_err(|e| HttpError::Resolve {
                    host: host.to_string(),
                    reason: e.to_string(),
                })?
                .collect();
            if list.is_empty() {
                return Err(HttpError::Resolve {
                    host: host.to_string(),
                    reason: "no addresses".into(),
                });
            }
            let mut b = lock(&self.inner);
            b.list = interleave(list);
            b.fetched = Some(Instant::now());
        }
        let mut b = lock(&self.inner);
        let now = Instant::now();
        b.dead
            .retain(|_, since| now.duration_since(*since) < DEAD_FOR);
        let (mut live, dead): (Vec<SocketAddr>, Vec<SocketAddr>) =
            b.list.iter().partition(|a| !b.dead.contains_key(a));
        if spread == AddressChoice::Spread && !live.is_empty() {
            let k = b.next % live.len();
            b.next = b.next.wrapping_add(1);
            live.rotate_left(k);
        }
        live.extend(dead);
        Ok(live)
    }

    /// Connecting to `addr` failed (refused, unreachable, timed out).
    pub fn failed(&self, addr: SocketAddr) {
        lock(&self.inner).dead.insert(addr, Instant::now());
    }

    /// Connecting to `addr` worked.
    pub fn worked(&self, addr: SocketAddr) {
        lock(&self.inner).dead.remove(&addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn families_interleave_from_the_first_address() {
        let got = interleave(vec![
            a("[::1]:80"),
            a("[::2]:80"),
            a("127.0.0.1:80"),
            a("[::3]:80"),
            a("10.0.0.1:80"),
        ]);
        assert_eq!(
            got,
            [
                a("[::1]:80"),
                a("127.0.0.1:80"),
                a("[::2]:80"),
                a("10.0.0.1:80"),
                a("[::3]:80"),
            ]
        );
        let v4 = vec![a("10.0.0.1:80"), a("10.0.0.2:80")];
        assert_eq!(interleave(v4.clone()), v4);
    }

    #[tokio::test]
    async fn dead_addresses_go_last_and_spread_takes_turns() {
        let book = AddressBook::default();
        {
            let mut b = lock(&book.inner);
            b.list = vec![a("10.0.0.1:80"), a("10.0.0.2:80"), a("10.0.0.3:80")];
            b.fetched = Some(Instant::now());
        }
        let first = book
            .candidates("svc", 80, AddressChoice::First)
            .await
            .unwrap();
        assert_eq!(first[0], a("10.0.0.1:80"));
        book.failed(a("10.0.0.1:80"));
        let after = book
            .candidates("svc", 80, AddressChoice::First)
            .await
            .unwrap();
        assert_eq!(
            after,
            [a("10.0.0.2:80"), a("10.0.0.3:80"), a("10.0.0.1:80")]
        );
        let turns: Vec<SocketAddr> = [0, 1, 2]
            .iter()
            .map(|_| {
                futures_lite(book.candidates("svc", 80, AddressChoice::Spread))
                    .unwrap()
                    .remove(0)
            })
            .collect();
        assert_eq!(
            turns,
            [a("10.0.0.2:80"), a("10.0.0.3:80"), a("10.0.0.2:80")]
        );
        book.worked(a("10.0.0.1:80"));
        assert_eq!(
            book.candidates("svc", 80, AddressChoice::First)
                .await
                .unwrap()[0],
            a("10.0.0.1:80")
        );
        // a literal address is itself
        assert_eq!(
            book.candidates("::1", 8000, AddressChoice::First)
                .await
                .unwrap(),
            [a("[::1]:8000")]
        );
    }

    /// Run a future that never waits (no lookup: the book is fresh).
    fn futures_lite<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the lookup waited"),
        }
    }
}
