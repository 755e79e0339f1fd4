//! Who may use the web UI. The rule: an address in 127.0.0.0/8 or `::1`
//! (IPv4-mapped loopback included) is loopback and may be served without a
//! token; any other address needs one (`--web-token-file` or
//! `CICADA_WEB_TOKEN`). When a token is set, every request carries it, as
//! `Authorization: Bearer TOKEN` or the cookie `GET /?token=TOKEN` sets.
//! Whatever the bind, a request that changes the run (any POST, and the
//! GETs Locust's older pages and scripts send to `/stop` and
//! `/stats/reset`) is refused when the browser says it comes from another
//! site (`Sec-Fetch-Site`, `Origin`, else `Referer`) or, for a GET, when it
//! is a prefetch: no other site's form, image or link can start or stop
//! load. Without a token the `Host` must be an address or `localhost` (no
//! DNS rebinding onto the loopback UI).

use std::net::IpAddr;

use http::{HeaderMap, Method, StatusCode, header};

use super::WebError;

/// Name of the cookie that carries the token for the page.
pub const COOKIE: &str = "cicada_web_token";

/// True for 127.0.0.0/8, `::1` and `::ffff:127.x.y.z`: served without a token.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Why a request was refused: its status and a line saying why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 401 (no token) or 403 (wrong token, foreign origin or host).
    pub status: StatusCode,
    /// What the client is told.
    pub why: &'static str,
}

/// What a request needs to be served.
#[derive(Debug, Clone)]
pub struct Guard {
    token: Option<String>,
}

/// What a request that passed carries along.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Served as is.
    Plain,
    /// The token came in the query of `GET /`: answer with a cookie.
    SetCookie,
}

impl Guard {
    /// A guard for a UI bound to `ip` with `token`; an error when a
    /// non-loopback bind has no token.
    pub fn new(ip: IpAddr, token: Option<String>) -> Result<Self, WebError> {
        let token = token
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        if token.is_none() && !is_loopback(ip) {
            return Err(WebError::NeedsToken(ip));
        }
        Ok(Self { token })
    }

