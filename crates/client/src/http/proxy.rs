//! Proxies: which one (if any) a request to a target goes through, and the
//! CONNECT handshake that opens a tunnel through it (`tunnel`).
//!
//! The rules come from the scenario (`target.proxy`, `target.no_proxy`) or
//! from the environment, read as curl and aiohttp (Python's `urllib`) read
//! it, choosing between them where they differ as stated here:
//! - http targets: `http_proxy`, then `HTTP_PROXY` (like aiohttp; curl reads
//!   only the lowercase one); the uppercase one is ignored when
//!   `REQUEST_METHOD` is set (a CGI program: a client's `Proxy:` header
//!   arrives as `HTTP_PROXY`, CVE-2016-1000110);
//! - https targets: `https_proxy`, then `HTTPS_PROXY`;
//! - no variable of the target's scheme set: `all_proxy`, then `ALL_PROXY`
//!   (like curl; aiohttp has none);
//! - an empty variable counts as unset, and an empty lowercase one hides its
//!   uppercase twin (Python's `getproxies_environment`);
//! - a proxy is `http://[user:pass@]host[:port]` (no scheme means http, as
//!   in curl), port 80 by default (like aiohttp; curl's default is 1080),
//!   credentials percent-decoded; an `https://` or `socks*` proxy is a setup
//!   error naming the variable, never silently skipped;
//! - `no_proxy`, then `NO_PROXY`, exempts hosts (`no_proxy`).
//!
//! Loopback gets no exemption: `127.0.0.1` is proxied when the variables say
//! so, as curl and aiohttp do (Go exempts it).

mod no_proxy;
mod tunnel;

use std::fmt;

use base64::Engine as _;
use cicada_request::ProxySetting;
use thiserror::Error;

pub(crate) use no_proxy::NoProxy;
pub(crate) use tunnel::connect_tunnel;

/// Why the proxy rules cannot be set up.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub(crate) enum ProxySetupError {
    /// The proxy speaks a protocol cicada does not speak to proxies.
    #[error(
        "{source_name} is {url}: cicada reaches proxies over plain http only (http://[user:pass@]host[:port]), not {scheme}"
    )]
    UnsupportedScheme {
        source_name: &'static str,
        url: String,
        scheme: String,
    },
    /// The proxy URL does not parse.
    #[error("{source_name} is {url}: {reason}")]
    BadUrl {
        source_name: &'static str,
        url: String,
        reason: String,
    },
}

/// One proxy: where it listens and the credentials it is sent.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ProxyServer {
    host: String,
    port: u16,
    /// `Basic base64(user:pass)`, the value of `Proxy-Authorization`.
    auth: Option<String>,
    /// The variable (or scenario key) it came from.
    source: &'static str,
}

impl fmt::Debug for ProxyServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // the credentials stay out of logs
        f.debug_struct("ProxyServer")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("auth", &self.auth.as_ref().map(|_| "<set>"))
            .field("source", &self.source)
            .finish()
    }
}

/// How a request to one target goes through a proxy.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ProxyRoute {
    /// The proxy's host (an IPv6 address without brackets).
    pub host: String,
    /// The proxy's port.
    pub port: u16,
    /// The `Proxy-Authorization` value, already `Basic base64(user:pass)`.
    pub auth: Option<String>,
    /// The variable (or scenario key) the proxy came from, for the console.
    pub source: &'static str,
    /// https target: a CONNECT tunnel; http target: requests in absolute form.
    pub connect: bool,
}

impl fmt::Debug for ProxyRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyRoute")
            .field("url", &self.url())
            .field("auth", &self.auth.as_ref().map(|_| "<set>"))
            .field("source", &self.source)
            .field("connect", &self.connect)
            .finish()
    }
}

impl ProxyRoute {
    /// The proxy as `http://host:port`, without credentials (for the console).
    pub fn url(&self) -> String {
        format!("http://{}", authority(&self.host, self.port))
    }
}

