//! Gateways between the client and a server, as real deployments have them:
//! nginx as a TLS + HTTP/2 (and h2c) reverse proxy, and tinyproxy as a
//! forward proxy (absolute-form for http, CONNECT for https, BasicAuth).
//!
//! Both come from Debian's packages, unpacked by `scripts/gateways.sh` into
//! a cache outside the clone (see [`crate::servers::install`]); each gateway
//! here runs with a configuration of its own in a temp directory, on free
//! loopback ports, on [`SERVER_CORE`] (it is part of the server side), in its
//! own process group, which is killed when the gateway is dropped.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::free_port;
use crate::servers::{SERVER_CORE, confine, install, log_tail, stop_group};

/// How long a gateway may take to accept connections.
const START_LIMIT: Duration = Duration::from_secs(30);

/// The installed gateway binaries.
struct Binaries {
    nginx: PathBuf,
    tinyproxy: PathBuf,
}

/// The binaries, installed (or found installed) once per test process.
fn binaries() -> &'static Binaries {
    static BINARIES: OnceLock<Binaries> = OnceLock::new();
    BINARIES.get_or_init(|| {
        let root = install("gateways.sh");
        Binaries {
            nginx: root.join("usr/sbin/nginx"),
            tinyproxy: root.join("usr/bin/tinyproxy"),
        }
    })
}

/// Whether nginx keeps its connections to the upstream server open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamKeepAlive {
    /// A new upstream connection per request, as for llama-server, which
    /// closes after every response anyway.
    Off,
    /// Keep up to 64 idle upstream connections, each for at most this long.
    /// Keep it below the server's own idle timeout (uvicorn's is 5 s: use
    /// 4 s), or nginx reuses a connection the server has just closed and
    /// answers a POST with 502 (nginx does not resend a POST upstream).
    On(Duration),
}

/// How nginx is configured.
#[derive(Debug, Clone)]
pub struct NginxOptions {
    /// Requests (HTTP/1.1) or streams (HTTP/2, then GOAWAY) per client
    /// connection before nginx ends it (`keepalive_requests`).
    pub keepalive_requests: u32,
    /// nginx's connections to the upstream.
    pub upstream_keepalive: UpstreamKeepAlive,
}

impl Default for NginxOptions {
    fn default() -> Self {
        Self {
            // nginx's own default
            keepalive_requests: 1000,
            upstream_keepalive: UpstreamKeepAlive::Off,
        }
    }
}

/// One request nginx served, from its access log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// nginx's serial number of the client connection (`$connection`).
    pub connection: u64,
    /// The request's place on that connection, from 1 (`$connection_requests`).
    pub nth: u64,
    /// The port it came in on (the TLS or the h2c listener).
    pub port: u16,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub protocol: String,
    /// The status nginx answered.
    pub status: u16,
    /// The request line.
    pub request: String,
}

