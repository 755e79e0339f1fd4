//! TLS on the worker port: the coordinator's identity, and how its local
//! workers verify it. Remote workers are given their CA by whoever starts
//! them (`worker --tls-ca`); local workers get theirs from the coordinator:
//! `--tls-ca` when given (the CA that signed `--tls-cert`), else the
//! certificates of `--tls-cert` itself (a self-signed certificate, or a leaf
//! followed by the CA or intermediate that signed it). They dial an IP
//! address, so when the certificate does not name that address they check
//! one of its DNS names instead (`worker --tls-domain`). Both are checked
//! before any worker starts, the way a worker would check them.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// What can be wrong with the worker port's TLS files.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file holds no PEM certificate, or a malformed one.
    #[error("{path}: no readable PEM certificate ({reason})")]
    Certificates { path: PathBuf, reason: String },
    /// Local workers could not verify the coordinator with what they would be given.
    #[error(
        "local workers cannot verify --tls-cert {cert} when dialling {ip}: {reason}; \
         give the coordinator --tls-ca CA.pem (the CA that signed it), or put that CA \
         after the certificate in {cert}"
    )]
    LocalWorkers {
        cert: PathBuf,
        ip: IpAddr,
        reason: String,
    },
}

/// TLS settings of the worker port.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The certificate chain, leaf first (PEM).
    pub cert_pem: String,
    /// Its private key (PEM).
    pub key_pem: String,
    /// CA that signs worker client certificates (mutual TLS).
    pub client_ca_pem: Option<String>,
    /// How local workers verify us; `None` when the fleet has none.
    pub local: Option<LocalTrust>,
}

/// How a local worker verifies the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalTrust {
    /// The PEM file of the certificates it trusts (`worker --tls-ca`).
    pub ca_path: PathBuf,
    /// The name it checks (`worker --tls-domain`), when the certificate
    /// does not name the address it dials.
    pub domain: Option<String>,
}

/// The files of `cicada run --tls-*`.
#[derive(Debug, Clone, Copy)]
pub struct TlsFiles<'a> {
    /// `--tls-cert`: the certificate, then any chain.
    pub cert: &'a Path,
    /// `--tls-key`.
    pub key: &'a Path,
    /// `--tls-client-ca`.
    pub client_ca: Option<&'a Path>,
    /// `--tls-ca`: the CA that signed `cert`.
    pub ca: Option<&'a Path>,
}

impl ServerTls {
    /// Read the files; with `local_dial` (the address local workers dial),
    /// settle and check how they verify us.
    pub fn load(files: TlsFiles<'_>, local_dial: Option<IpAddr>) -> Result<Self, TlsError> {
        let cert_pem = read(files.cert)?;
        let local = match local_dial {
            Some(ip) => {
                let ca = files.ca.map(|p| read(p).map(|pem| (p, pem))).transpose()?;
                Some(local_trust(files.cert, &cert_pem, ca, ip)?)
            }
            None => None,
        };
        Ok(Self {
            key_pem: read(files.key)?,
            client_ca_pem: files.client_ca.map(read).transpose()?,
            cert_pem,
            local,
        })
    }

