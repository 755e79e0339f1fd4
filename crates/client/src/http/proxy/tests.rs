//! The proxy rules, case by case, each naming whose behaviour it follows:
//! curl (libcurl-env(3), CURLOPT_NOPROXY(3)), Python's
//! `urllib.request.getproxies_environment` and `proxy_bypass_environment`
//! (what aiohttp's `trust_env=True`, and so `vllm bench serve`, reads), or
//! hyper-util's matcher, or where cicada differs and why.

use std::collections::HashMap;

use base64::Engine as _;

use super::*;

/// An environment of `pairs` only.
fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

/// Where a request goes: `"direct"`, or `"<proxy url> from <source>"`.
fn route(rules: &ProxyRules, https: bool, host: &str, port: u16) -> String {
    match rules.route(https, host, port) {
        None => "direct".to_string(),
        Some(r) => {
            assert_eq!(r.connect, https, "CONNECT exactly for https targets");
            format!("{} from {}", r.url(), r.source)
        }
    }
}

/// Environment variables, name and value.
type Vars = &'static [(&'static str, &'static str)];

const HTTP: bool = false;
const HTTPS: bool = true;

#[test]
fn which_variable_gives_the_proxy() {
    // (follows, environment, https target?, expected route)
    let cases: &[(&str, Vars, bool, &str)] = &[
        ("nothing set: direct (all)", &[], HTTP, "direct"),
        (
            "http targets read http_proxy (curl, Python)",
            &[("http_proxy", "http://p:3128")],
            HTTP,
            "http://p:3128 from http_proxy",
        ),
        (
            "uppercase HTTP_PROXY is read (Python/aiohttp; curl reads only the lowercase one)",
            &[("HTTP_PROXY", "http://p:3128")],
            HTTP,
            "http://p:3128 from HTTP_PROXY",
        ),
        (
            "lowercase wins over uppercase (curl, Python)",
            &[
                ("http_proxy", "http://low:1"),
                ("HTTP_PROXY", "http://up:2"),
            ],
            HTTP,
            "http://low:1 from http_proxy",
        ),
        (
            "https targets read HTTPS_PROXY (curl, Python)",
            &[("HTTPS_PROXY", "http://p:3128")],
            HTTPS,
            "http://p:3128 from HTTPS_PROXY",
        ),
        (
            "https_proxy wins over HTTPS_PROXY (curl, Python)",
            &[
                ("https_proxy", "http://low:1"),
                ("HTTPS_PROXY", "http://up:2"),
            ],
            HTTPS,
            "http://low:1 from https_proxy",
        ),
        (
            "http_proxy is not for https targets (curl, Python: per scheme)",
            &[("http_proxy", "http://p:3128")],
            HTTPS,
            "direct",
        ),
        (
            "https_proxy is not for http targets (curl, Python: per scheme)",
            &[("https_proxy", "http://p:3128")],
            HTTP,
            "direct",
        ),
        (
            "ALL_PROXY when no scheme's variable is set (curl; aiohttp has none)",
            &[("ALL_PROXY", "http://all:1")],
            HTTPS,
            "http://all:1 from ALL_PROXY",
        ),
        (
            "all_proxy wins over ALL_PROXY (curl)",
            &[("all_proxy", "http://low:1"), ("ALL_PROXY", "http://up:2")],
            HTTP,
            "http://low:1 from all_proxy",
        ),
        (
            "a scheme's variable wins over all_proxy (curl)",
            &[("http_proxy", "http://h:1"), ("all_proxy", "http://all:2")],
            HTTP,
            "http://h:1 from http_proxy",
        ),
        (
            "all_proxy still serves the other scheme (curl)",
            &[("http_proxy", "http://h:1"), ("all_proxy", "http://all:2")],
            HTTPS,
            "http://all:2 from all_proxy",
        ),
        (
            "an empty lowercase variable hides the uppercase one (Python)",
            &[("http_proxy", ""), ("HTTP_PROXY", "http://up:2")],
            HTTP,
            "direct",
        ),
        (
            "an empty https_proxy hides HTTPS_PROXY (Python)",
            &[("https_proxy", ""), ("HTTPS_PROXY", "http://up:2")],
            HTTPS,
            "direct",
        ),
        (
            "an empty variable is unset, so all_proxy applies (curl)",
            &[("http_proxy", ""), ("all_proxy", "http://all:2")],
            HTTP,
            "http://all:2 from all_proxy",
        ),
        (
            "an empty uppercase variable alone is unset (curl, Python)",
            &[("HTTPS_PROXY", "")],
            HTTPS,
            "direct",
        ),
        (
            "CGI guard: REQUEST_METHOD set, HTTP_PROXY ignored (Python CVE-2016-1000110, hyper-util)",
            &[("REQUEST_METHOD", "GET"), ("HTTP_PROXY", "http://evil:1")],
            HTTP,
            "direct",
        ),
        (
            "CGI guard: set even when empty (Python tests `in os.environ`)",
            &[("REQUEST_METHOD", ""), ("HTTP_PROXY", "http://evil:1")],
            HTTP,
            "direct",
        ),
        (
            "CGI guard keeps lowercase http_proxy (Python)",
            &[("REQUEST_METHOD", "GET"), ("http_proxy", "http://p:1")],
            HTTP,
            "http://p:1 from http_proxy",
        ),
        (
            "CGI guard keeps HTTPS_PROXY (Python, hyper-util: only HTTP_PROXY comes from a header)",
            &[("REQUEST_METHOD", "GET"), ("HTTPS_PROXY", "http://p:1")],
            HTTPS,
            "http://p:1 from HTTPS_PROXY",
        ),
        (
            "CGI guard: the ignored HTTP_PROXY is unset, so ALL_PROXY applies (curl never reads HTTP_PROXY)",
            &[
                ("REQUEST_METHOD", "GET"),
                ("HTTP_PROXY", "http://evil:1"),
                ("ALL_PROXY", "http://all:2"),
            ],
            HTTP,
            "http://all:2 from ALL_PROXY",
        ),
        (
            "loopback is proxied too (curl, aiohttp; Go exempts it, cicada does not)",
            &[("http_proxy", "http://p:3128")],
            HTTP,
            "http://p:3128 from http_proxy",
        ),
    ];
    for &(follows, vars, https, want) in cases {
        let rules = ProxyRules::from_env(env(vars)).unwrap_or_else(|e| panic!("{follows}: {e}"));
        assert_eq!(route(&rules, https, "127.0.0.1", 8000), want, "{follows}");
    }
}

