//! `NO_PROXY`: the targets that go direct although a proxy is set.
//!
//! A comma-separated list; whitespace around entries is trimmed and empty
//! entries are skipped. An entry is
//! - `*`: every host (curl, Python);
//! - a domain, any leading dots stripped: matches that name and every name
//!   under it, on a label boundary and case-insensitively (`ample.com`
//!   matches `ample.com` and `www.ample.com`, not `www.example.com` nor
//!   `ample.com.org`: curl's CURLOPT_NOPROXY; Python's
//!   `proxy_bypass_environment` likewise);
//! - an IP address (IPv6 without brackets, or in them) or a CIDR block
//!   (`10.0.0.0/8`, `fd00::/8`): matches hosts written as an IP address in
//!   range. No name is resolved, so `localhost` is not `127.0.0.1` (curl);
//! - any of these but `*` with `:port` (IPv6 then in brackets): matches
//!   only requests to that port (Python compares `host:port` too).
//!
//! A host written as an IP address matches IP and CIDR entries only, never a
//! domain entry by a suffix of its digits (curl; Python would let `0.1`
//! exempt `10.0.0.1`).

use std::net::IpAddr;

/// Hosts that go direct.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NoProxy {
    /// `*` was listed.
    all: bool,
    entries: Vec<Entry>,
}

/// One entry of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    pattern: Pattern,
    /// Only requests to this port match.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// Lowercase, without leading or trailing dots.
    Domain(String),
    /// A network: the address with its host bits cleared, and the prefix length.
    Net(IpAddr, u8),
}

impl NoProxy {
    /// The list from its entries (already split at commas).
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Self {
        let mut list = Self::default();
        for raw in entries {
            let entry = raw.trim();
            if entry == "*" {
                list.all = true;
            } else if let Some(e) = parse_entry(entry) {
                list.entries.push(e);
            } else if !entry.is_empty() {
                tracing::debug!(entry, "no_proxy: an entry that can match no host");
            }
        }
        list
    }

    /// Add another list's entries.
    pub fn extend(&mut self, other: NoProxy) {
        self.all |= other.all;
        self.entries.extend(other.entries);
    }

    /// Whether a request to `host:port` goes direct. `host` is a name or an
    /// IP address (IPv6 with or without brackets).
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.all {
            return true;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let ip = host.parse::<IpAddr>().ok();
        self.entries.iter().any(|e| {
            e.port.is_none_or(|p| p == port)
                && match (&e.pattern, ip) {
                    (Pattern::Domain(d), None) => {
                        host == *d
                            || host
                                .strip_suffix(d.as_str())
                                .is_some_and(|above| above.ends_with('.'))
                    }
                    (Pattern::Net(net, len), Some(ip)) => in_net(ip, *net, *len),
                    _ => false,
                }
        })
    }
}

/// One trimmed, non-`*` entry; `None` when it can match nothing.
fn parse_entry(entry: &str) -> Option<Entry> {
    if entry.is_empty() {
        return None;
    }
    // [v6] or [v6]:port
    if let Some(inner) = entry.strip_prefix('[') {
        let (addr, after) = inner.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?.parse().ok()?),
        };
        return Some(Entry {
            pattern: net_pattern(addr)?,
            port,
        });
    }
    // an address, or a CIDR block: IPv6 without brackets has no port
    if let Some(pattern) = net_pattern(entry) {
        return Some(Entry {
            pattern,
            port: None,
        });
    }
    let (name, port) = match entry.rsplit_once(':') {
        Some((name, p)) => (name, Some(p.parse::<u16>().ok()?)),
        None => (entry, None),
    };
    let pattern = match net_pattern(name) {
        Some(net) => net,
        None => {
            let domain = name.trim_start_matches('.').trim_end_matches('.');
            if domain.is_empty() || domain.contains(['/', ':']) {
                return None;
            }
            Pattern::Domain(domain.to_ascii_lowercase())
        }
    };
    Some(Entry { pattern, port })
}

/// `addr` or `addr/len` as a network; `None` when it is neither.
fn net_pattern(s: &str) -> Option<Pattern> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, Some(l.parse::<u8>().ok()?)),
        None => (s.parse::<IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    if len > max {
        return None;
    }
    Some(Pattern::Net(masked(addr, len), len))
}

/// `addr` with all but its first `len` bits cleared.
fn masked(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((bits & mask).into())
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((bits & mask).into())
        }
    }
}