    /// The server side of the worker port.
    pub(super) fn server_config(&self) -> ServerTlsConfig {
        let mut config =
            ServerTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        if let Some(ca) = &self.client_ca_pem {
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        config
    }
}

fn read(path: &Path) -> Result<String, TlsError> {
    std::fs::read_to_string(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn certificates(path: &Path, pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |reason: String| TlsError::Certificates {
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("the file holds none".into()));
    }
    Ok(certs)
}

/// What local workers dialling `ip` are given to verify the chain in
/// `cert_pem`: the CA file (`ca`, else the chain file itself) and the name
/// to check; checked as a worker would check it.
fn local_trust(
    cert_path: &Path,
    cert_pem: &str,
    ca: Option<(&Path, String)>,
    ip: IpAddr,
) -> Result<LocalTrust, TlsError> {
    let chain = certificates(cert_path, cert_pem)?;
    let (ca_path, roots) = match &ca {
        Some((path, pem)) => (path.to_path_buf(), certificates(path, pem)?),
        None => (cert_path.to_path_buf(), chain.clone()),
    };
    let cannot = |reason: String| TlsError::LocalWorkers {
        cert: cert_path.to_path_buf(),
        ip,
        reason,
    };
    let domain = name_to_check(&chain[0], ip).map_err(|e| cannot(e.to_string()))?;
    let name = match &domain {
        Some(d) => ServerName::try_from(d.clone()).map_err(|e| cannot(e.to_string()))?,
        None => ServerName::IpAddress(ip.into()),
    };
    let mut store = rustls::RootCertStore::empty();
    store.add_parsable_certificates(roots);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(store.into(), provider)
            .build()
            .map_err(|e| cannot(e.to_string()))?;
    verifier
        .verify_server_cert(&chain[0], &chain[1..], &name, &[], UnixTime::now())
        .map_err(|e| cannot(e.to_string()))?;
    Ok(LocalTrust { ca_path, domain })
}

/// Why no name to check can be taken from a certificate.
#[derive(Debug, thiserror::Error)]
enum NameError {
    /// The certificate cannot be parsed.
    #[error("{0}")]
    Unreadable(webpki::Error),
    /// It names neither the address dialled nor any DNS name.
    #[error("the certificate names neither {0} nor any DNS name")]
    Nameless(IpAddr),
}

/// The name a worker dialling `ip` should check in `leaf`: none (the
/// address itself) when the certificate names it, else its first DNS name
/// (a wildcard's with a label of ours in the star's place).
fn name_to_check(leaf: &CertificateDer<'_>, ip: IpAddr) -> Result<Option<String>, NameError> {
    let ee = webpki::EndEntityCert::try_from(leaf).map_err(NameError::Unreadable)?;
    if ee
        .verify_is_valid_for_subject_name(&ServerName::IpAddress(ip.into()))
        .is_ok()
    {
        return Ok(None);
    }
    let dns = ee.valid_dns_names().next().ok_or(NameError::Nameless(ip))?;
    Ok(Some(match dns.strip_prefix("*.") {
        Some(parent) => format!("cicada-local.{parent}"),
        None => dns.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};

    const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn leaf(names: &[&str], ips: &[IpAddr], ca: &CertifiedIssuer<'_, KeyPair>) -> String {
        let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.subject_alt_names
            .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        p.signed_by(&KeyPair::generate().unwrap(), ca)
            .unwrap()
            .pem()
    }

    fn ca() -> CertifiedIssuer<'static, KeyPair> {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
    }

    fn trust(cert: &str, ca: Option<&str>) -> Result<LocalTrust, TlsError> {
        let ca = ca.map(|pem| (Path::new("ca.pem"), pem.to_string()));
        local_trust(Path::new("cert.pem"), cert, ca, LOOPBACK)
    }

    #[test]
    fn local_workers_check_the_address_or_a_dns_name() {
        let ca = ca();
        let by_ip = leaf(&["coordinator.test"], &[LOOPBACK], &ca);
        let t = trust(&by_ip, Some(&ca.pem())).unwrap();
        assert_eq!(t.ca_path, Path::new("ca.pem"));
        assert_eq!(t.domain, None);
        let by_name = leaf(&["coordinator.test", "other.test"], &[], &ca);
        let t = trust(&by_name, Some(&ca.pem())).unwrap();
        assert_eq!(t.domain.as_deref(), Some("coordinator.test"));
        let wildcard = leaf(&["*.fleet.test"], &[], &ca);
        let t = trust(&wildcard, Some(&ca.pem())).unwrap();
        assert_eq!(t.domain.as_deref(), Some("cicada-local.fleet.test"));
    }

    #[test]
    fn without_a_ca_local_workers_trust_the_certificate_file() {
        let own = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let t = trust(&own.cert.pem(), None).unwrap();
        assert_eq!(t.ca_path, Path::new("cert.pem"));
        assert_eq!(t.domain.as_deref(), Some("localhost"));
        let ca = ca();
        let signed = leaf(&["coordinator.test"], &[], &ca);
        let chain = format!("{signed}{}", ca.pem());
        assert_eq!(
            trust(&chain, None).unwrap().domain.as_deref(),
            Some("coordinator.test")
        );
        // the leaf alone: nothing it is given verifies it
        let e = trust(&signed, None).unwrap_err().to_string();
        assert!(e.contains("--tls-ca"), "{e}");
        // nor does another CA
        let e = trust(&signed, Some(&self::ca().pem()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot verify"), "{e}");
        let e = trust("not pem", None).unwrap_err().to_string();
        assert!(e.contains("no readable PEM certificate"), "{e}");
    }
}
