//! A program run in a terminal of its own, as a person runs it: a pseudo-
//! terminal whose session it leads, so that a `^C` typed into the terminal
//! reaches the terminal's foreground process group the way the kernel
//! delivers it (SIGINT to every process of the group), not a signal sent to
//! one pid.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// A new pseudo-terminal: its master end, and its slave end for a child's
/// standard streams. Neither descriptor is inherited by children except as
/// the streams given to them.
pub fn open() -> (File, File) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two new file descriptors into the integers we
    // pass; name, termios and window size may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty failed: {}", std::io::Error::last_os_error());
    for fd in [master, slave] {
        // SAFETY: fcntl on a descriptor we own
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: both descriptors are new, open and owned by nobody else.
    unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) }
}

/// A child running on a pseudo-terminal, and what it printed there.
pub struct Terminal {
    pub child: Child,
    master: File,
    output: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Terminal {
    /// Run `cmd` as the session leader of a new terminal (stdin, stdout and
    /// stderr on it); its process group is the terminal's foreground group.
    pub fn spawn(mut cmd: Command) -> Terminal {
        let (master, slave) = open();
        let stdio = |fd: &File| Stdio::from(fd.try_clone().expect("dup of the terminal"));
        cmd.stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        // SAFETY: between fork and exec only async-signal-safe syscalls run
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("starting a program on a terminal");
        // the command keeps copies of the slave end: both must close, or
        // reading the master never ends
        drop(slave);
        drop(cmd);
        let output = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let (mut m, out) = (
                master.try_clone().expect("dup of the master"),
                output.clone(),
            );
            // the terminal's buffer is small: read it as it fills, until the
            // last program on it closes it (EIO)
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = m.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    out.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        Terminal {
            child,
            master,
            output,
            reader: Some(reader),
        }
    }

    /// Type `^C`: the terminal sends SIGINT to its foreground process group.
    pub fn ctrl_c(&mut self) {
        self.master.write_all(&[0x03]).expect("typing ^C");
        self.master.flush().expect("typing ^C");
    }

    /// Everything printed on the terminal so far.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// Wait for the child to exit (within `limit`, else kill it and panic),
    /// then for the terminal's last output; the exit code, or 128 + the
    /// signal that ended it.
    pub fn wait(&mut self, limit: std::time::Duration) -> i32 {
        let deadline = std::time::Instant::now() + limit;
        let status = loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "not done within {limit:?}; the terminal showed:\n{}",
                    self.output()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        if let Some(r) = self.reader.take() {
            // the reader ends when every program holding the terminal exited
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !r.is_finished() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        use std::os::unix::process::ExitStatusExt;
        status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(-1)
    }
}
