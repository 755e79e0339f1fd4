//! Hosts on a private LAN made of network namespaces: a bridge in the root
//! namespace (the "router", reachable at `.1`) and one namespace per host on a
//! veth pair. Everything is removed when the `Lan` is dropped.
//!
//! Needs root (CAP_NET_ADMIN) and iproute2, as the project's test machines have.

use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where `ip netns exec` looks for a namespace's own `/etc` files.
const NETNS_ETC: &str = "/etc/netns";

/// One host of the LAN.
#[derive(Debug, Clone)]
pub struct Host {
    /// Network namespace name.
    pub ns: String,
    /// The host's address.
    pub ip: Ipv4Addr,
    /// The veth end in the root namespace (down = link cut).
    link: String,
    /// Its own host name (a UTS namespace per command), when one was given.
    hostname: Option<String>,
}

/// A bridge and its hosts.
#[derive(Debug)]
pub struct Lan {
    bridge: String,
    /// The root namespace's address on the LAN.
    pub router: Ipv4Addr,
    pub hosts: Vec<Host>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Lan {
    /// A LAN with `n` hosts. Panics with the failing `ip` command when the
    /// machine does not allow it (tests that need hosts cannot run without).
    pub fn new(n: usize) -> Lan {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{}", std::process::id() % 100_000, k);
        let (a, b) = (100 + (std::process::id() % 100) as u8, (k % 250) as u8 + 1);
        let router = Ipv4Addr::new(10, a, b, 1);
        let mut lan = Lan {
            bridge: format!("cb{tag}"),
            router,
            hosts: Vec::new(),
        };
        let setup = |lan: &mut Lan| -> Result<(), String> {
            ip(&["link", "add", &lan.bridge, "type", "bridge"])?;
            ip(&["addr", "add", &format!("{router}/24"), "dev", &lan.bridge])?;
            ip(&["link", "set", &lan.bridge, "up"])?;
            for i in 0..n {
                let ns = format!("cicada-{tag}-{i}");
                let link = format!("cv{tag}{i}");
                let peer = format!("cp{tag}{i}");
                let host_ip = Ipv4Addr::new(10, a, b, 10 + i as u8);
                ip(&["netns", "add", &ns])?;
                // recorded before anything else so a failure below is still cleaned up
                lan.hosts.push(Host {
                    ns: ns.clone(),
                    ip: host_ip,
                    link: link.clone(),
                    hostname: None,
                });
                ip(&["link", "add", &link, "type", "veth", "peer", "name", &peer])?;
                ip(&["link", "set", &peer, "netns", &ns])?;
                ip(&["link", "set", &link, "master", &lan.bridge])?;
                ip(&["link", "set", &link, "up"])?;
                ip(&[
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &format!("{host_ip}/24"),
                    "dev",
                    &peer,
                ])?;
                ip(&["-n", &ns, "link", "set", &peer, "up"])?;
                ip(&["-n", &ns, "link", "set", "lo", "up"])?;
                ip(&[
                    "-n",
                    &ns,
                    "route",
                    "add",
                    "default",
                    "via",
                    &router.to_string(),
                ])?;
            }
            Ok(())
        };
        if let Err(e) = setup(&mut lan) {
            drop(lan);
            panic!("cannot build the test LAN (needs root and iproute2): {e}");
        }
        lan
    }

    /// A command run inside `host`'s namespace (and under its host name, if set).
    pub fn command(&self, host: usize, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.hosts[host].ns]).arg(program);
        if let Some(name) = &self.hosts[host].hostname {
            let name = name.clone().into_bytes();
            // SAFETY: between fork and exec only two syscalls run, on memory
            // the closure owns; no allocation, no locks.
            unsafe {
                c.pre_exec(move || {
                    if libc::unshare(libc::CLONE_NEWUTS) != 0
                        || libc::sethostname(name.as_ptr().cast(), name.len()) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        c
    }

    /// Give `host` its own host name, as a pod or a machine has: its commands
    /// run in a new UTS namespace with that name.
    pub fn set_hostname(&mut self, host: usize, name: &str) {
        self.hosts[host].hostname = Some(name.to_string());
    }

    /// Give `host` its own `/etc/hosts` resolving `names` (what a cluster's
    /// DNS would): `ip netns exec` mounts `/etc/netns/<ns>/hosts` over
    /// `/etc/hosts`. Removed with the LAN.
    pub fn hosts_file(&self, host: usize, names: &[(&str, Ipv4Addr)]) {
        let dir = Path::new(NETNS_ETC).join(&self.hosts[host].ns);
        let mut text =
            String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
        for (name, ip) in names {
            text.push_str(&format!("{ip}\t{name}\n"));
        }
        if let Err(e) =
            std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("hosts"), text))
        {
            panic!("writing {}/hosts: {e}", dir.display());
        }
    }

    /// Cut `host`'s link: packets stop, but no connection is closed.
    pub fn cut(&self, host: usize) {
        if let Err(e) = ip(&["link", "set", &self.hosts[host].link, "down"]) {
            panic!("cutting host {host}: {e}");
        }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for h in &self.hosts {
            let _ = ip(&["link", "del", &h.link]);
            let _ = ip(&["netns", "del", &h.ns]);
            let _ = std::fs::remove_dir_all(Path::new(NETNS_ETC).join(&h.ns));
        }
        // only removed when no other namespace keeps files there
        let _ = std::fs::remove_dir(NETNS_ETC);
        let _ = ip(&["link", "del", &self.bridge]);
    }
}