#[test]
fn which_no_proxy_variable_counts() {
    // (follows, environment, goes direct to example.com?)
    let cases: &[(&str, Vars, bool)] = &[
        (
            "NO_PROXY alone (curl, Python)",
            &[("NO_PROXY", "example.com")],
            true,
        ),
        (
            "no_proxy wins over NO_PROXY (curl, Python)",
            &[("no_proxy", "other.test"), ("NO_PROXY", "example.com")],
            false,
        ),
        (
            "an empty no_proxy hides NO_PROXY (Python)",
            &[("no_proxy", ""), ("NO_PROXY", "example.com")],
            false,
        ),
        (
            "an empty NO_PROXY exempts nothing",
            &[("NO_PROXY", "")],
            false,
        ),
    ];
    for &(follows, vars, direct) in cases {
        let mut vars = vars.to_vec();
        vars.push(("https_proxy", "http://p:3128"));
        let rules = ProxyRules::from_env(env(&vars)).unwrap();
        assert_eq!(
            rules.route(HTTPS, "example.com", 443).is_none(),
            direct,
            "{follows}"
        );
    }
}

fn basic(pair: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

#[test]
fn proxy_urls_parse_to_host_port_and_credentials() {
    // (follows, https_proxy, host, port, Proxy-Authorization)
    let cases: &[(&str, &str, &str, u16, Option<&str>)] = &[
        (
            "host and port",
            "http://proxy.test:3128",
            "proxy.test",
            3128,
            None,
        ),
        (
            "port 80 by default (aiohttp, hyper-util; curl's is 1080)",
            "http://proxy.test",
            "proxy.test",
            80,
            None,
        ),
        (
            "an empty port is the default (URL syntax)",
            "http://proxy.test:",
            "proxy.test",
            80,
            None,
        ),
        (
            "no scheme means http (curl, hyper-util)",
            "proxy.test:3128",
            "proxy.test",
            3128,
            None,
        ),
        (
            "the scheme and host are case-insensitive",
            "HTTP://Proxy.Test:3128",
            "proxy.test",
            3128,
            None,
        ),
        (
            "a path is ignored (curl, Python)",
            "http://proxy.test:3128/",
            "proxy.test",
            3128,
            None,
        ),
        (
            "an IPv6 proxy in brackets",
            "http://[::1]:3128",
            "::1",
            3128,
            None,
        ),
        (
            "user and password: Basic auth (curl, aiohttp)",
            "http://user:pass@p:1",
            "p",
            1,
            Some("user:pass"),
        ),
        (
            "credentials are percent-decoded (curl, aiohttp)",
            "http://us%65r:p%40ss%3Aw@p:1",
            "p",
            1,
            Some("user:p@ss:w"),
        ),
        (
            "a user without a password sends an empty one (curl, aiohttp)",
            "http://user@p:1",
            "p",
            1,
            Some("user:"),
        ),
        (
            "an @ in the password, unescaped: the last @ ends it (Python's urlsplit)",
            "http://user:p@ss@p:1",
            "p",
            1,
            Some("user:p@ss"),
        ),
    ];
    for &(follows, url, host, port, pair) in cases {
        let rules = ProxyRules::from_env(env(&[("https_proxy", url)]))
            .unwrap_or_else(|e| panic!("{follows}: {e}"));
        let r = rules.route(HTTPS, "target.test", 443).expect(follows);
        assert_eq!((r.host.as_str(), r.port), (host, port), "{follows}");
        assert_eq!(r.auth, pair.map(basic), "{follows}");
        assert!(r.connect, "{follows}");
        assert_eq!(r.source, "https_proxy", "{follows}");
    }
}

#[test]
fn unusable_proxy_urls_are_setup_errors_naming_the_variable() {
    // (follows, variable, value, a part of the message)
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "an https proxy (aiohttp skips it with a warning; cicada refuses)",
            "HTTPS_PROXY",
            "https://p:443",
            "not https",
        ),
        (
            "socks5 (curl speaks it; cicada does not)",
            "ALL_PROXY",
            "socks5://p:1080",
            "not socks5",
        ),
        ("socks5h", "all_proxy", "socks5h://p:1080", "not socks5h"),
        ("socks4a", "http_proxy", "SOCKS4A://p:1080", "not socks4a"),
        (
            "a port out of range",
            "http_proxy",
            "http://p:99999",
            "port \"99999\"",
        ),
        ("port 0", "http_proxy", "http://p:0", "port \"0\""),
        ("no host", "HTTP_PROXY", "http://:3128", "no host"),
        (
            "an IPv6 address without brackets",
            "http_proxy",
            "http://::1:3128",
            "brackets",
        ),
        (
            "a space in the host",
            "http_proxy",
            "http://pro xy:3128",
            "not a host name",
        ),
        (
            "a broken %-escape",
            "http_proxy",
            "http://user:se%zzcret@p:1",
            "%-escape",
        ),
    ];
    for &(follows, var, value, part) in cases {
        let err = ProxyRules::from_env(env(&[(var, value)])).expect_err(follows);
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("{var} is ")), "{follows}: {msg}");
        assert!(msg.contains(part), "{follows}: {msg}");
        assert!(
            !msg.contains("se%zzcret"),
            "{follows}: the password shows: {msg}"
        );
    }
}

