//! Pieces the fleet tests share: workers started in a namespace host, the
//! runtime a test's own gRPC client needs, the port of a URL.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::netns::Lan;

/// The port at the end of a URL the test built itself (`http://host:port`).
pub fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

/// A worker in namespace host `host` of `lan`, dialing the coordinator
/// through the router on `port` with `token`; its stderr goes to
/// `dir/worker<host>.err` for the test's failure messages.
pub fn worker_on(lan: &Lan, host: usize, port: u16, dir: &Path, token: &str) -> Child {
    worker_command_on(lan, host, port, dir, token)
        .spawn()
        .expect("starting a worker in its namespace")
}

/// [`worker_on`] not yet started, for a test that sets more of it.
pub fn worker_command_on(lan: &Lan, host: usize, port: u16, dir: &Path, token: &str) -> Command {
    let mut c = lan.command(host, &crate::cicada());
    c.arg("worker")
        .args([
            "--coordinator",
            &format!("http://{}:{port}", lan.router),
            "--index",
            &host.to_string(),
        ])
        .env("CICADA_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(File::create(dir.join(format!("worker{host}.err"))).unwrap());
    c
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