    /// The token requests carry, if one is set (for the link printed at start).
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Check one request: its method, path, query and headers.
    pub fn check(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<Pass, Refusal> {
        if changes_the_run(method, path) {
            if cross_site(headers) {
                return Err(Refusal {
                    status: StatusCode::FORBIDDEN,
                    why: "a request from another site may not control the run",
                });
            }
            if prefetch(headers) {
                return Err(Refusal {
                    status: StatusCode::FORBIDDEN,
                    why: "a prefetch may not control the run",
                });
            }
        }
        let Some(token) = &self.token else {
            return if host_is_an_address(headers) {
                Ok(Pass::Plain)
            } else {
                Err(Refusal {
                    status: StatusCode::FORBIDDEN,
                    why: "without a token the UI answers only to an address or localhost in Host",
                })
            };
        };
        let from_query = (method == Method::GET && path == "/")
            .then(|| query_token(query))
            .flatten();
        let offered = bearer(headers).or_else(|| cookie(headers)).or(from_query);
        match offered {
            None => Err(Refusal {
                status: StatusCode::UNAUTHORIZED,
                why: "this UI needs its token: Authorization: Bearer TOKEN, or open /?token=TOKEN",
            }),
            Some(t) if same(t.as_bytes(), token.as_bytes()) => {
                if from_query.is_some() && bearer(headers).is_none() && cookie(headers).is_none() {
                    Ok(Pass::SetCookie)
                } else {
                    Ok(Pass::Plain)
                }
            }
            Some(_) => Err(Refusal {
                status: StatusCode::FORBIDDEN,
                why: "wrong token",
            }),
        }
    }

    /// The `Set-Cookie` value that hands the page its token.
    pub fn cookie_header(&self) -> Option<String> {
        self.token
            .as_ref()
            .map(|t| format!("{COOKIE}={t}; Path=/; HttpOnly; SameSite=Strict"))
    }
}

/// Equal in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    header_str(headers, header::AUTHORIZATION)?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

/// Any POST, and the two GETs that act (Locust served `/stop` and
/// `/stats/reset` as GET up to 2.46, and its scripts still send them so).
fn changes_the_run(method: &Method, path: &str) -> bool {
    method == Method::POST || matches!(path, "/stop" | "/stats/reset")
}

/// `scheme://host[:port]/...` -> `host[:port]`.
fn authority(url: &str) -> &str {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or("");
    rest.split(['/', '?', '#']).next().unwrap_or("")
}

/// A browser said the request comes from another site: by
/// `Sec-Fetch-Site` (every current browser sends it), else by `Origin`,
/// else by `Referer` (what an older browser's cross-site GET carries).
fn cross_site(headers: &HeaderMap) -> bool {
    if header_str(headers, header::HeaderName::from_static("sec-fetch-site"))
        .is_some_and(|s| s == "cross-site" || s == "same-site")
    {
        return true;
    }
    let host = header_str(headers, header::HOST);
    if let Some(origin) = header_str(headers, header::ORIGIN) {
        return host != Some(authority(origin));
    }
    header_str(headers, header::REFERER).is_some_and(|r| host != Some(authority(r)))
}

/// The browser fetches ahead of a click that may never come.
fn prefetch(headers: &HeaderMap) -> bool {
    ["sec-purpose", "purpose", "x-moz", "x-purpose"]
        .into_iter()
        .filter_map(|name| header_str(headers, header::HeaderName::from_static(name)))
        .any(|v| v.contains("prefetch") || v.contains("prerender") || v.contains("preview"))
}

/// `Host` is an IP literal or `localhost`, with or without a port.
fn host_is_an_address(headers: &HeaderMap) -> bool {
    let Some(host) = header_str(headers, header::HOST) else {
        // HTTP/1.0 without Host: no name was resolved to reach us
        return true;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn loopback_is_127_slash_8_and_colon_colon_1_only() {
        for a in [
            "127.0.0.1",
            "127.0.0.2",
            "127.255.0.9",
            "::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_loopback(a.parse().unwrap()), "{a}");
        }
        for a in [
            "0.0.0.0",
            "10.0.0.1",
            "192.168.1.2",
            "::",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_loopback(a.parse().unwrap()), "{a}");
        }
        assert!(Guard::new("0.0.0.0".parse().unwrap(), None).is_err());
        assert!(Guard::new("0.0.0.0".parse().unwrap(), Some("  ".into())).is_err());
        assert!(Guard::new("127.0.0.2".parse().unwrap(), None).is_ok());
    }

    #[test]
    fn a_token_is_required_once_set_and_a_wrong_one_is_forbidden() {
        let g = Guard::new("0.0.0.0".parse().unwrap(), Some("s3cret\n".into())).unwrap();
        let get = |q: Option<&str>, h: &HeaderMap| g.check(&Method::GET, "/", q, h);
        assert_eq!(get(None, &headers(&[])).unwrap_err().status, 401);
        let wrong = headers(&[("authorization", "Bearer nope")]);
        assert_eq!(get(None, &wrong).unwrap_err().status, 403);
        let right = headers(&[("authorization", "Bearer s3cret")]);
        assert_eq!(get(None, &right), Ok(Pass::Plain));
        assert_eq!(
            get(Some("token=s3cret"), &headers(&[])),
            Ok(Pass::SetCookie)
        );
        let jar = headers(&[("cookie", "a=b; cicada_web_token=s3cret")]);
        assert_eq!(get(None, &jar), Ok(Pass::Plain));
        // the query token opens the page only, not the API
        let api = g.check(
            &Method::GET,
            "/stats/requests",
            Some("token=s3cret"),
            &headers(&[]),
        );
        assert_eq!(api.unwrap_err().status, 401);
    }

    #[test]
    fn cross_site_posts_and_foreign_hosts_are_refused() {
        let g = Guard::new("127.0.0.1".parse().unwrap(), None).unwrap();
        let post = |h: &HeaderMap| g.check(&Method::POST, "/stop", None, h);
        let same = headers(&[
            ("host", "127.0.0.1:8089"),
            ("origin", "http://127.0.0.1:8089"),
        ]);
        assert_eq!(post(&same), Ok(Pass::Plain));
        let other = headers(&[
            ("host", "127.0.0.1:8089"),
            ("origin", "http://evil.example"),
        ]);
        assert_eq!(post(&other).unwrap_err().status, 403);
        let fetch = headers(&[("host", "localhost:8089"), ("sec-fetch-site", "cross-site")]);
        assert_eq!(post(&fetch).unwrap_err().status, 403);
        let rebound = headers(&[("host", "evil.example:8089")]);
        assert_eq!(
            g.check(&Method::GET, "/", None, &rebound)
                .unwrap_err()
                .status,
            403
        );
        let v6 = headers(&[("host", "[::1]:8089")]);
        assert_eq!(g.check(&Method::GET, "/", None, &v6), Ok(Pass::Plain));
    }

    #[test]
    fn the_gets_that_act_are_guarded_as_posts_are() {
        let g = Guard::new("127.0.0.1".parse().unwrap(), None).unwrap();
        let get = |path: &str, h: &HeaderMap| g.check(&Method::GET, path, None, h);
        let host = ("host", "127.0.0.1:8089");
        // a script (curl, requests) and Locust's own page on this origin
        for ok in [
            headers(&[host]),
            headers(&[host, ("sec-fetch-site", "same-origin")]),
            headers(&[host, ("sec-fetch-site", "none")]),
            headers(&[host, ("referer", "http://127.0.0.1:8089/?tab=stats")]),
        ] {
            for path in ["/stop", "/stats/reset"] {
                assert_eq!(get(path, &ok), Ok(Pass::Plain), "{path} {ok:?}");
            }
        }
        // another site's <img src>, link or script; a prefetch
        for bad in [
            headers(&[host, ("sec-fetch-site", "cross-site")]),
            headers(&[host, ("sec-fetch-site", "same-site")]),
            headers(&[host, ("origin", "http://evil.example")]),
            headers(&[host, ("origin", "null")]),
            headers(&[host, ("referer", "http://evil.example/page")]),
            headers(&[host, ("referer", "http://127.0.0.1:8090/")]),
            headers(&[host, ("sec-purpose", "prefetch;prerender")]),
            headers(&[host, ("purpose", "prefetch")]),
        ] {
            for path in ["/stop", "/stats/reset"] {
                assert_eq!(get(path, &bad).unwrap_err().status, 403, "{path} {bad:?}");
            }
        }
        // reading is not acting: another site's GET of the figures is
        // answered (a browser keeps the answer from that site's script)
        let read = headers(&[host, ("sec-fetch-site", "cross-site")]);
        assert_eq!(get("/stats/requests", &read), Ok(Pass::Plain));
    }
}