#[test]
fn an_explicit_setting_overrides_the_environment() {
    let vars = [
        ("https_proxy", "http://env:1"),
        ("http_proxy", "http://env:1"),
        ("no_proxy", "env-exempt.test"),
    ];
    // "none": direct, whatever the environment says
    let none = ProxyRules::from_setting(&ProxySetting::None, &[], env(&vars)).unwrap();
    assert_eq!(route(&none, HTTPS, "a.test", 443), "direct");

    // a URL: for both schemes, with its own exemptions only
    let url = ProxySetting::Url("http://u:p@set:3128".into());
    let exempt = ["set-exempt.test".to_string(), "10.0.0.0/8".to_string()];
    let set = ProxyRules::from_setting(&url, &exempt, env(&vars)).unwrap();
    assert_eq!(
        route(&set, HTTPS, "a.test", 443),
        "http://set:3128 from target.proxy"
    );
    assert_eq!(
        route(&set, HTTP, "a.test", 80),
        "http://set:3128 from target.proxy"
    );
    assert_eq!(route(&set, HTTPS, "set-exempt.test", 443), "direct");
    assert_eq!(route(&set, HTTP, "10.9.9.9", 80), "direct");
    assert_eq!(
        route(&set, HTTPS, "env-exempt.test", 443),
        "http://set:3128 from target.proxy"
    );
    let r = set.route(HTTPS, "a.test", 443).unwrap();
    assert_eq!(r.auth, Some(basic("u:p")));
    assert!(
        !format!("{r:?}{set:?}").contains(&basic("u:p")),
        "credentials in Debug"
    );

    // "env": the environment's rules, the setting's exemptions added
    let both = ProxyRules::from_setting(&ProxySetting::Env, &exempt, env(&vars)).unwrap();
    assert_eq!(
        route(&both, HTTPS, "a.test", 443),
        "http://env:1 from https_proxy"
    );
    assert_eq!(route(&both, HTTPS, "env-exempt.test", 443), "direct");
    assert_eq!(route(&both, HTTPS, "set-exempt.test", 443), "direct");

    // a bad explicit URL names the key
    let err = ProxyRules::from_setting(&ProxySetting::Url("socks5://s:1".into()), &[], env(&[]))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("target.proxy is socks5://s:1"),
        "{err}"
    );
}

#[test]
fn route_urls_bracket_ipv6_and_hide_credentials() {
    let rules = ProxyRules::from_env(env(&[("http_proxy", "http://a:b@[fd00::1]:3128")])).unwrap();
    let r = rules.route(HTTP, "t.test", 80).unwrap();
    assert_eq!(r.url(), "http://[fd00::1]:3128");
    assert!(!r.connect);
    assert_eq!(authority("::1", 443), "[::1]:443");
    assert_eq!(authority("example.com", 443), "example.com:443");
}
