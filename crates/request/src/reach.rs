//! How requests reach the server: whom TLS trusts, the HTTP version, which
//! of a name's addresses new connections use, the proxy, and the most of one
//! response held at once. Keys of `[target]` that travel unchanged into each
//! worker's plan and on into the client.

use cicada_metrics::ByteSize;
use serde::{Deserialize, Serialize};

/// Default of `target.max_event_size`: far above any real event (a
/// 128k-token answer with logprobs is a few MiB), far below a worker's memory.
pub const DEFAULT_MAX_EVENT_SIZE: ByteSize = ByteSize::mib(16);

/// Whom https connections trust (`target.tls_ca`, `target.tls_insecure`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TlsSettings {
    /// PEM text of extra CA certificates to trust beside the system's (read
    /// by the coordinator, shipped in the plan so remote workers need no file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    /// Accept any certificate (testing only).
    #[serde(default)]
    pub insecure: bool,
}

/// Which HTTP version requests go out in (`target.http`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// HTTP/2 where an https server offers it (ALPN), else HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/2 only: over TLS by ALPN, over plain TCP with prior knowledge (h2c).
    Http2,
}

impl HttpVersion {
    /// The name written in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            HttpVersion::Auto => "auto",
            HttpVersion::Http1 => "1.1",
            HttpVersion::Http2 => "2",
        }
    }
}

impl Serialize for HttpVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for HttpVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = HttpVersion;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"auto\", \"1.1\" or \"2\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<HttpVersion, E> {
                match v {
                    "auto" => Ok(HttpVersion::Auto),
                    "1.1" | "1" | "http/1.1" => Ok(HttpVersion::Http1),
                    "2" | "h2" | "http/2" => Ok(HttpVersion::Http2),
                    other => Err(E::custom(format!(
                        "unknown HTTP version \"{other}\": use \"auto\", \"1.1\" or \"2\""
                    ))),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<HttpVersion, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<HttpVersion, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<HttpVersion, E> {
                if (v - 1.1).abs() < 1e-9 {
                    Ok(HttpVersion::Http1)
                } else {
                    self.visit_str(&v.to_string())
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// How new connections choose among the addresses a target's name resolves
/// to (`target.addresses`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressChoice {
    /// The first live address in RFC 8305 order (as curl and aiohttp do).
    #[default]
    First,
    /// The live addresses in turn (e.g. a headless Kubernetes Service's pods).
    Spread,
}

/// Which proxy requests go through (`target.proxy`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProxySetting {
    /// The sending process's environment (`HTTP_PROXY`, `HTTPS_PROXY`,
    /// `ALL_PROXY`, `NO_PROXY`, as curl and aiohttp read them).
    #[default]
    Env,
    /// No proxy, whatever the environment says.
    None,
    /// This proxy (`http://[user:pass@]host[:port]`) for every target.
    Url(String),
}

impl ProxySetting {
    /// The setting as shown in results: a proxy URL's credentials masked.
    pub fn redacted(&self) -> Self {
        match self {
            ProxySetting::Url(u) => ProxySetting::Url(redact_userinfo(u)),
            other => other.clone(),
        }
    }
}

impl Serialize for ProxySetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ProxySetting::Env => s.serialize_str("env"),
            ProxySetting::None => s.serialize_str("none"),
            ProxySetting::Url(u) => s.serialize_str(u),
        }
    }
}

impl<'de> Deserialize<'de> for ProxySetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "env" => ProxySetting::Env,
            "none" => ProxySetting::None,
            _ if s.starts_with("http://") || s.starts_with("https://") || s.contains("://") => {
                ProxySetting::Url(s)
            }
            other => {
                return Err(serde::de::Error::custom(format!(
                    "\"{other}\" is not a proxy: use \"env\", \"none\" or http://host:port"
                )));
            }
        })
    }
}

/// `scheme://user:pass@host` as `scheme://***@host`.
fn redact_userinfo(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}
