//! Pieces the fleet tests share: workers started in a namespace host, the
//! runtime a test's own gRPC client needs, the port of a URL.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Stdio};

use crate::netns::Lan;

/// The port at the end of a URL the test built itself (`http://host:port`).
pub fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

/// A worker in namespace host `host` of `lan`, dialing the coordinator
/// through the router on `port` with `token`; its stderr goes to
/// `dir/worker<host>.err` for the test's failure messages.
pub fn worker_on(lan: &Lan, host: usize, port: u16, dir: &Path, token: &str) -> Child {
    lan.command(host, &crate::cicada())
        .arg("worker")
        .args([
            "--coordinator",
            &format!("http://{}:{port}", lan.router),
            "--index",
            &host.to_string(),
        ])
        .env("CICADA_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(File::create(dir.join(format!("worker{host}.err"))).unwrap())
        .spawn()
        .expect("starting a worker in its namespace")
}

/// A runtime for a test that speaks gRPC to the coordinator itself (a
/// forged or hostile worker), with ring as rustls's provider as the binaries
/// have it.
pub fn runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
