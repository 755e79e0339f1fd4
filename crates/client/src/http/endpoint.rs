//! Where requests go: a URL parsed once into its origin (scheme, host, port:
//! what a connection is to) and its path. Every endpoint of one origin shares
//! that origin's connections (`pool`) and resolved addresses.

use std::sync::Arc;

use rustls::pki_types::ServerName;

use super::HttpError;
use super::addresses::AddressBook;
use super::pool::Pool;
use super::proxy::ProxyRoute;

/// A request target: one origin and a path (with query).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub(crate) origin: Arc<Origin>,
    pub(crate) path: String,
}

impl Endpoint {
    /// The URL this endpoint was made from (for messages).
    pub fn url(&self) -> String {
        format!("{}{}", self.origin.base(), self.path)
    }
}

/// The (scheme, host, port) a connection is made to, with its connections
/// and cached addresses.
#[derive(Debug)]
pub(crate) struct Origin {
    pub tls: bool,
    /// Host without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// `Host` header value (brackets and a non-default port kept).
    pub host_header: String,
    /// Name to verify a TLS certificate against.
    pub server_name: Option<ServerName<'static>>,
    /// Its connections and what its server taught about reusing them.
    pub pool: Pool,
    /// Its addresses and which of them answer (the proxy's, when it has one).
    pub addresses: AddressBook,
    /// The proxy it is reached through, if any.
    pub route: Option<ProxyRoute>,
}

/// The parts of an absolute http(s) URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UrlParts {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub host_header: String,
    pub path: String,
}

/// Split an absolute `http://` or `https://` URL.
pub(crate) fn split_url(url: &str) -> Result<UrlParts, HttpError> {
    let bad = |why: &str| HttpError::BadUrl {
        url: url.to_string(),
        reason: why.to_string(),
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        Some(other) => return Err(bad(&format!("scheme {other} is not http or https"))),
        None => return Err(bad("not an absolute URL")),
    };
    let authority = uri.authority().ok_or_else(|| bad("no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("credentials in the URL are not supported; use headers"));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let path = if path.is_empty() { "/".into() } else { path };
    Ok(UrlParts {
        tls,
        host: host.to_string(),
        port,
        host_header: authority.as_str().to_string(),
        path,
    })
}

impl Origin {
    pub fn new(parts: &UrlParts, route: Option<ProxyRoute>) -> Result<Self, HttpError> {
        let server_name = if parts.tls {
            Some(
                ServerName::try_from(parts.host.clone()).map_err(|e| HttpError::BadUrl {
                    url: parts.host.clone(),
                    reason: format!("not a name a certificate can carry: {e}"),
                })?,
            )
        } else {
            None
        };
        Ok(Self {
            tls: parts.tls,
            host: parts.host.clone(),
            port: parts.port,
            host_header: parts.host_header.clone(),
            server_name,
            pool: Pool::default(),
            addresses: AddressBook::default(),
            route,
        })
    }

    /// `scheme://host:port`.
    pub fn base(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.host_header
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_origin_and_path() {
        let p = split_url("http://10.0.0.5:8000/v1/chat/completions?x=1").unwrap();
        assert_eq!(
            p,
            UrlParts {
                tls: false,
                host: "10.0.0.5".into(),
                port: 8000,
                host_header: "10.0.0.5:8000".into(),
                path: "/v1/chat/completions?x=1".into(),
            }
        );
        let p = split_url("https://[::1]/metrics").unwrap();
        assert_eq!((p.tls, p.host.as_str(), p.port), (true, "::1", 443));
        assert_eq!(p.host_header, "[::1]");
        assert_eq!(split_url("http://svc").unwrap().path, "/");
        assert!(split_url("ftp://x/").is_err());
        assert!(split_url("/relative").is_err());
        assert!(split_url("http://u:p@x/").is_err());
    }
}