/// A running nginx in front of one upstream server.
pub struct Nginx {
    child: Child,
    /// `https://127.0.0.1:PORT`: TLS, HTTP/2 or HTTP/1.1 by ALPN.
    pub https_url: String,
    /// `http://127.0.0.1:PORT`: h2c with prior knowledge only.
    pub h2c_url: String,
    /// The TLS listener's port.
    pub tls_port: u16,
    /// The h2c listener's port.
    pub h2c_port: u16,
    /// The CA that signed nginx's certificate (PEM), for `target.tls_ca`.
    pub ca_pem: PathBuf,
    /// nginx's certificate (PEM; SAN 127.0.0.1 and localhost).
    pub cert_pem: PathBuf,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// Start nginx proxying to `upstream` (`http://127.0.0.1:PORT`) and wait
    /// until both listeners accept connections.
    pub fn start(upstream: &str, options: NginxOptions) -> Nginx {
        let bins = binaries();
        let dir = crate::scratch();
        let upstream_addr = upstream
            .strip_prefix("http://")
            .map(|a| a.trim_end_matches('/'))
            .unwrap_or_else(|| panic!("nginx's upstream must be http://HOST:PORT, not {upstream}"));
        let pki = Pki::generate(dir.path());
        for tmp in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            std::fs::create_dir_all(dir.path().join("tmp").join(tmp)).expect("nginx temp dir");
        }
        let (tls_port, h2c_port) = (free_port(), free_port());
        let conf = nginx_conf(dir.path(), upstream_addr, tls_port, h2c_port, &options);
        let conf_path = crate::write(dir.path(), "nginx.conf", &conf);
        let mut cmd = Command::new(&bins.nginx);
        cmd.arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .args(["-e", "stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(&dir.path().join("error.log")));
        confine(&mut cmd, Some(SERVER_CORE));
        let mut child = cmd.spawn().expect("starting nginx");
        let error_log = dir.path().join("error.log");
        wait_accepting(&mut child, "nginx", &[tls_port, h2c_port], &error_log);
        Nginx {
            child,
            https_url: format!("https://127.0.0.1:{tls_port}"),
            h2c_url: format!("http://127.0.0.1:{h2c_port}"),
            tls_port,
            h2c_port,
            ca_pem: pki.ca,
            cert_pem: pki.cert,
            dir,
        }
    }

    /// nginx's error log so far (its last lines), for failure messages.
    pub fn log(&self) -> String {
        log_tail(&self.dir.path().join("error.log"))
    }

    /// The requests nginx has logged so far, in order (nginx logs a request
    /// when it has finished it, which may be just after its client read the
    /// response).
    pub fn served(&self) -> Vec<Served> {
        let text = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        text.lines().filter_map(parse_access_line).collect()
    }

    /// The POSTs nginx logged, once it has logged `n` requests of any kind
    /// (or 30 s passed).
    pub fn posts_once_served(&self, n: usize) -> Vec<Served> {
        self.wait_served(n, Duration::from_secs(30))
            .into_iter()
            .filter(|s| s.request.starts_with("POST"))
            .collect()
    }

    /// Wait until nginx has logged `n` requests (or `limit` passed) and
    /// return what it logged.
    pub fn wait_served(&self, n: usize, limit: Duration) -> Vec<Served> {
        let deadline = Instant::now() + limit;
        loop {
            let served = self.served();
            if served.len() >= n || Instant::now() >= deadline {
                return served;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM is nginx's fast shutdown
        stop_group(&mut self.child, Duration::from_secs(5));
    }
}

/// `CONN NTH PORT PROTOCOL STATUS "REQUEST"`, as `log_format cicada` writes it.
fn parse_access_line(line: &str) -> Option<Served> {
    let (head, request) = line.split_once(" \"")?;
    let mut f = head.split(' ');
    let served = Served {
        connection: f.next()?.parse().ok()?,
        nth: f.next()?.parse().ok()?,
        port: f.next()?.parse().ok()?,
        protocol: f.next()?.to_string(),
        status: f.next()?.parse().ok()?,
        request: request.strip_suffix('"')?.to_string(),
    };
    Some(served)
}

/// nginx's configuration: every path that would default to /var/lib/nginx,
/// /var/log/nginx or /run is set inside `dir`.
fn nginx_conf(
    dir: &Path,
    upstream: &str,
    tls_port: u16,
    h2c_port: u16,
    options: &NginxOptions,
) -> String {
    let d = dir.display();
    // as root, nginx's workers would run as nobody, which cannot enter the
    // temp directory (0700, root's): run them as root too
    // SAFETY: geteuid has no preconditions.
    let user = if unsafe { libc::geteuid() } == 0 {
        "user root;\n"
    } else {
        ""
    };
    let (keepalive, connection) = match options.upstream_keepalive {
        UpstreamKeepAlive::Off => (String::new(), "close"),
        UpstreamKeepAlive::On(idle) => (
            format!(
                "keepalive 64; keepalive_timeout {}ms;",
                idle.as_millis().max(1)
            ),
            "\"\"",
        ),
    };
    let requests = options.keepalive_requests;
    format!(
        r#"{user}daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
  log_format cicada '$connection $connection_requests $server_port $server_protocol $status "$request"';
  access_log {d}/access.log cicada;
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  client_max_body_size 64m;
  client_body_buffer_size 1m;
  upstream backend {{ server {upstream}; {keepalive} }}
  server {{
    # nginx 1.22 syntax ("http2 on;" is 1.25.1+)
    listen 127.0.0.1:{tls_port} ssl http2;
    # h2c, prior knowledge only
    listen 127.0.0.1:{h2c_port} http2;
    ssl_certificate {d}/cert.pem;
    ssl_certificate_key {d}/key.pem;
    # HTTP/2 too since 1.19.7: GOAWAY after this many streams
    keepalive_requests {requests};
    http2_max_concurrent_streams 128;
    location / {{
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection {connection};
      # SSE: pass every event on at once
      proxy_buffering off;
      proxy_read_timeout 600s;
    }}
  }}
}}
"#
    )
}

/// A CA and the certificate it signed for nginx, as files in a directory.
struct Pki {
    ca: PathBuf,
    cert: PathBuf,
}

impl Pki {
    fn generate(dir: &Path) -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        let key = KeyPair::generate().expect("nginx's key");
        let mut params =
            CertificateParams::new(vec!["localhost".to_string()]).expect("nginx's cert params");
        params
            .subject_alt_names
            .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
        let cert = params.signed_by(&key, &ca).expect("nginx's certificate");
        crate::write(dir, "key.pem", &key.serialize_pem());
        Pki {
            ca: crate::write(dir, "ca.pem", &ca.pem()),
            cert: crate::write(dir, "cert.pem", &cert.pem()),
        }
    }
}