/// Whether `ip` lies in the network `net/len` (same address family only).
fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    ip.is_ipv4() == net.is_ipv4() && masked(ip, len) == net
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case names whose behaviour it follows: curl (CURLOPT_NOPROXY(3)),
    /// Python's `proxy_bypass_environment` (aiohttp's), hyper-util's matcher,
    /// or cicada where they differ.
    #[test]
    fn no_proxy_exempts_hosts() {
        // (follows, no_proxy, host, port, goes direct?)
        let cases: &[(&str, &str, &str, u16, bool)] = &[
            (
                "a lone * exempts all (curl, Python)",
                "*",
                "anything.example",
                80,
                true,
            ),
            (
                "* with spaces around (curl and Python trim)",
                " * ",
                "a.example",
                80,
                true,
            ),
            (
                "* among entries (hyper-util; cicada)",
                "a.example,*",
                "b.example",
                80,
                true,
            ),
            (
                "the name itself (curl, Python)",
                "ample.com",
                "ample.com",
                80,
                true,
            ),
            (
                "a name under it (curl, Python)",
                "ample.com",
                "www.ample.com",
                80,
                true,
            ),
            (
                "not across a label boundary (curl's own example)",
                "ample.com",
                "www.example.com",
                80,
                false,
            ),
            (
                "not as a prefix (curl's own example)",
                "ample.com",
                "ample.com.org",
                80,
                false,
            ),
            (
                "case-insensitive entries (curl, Python lowercases)",
                "Ample.COM",
                "www.ample.com",
                80,
                true,
            ),
            (
                "case-insensitive hosts (curl, Python lowercases)",
                "ample.com",
                "WWW.AMPLE.COM",
                80,
                true,
            ),
            (
                "a leading dot is stripped: the domain itself (curl ≥ 7.86, Python)",
                ".example.com",
                "example.com",
                80,
                true,
            ),
            (
                "a leading dot is stripped: names under it (curl, Python)",
                ".example.com",
                "a.b.example.com",
                80,
                true,
            ),
            (
                "a trailing dot of the host is ignored (DNS root)",
                "example.com",
                "www.example.com.",
                80,
                true,
            ),
            (
                "whitespace around entries is trimmed (curl, Python)",
                " foo.test , example.com ",
                "example.com",
                80,
                true,
            ),
            (
                "empty entries are skipped (curl, Python)",
                ",,example.com,",
                "other.test",
                80,
                false,
            ),
            (
                "an entry with :port matches that port (Python compares host:port)",
                "example.com:8080",
                "example.com",
                8080,
                true,
            ),
            (
                "an entry with :port matches no other port (Python)",
                "example.com:8080",
                "example.com",
                80,
                false,
            ),
            (
                "an entry with :port covers names under it on that port",
                "example.com:8080",
                "api.example.com",
                8080,
                true,
            ),
            (
                "an IPv4 address (curl, Python)",
                "192.168.1.5",
                "192.168.1.5",
                80,
                true,
            ),
            (
                "another IPv4 address",
                "192.168.1.5",
                "192.168.1.6",
                80,
                false,
            ),
            (
                "an IPv4 address with :port, that port",
                "127.0.0.1:8000",
                "127.0.0.1",
                8000,
                true,
            ),
            (
                "an IPv4 address with :port, another port",
                "127.0.0.1:8000",
                "127.0.0.1",
                8001,
                false,
            ),
            (
                "IPv4 CIDR, inside (curl ≥ 7.86)",
                "10.0.0.0/8",
                "10.1.2.3",
                80,
                true,
            ),
            (
                "IPv4 CIDR, outside (curl)",
                "10.0.0.0/8",
                "11.0.0.1",
                80,
                false,
            ),
            (
                "IPv4 CIDR with host bits set (curl masks them)",
                "10.1.2.3/16",
                "10.1.200.1",
                80,
                true,
            ),
            (
                "IPv4 /0 is every IPv4 host",
                "0.0.0.0/0",
                "203.0.113.9",
                80,
                true,
            ),
            ("IPv4 /0 is no IPv6 host", "0.0.0.0/0", "::1", 80, false),
            ("IPv6 without brackets (curl)", "::1", "::1", 80, true),
            (
                "IPv6 entry, bracketed host (a URL's form)",
                "::1",
                "[::1]",
                80,
                true,
            ),
            ("IPv6 in brackets (accepted too)", "[::1]", "::1", 80, true),
            (
                "IPv6 in brackets with :port, that port",
                "[::1]:8080",
                "::1",
                8080,
                true,
            ),
            (
                "IPv6 in brackets with :port, another port",
                "[::1]:8080",
                "::1",
                80,
                false,
            ),
            (
                "IPv6 CIDR, inside (curl)",
                "fd00::/8",
                "fd12:3456::1",
                443,
                true,
            ),
            (
                "IPv6 CIDR, outside (curl)",
                "fd00::/8",
                "fe80::1",
                443,
                false,
            ),
            (
                "IPv6 written differently is the same address",
                "2001:db8:0:0::1",
                "2001:db8::1",
                80,
                true,
            ),
            (
                "no DNS: an address entry is not a name (curl)",
                "127.0.0.1",
                "localhost",
                80,
                false,
            ),
            (
                "no DNS: a name entry is not an address (curl)",
                "localhost",
                "127.0.0.1",
                80,
                false,
            ),
            (
                "an address host matches no name entry by its digits (curl; Python would)",
                "0.1",
                "10.0.0.1",
                80,
                false,
            ),
            (
                "a CIDR entry matches no name (no DNS)",
                "10.0.0.0/8",
                "ten.example",
                80,
                false,
            ),
            (
                "a broken CIDR matches nothing (curl)",
                "10.0.0.0/33",
                "10.0.0.1",
                80,
                false,
            ),
        ];
        for &(follows, list, host, port, direct) in cases {
            let no_proxy = NoProxy::parse(list.split(','));
            assert_eq!(
                no_proxy.matches(host, port),
                direct,
                "{follows}: no_proxy={list:?}, host {host}:{port}"
            );
        }
    }
}