/// `host:port`, with an IPv6 host in brackets.
pub(crate) fn authority(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Which proxy each target goes through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProxyRules {
    /// For http targets.
    http: Option<ProxyServer>,
    /// For https targets.
    https: Option<ProxyServer>,
    /// Targets that go direct.
    no_proxy: NoProxy,
}

/// The first of `names` that is set, by the rule "an empty variable is unset,
/// and an empty lowercase one hides its uppercase twin". `names` is
/// `[lowercase, uppercase]`; `None` means neither gives a value.
fn first_set(
    lookup: &impl Fn(&str) -> Option<String>,
    names: [&'static str; 2],
) -> Option<(&'static str, String)> {
    let [lower, upper] = names;
    match lookup(lower) {
        Some(v) if !v.is_empty() => Some((lower, v)),
        Some(_) => None,
        None => lookup(upper).filter(|v| !v.is_empty()).map(|v| (upper, v)),
    }
}

impl ProxyRules {
    /// No proxy for anything.
    pub fn none() -> Self {
        Self::default()
    }

    /// The rules an environment gives (`lookup` reads one variable; the
    /// process's own is `|k| std::env::var(k).ok()`).
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ProxySetupError> {
        let all = first_set(&lookup, ["all_proxy", "ALL_PROXY"]);
        let cgi = lookup("REQUEST_METHOD").is_some();
        let http = first_set(&lookup, ["http_proxy", "HTTP_PROXY"])
            .filter(|(name, _)| !(cgi && *name == "HTTP_PROXY"))
            .or_else(|| all.clone());
        let https = first_set(&lookup, ["https_proxy", "HTTPS_PROXY"]).or(all);
        let parse = |found: Option<(&'static str, String)>| {
            found
                .map(|(name, url)| parse_proxy_url(&url, name))
                .transpose()
        };
        let no_proxy = first_set(&lookup, ["no_proxy", "NO_PROXY"])
            .map(|(_, list)| NoProxy::parse(list.split(',')))
            .unwrap_or_default();
        Ok(Self {
            http: parse(http)?,
            https: parse(https)?,
            no_proxy,
        })
    }

    /// The rules of a scenario's `target.proxy` and `target.no_proxy`: with
    /// [`ProxySetting::Env`] the environment's (through `lookup`), the entries of
    /// `no_proxy` exempting hosts besides the environment's own list.
    pub fn from_setting(
        proxy: &ProxySetting,
        no_proxy: &[String],
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ProxySetupError> {
        let extra = NoProxy::parse(no_proxy.iter().map(String::as_str));
        match proxy {
            ProxySetting::None => Ok(Self::none()),
            ProxySetting::Env => {
                let mut rules = Self::from_env(lookup)?;
                rules.no_proxy.extend(extra);
                Ok(rules)
            }
            ProxySetting::Url(url) => {
                let server = parse_proxy_url(url, "target.proxy")?;
                Ok(Self {
                    http: Some(server.clone()),
                    https: Some(server),
                    no_proxy: extra,
                })
            }
        }
    }

    /// The proxy a request to `host:port` goes through, or `None` to go
    /// direct. `host` is the URL's host (an IPv6 address with or without
    /// brackets); no name is resolved.
    pub fn route(&self, scheme_is_https: bool, host: &str, port: u16) -> Option<ProxyRoute> {
        let server = if scheme_is_https {
            self.https.as_ref()
        } else {
            self.http.as_ref()
        }?;
        if self.no_proxy.matches(host, port) {
            return None;
        }
        Some(ProxyRoute {
            host: server.host.clone(),
            port: server.port,
            auth: server.auth.clone(),
            source: server.source,
            connect: scheme_is_https,
        })
    }
}

/// `http://[user:pass@]host[:port][/...]` (no scheme means http, as curl
/// reads it); `source` names where it came from, for errors.
fn parse_proxy_url(url: &str, source: &'static str) -> Result<ProxyServer, ProxySetupError> {
    let shown = redact(url);
    let bad = |reason: &str| ProxySetupError::BadUrl {
        source_name: source,
        url: shown.clone(),
        reason: reason.to_string(),
    };
    let trimmed = url.trim();
    let rest = match trimmed.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => {
            return Err(ProxySetupError::UnsupportedScheme {
                source_name: source,
                url: shown.clone(),
                scheme: scheme.to_ascii_lowercase(),
            });
        }
        None => trimmed,
    };
    // the authority ends at the path, query or fragment (ignored, as curl does)
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (host, port) = split_host_port(hostport).map_err(|r| bad(&r.0))?;
    let auth = userinfo
        .map(|u| {
            let (user, pass) = u.split_once(':').unwrap_or((u, ""));
            let user = percent_decode(user).ok_or_else(|| bad("bad %-escape in the user name"))?;
            let pass = percent_decode(pass).ok_or_else(|| bad("bad %-escape in the password"))?;
            let mut pair = user;
            pair.push(b':');
            pair.extend_from_slice(&pass);
            Ok(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ))
        })
        .transpose()?;
    Ok(ProxyServer {
        host,
        port,
        auth,
        source,
    })
}

/// What is wrong with a proxy URL's `host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
struct AuthorityError(pub String);

impl From<String> for AuthorityError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for AuthorityError {
    fn from(message: &str) -> Self {
        Self(message.to_string())
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; port 80 when none is given.
fn split_host_port(hostport: &str) -> Result<(String, u16), AuthorityError> {
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| "an IPv6 address without its closing ]".to_string())?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("[{host}] is not an IPv6 address").into());
        }
        match after {
            "" => (host, None),
            p => (
                host,
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("unexpected {p:?} after the address"))?,
                ),
            ),
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err("an IPv6 proxy address goes in brackets".into());
            }
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    let name_char = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
    if !hostport.starts_with('[') && !host.chars().all(name_char) {
        return Err(format!("{host:?} is not a host name or address").into());
    }
    let port = match port {
        None | Some("") => 80,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("port {p:?} is not a port number"))?,
    };
    Ok((host.to_ascii_lowercase(), port))
}

/// `%XX` escapes decoded; `None` for a broken escape.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// A proxy URL with its password replaced, for error messages.
fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}{user}:***@{host}{}", &rest[end..])
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests;