/// How tinyproxy is configured.
#[derive(Debug, Clone, Default)]
pub struct TinyproxyOptions {
    /// `BasicAuth user password`: requests without these credentials get 407.
    pub basic_auth: Option<(String, String)>,
}

/// A running tinyproxy (a forward proxy) on loopback.
pub struct Tinyproxy {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its port.
    pub port: u16,
    /// The credentials it requires, if any.
    pub basic_auth: Option<(String, String)>,
    dir: tempfile::TempDir,
}

impl Tinyproxy {
    /// Start tinyproxy and wait until it accepts connections.
    pub fn start(options: TinyproxyOptions) -> Tinyproxy {
        let bins = binaries();
        let dir = crate::scratch();
        let port = free_port();
        let d = dir.path().display();
        let mut conf = format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 600\nMaxClients 1024\nLogLevel Info\n\
             PidFile \"{d}/tinyproxy.pid\"\nAllow 127.0.0.1\nDisableViaHeader Yes\n"
        );
        if let Some((user, password)) = &options.basic_auth {
            conf.push_str(&format!("BasicAuth {user} {password}\n"));
        }
        let conf_path = crate::write(dir.path(), "tinyproxy.conf", &conf);
        let log = dir.path().join("tinyproxy.log");
        let mut cmd = Command::new(&bins.tinyproxy);
        // -d: stay in the foreground, log to stderr
        cmd.arg("-d")
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(log_file(&log))
            .stderr(log_file(&log));
        confine(&mut cmd, Some(SERVER_CORE));
        let mut child = cmd.spawn().expect("starting tinyproxy");
        wait_accepting(&mut child, "tinyproxy", &[port], &log);
        Tinyproxy {
            child,
            url: format!("http://127.0.0.1:{port}"),
            port,
            basic_auth: options.basic_auth,
            dir,
        }
    }

    /// The proxy URL with its credentials (`http://user:password@127.0.0.1:PORT`),
    /// or [`Tinyproxy::url`] when it requires none.
    pub fn url_with_credentials(&self) -> String {
        match &self.basic_auth {
            Some((user, password)) => format!("http://{user}:{password}@127.0.0.1:{}", self.port),
            None => self.url.clone(),
        }
    }

    /// tinyproxy's log so far (its last lines), for failure messages.
    pub fn log(&self) -> String {
        log_tail(&self.dir.path().join("tinyproxy.log"))
    }

    /// How many requests tinyproxy took whose request line starts with
    /// `method` (`POST`, `CONNECT`), by its whole log.
    pub fn requests(&self, method: &str) -> usize {
        let needle = format!(": {method} ");
        std::fs::read_to_string(self.dir.path().join("tinyproxy.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("Request (file descriptor") && l.contains(&needle))
            .count()
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        stop_group(&mut self.child, Duration::from_secs(5));
    }
}

/// A log file both of a child's output streams may append to.
fn log_file(path: &Path) -> std::fs::File {
    std::fs::File::options()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Wait until every port accepts a TCP connection, or panic with the log.
fn wait_accepting(child: &mut Child, name: &str, ports: &[u16], log: &Path) {
    let deadline = Instant::now() + START_LIMIT;
    for &port in ports {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "{name} exited ({status}) before it accepted connections; its log:\n{}",
                    log_tail(log)
                );
            }
            if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not accept connections on {addr} within {START_LIMIT:?}; its log:\n{}",
                log_tail(log)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
