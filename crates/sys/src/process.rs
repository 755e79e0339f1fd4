//! Process-level settings and readings every role of cicada shares: the
//! open-file limit for holding thousands of connections, whether what goes
//! to stderr may carry colour, what the process (or a child) has used so
//! far, the kernel's page and tick sizes, pinning to cores, and stopping a
//! child at once.

use std::ffi::OsStr;
use std::io::IsTerminal as _;

/// Whether to colour what goes to stderr (log lines): only when stderr is a
/// terminal, so a log file or a pipe never holds escape codes, and never
/// when `NO_COLOR` holds a non-empty value (<https://no-color.org>).
pub fn stderr_colour() -> bool {
    colour_wanted(
        std::env::var_os("NO_COLOR").as_deref(),
        std::io::stderr().is_terminal(),
    )
}

/// The rule of [`stderr_colour`], given `NO_COLOR`'s value and whether the
/// stream is a terminal.
fn colour_wanted(no_color: Option<&OsStr>, terminal: bool) -> bool {
    terminal && no_color.is_none_or(OsStr::is_empty)
}

/// Raise the soft limit on open files to the hard limit: every stream is a
/// socket, and the usual soft limit of 1024 would cap a worker (or the mock)
/// far below what the machine can hold. Returns the new soft limit.
pub fn raise_fd_limit() -> Option<u64> {
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let wanted = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0 {
                return Some(wanted.rlim_cur as u64);
            }
        }
        Some(lim.rlim_cur as u64)
    }
}

/// What this process has used so far, from one `getrusage(RUSAGE_SELF)`:
/// the worker reports it as its health, the selftest as a client's cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceUsage {
    /// CPU time, user + system, µs.
    pub cpu_us: u64,
    /// Peak resident memory, bytes.
    pub peak_rss_bytes: u64,
}

/// This process's resource usage so far (zeros if the kernel will not say).
pub fn resource_usage() -> ResourceUsage {
    // SAFETY: rusage is plain data; all zeros is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer to a struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return ResourceUsage::default();
    }
    let us = |t: libc::timeval| t.tv_sec.max(0) as u64 * 1_000_000 + t.tv_usec.max(0) as u64;
    ResourceUsage {
        cpu_us: us(usage.ru_utime) + us(usage.ru_stime),
        // Linux reports kilobytes
        peak_rss_bytes: usage.ru_maxrss.max(0) as u64 * 1024,
    }
}

/// Bytes per memory page (what `/proc`'s page counts are in).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    page.max(0) as u64
}

/// Clock ticks per second (what `/proc/PID/stat`'s CPU times are in).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    hz.max(1) as u64
}

/// Kill process `pid` at once (`SIGKILL`); the caller's own child, not yet reaped.
pub fn kill_now(pid: i32) {
    // SAFETY: plain FFI call; the pid is the caller's child, not yet reaped
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Limit the calling process to `cores` (Linux): between fork and exec it
/// makes only async-signal-safe calls.
pub fn pin_to(cores: &[usize]) -> std::io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &core in cores {
        // SAFETY: CPU_SET writes one bit of the set we own (it ignores
        // cores past the set's size).
        unsafe { libc::CPU_SET(core, &mut set) };
    }
    // SAFETY: the set is ours, passed with its size; pid 0 is this process.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// How a reaped child ended and what it used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChildEnd {
    /// It exited on its own with code 0.
    pub succeeded: bool,
    /// Its CPU time, user + system, µs.
    pub cpu_us: f64,
}

/// Wait for child `pid` (the caller's own, not yet reaped) and read its usage.
pub fn wait_child(pid: u32) -> std::io::Result<ChildEnd> {
    let mut status = 0;
    // SAFETY: rusage is plain integers, for which all-zero bytes are valid
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = pid as libc::pid_t;
    // SAFETY: our own child, not yet reaped; both pointers are to live locals
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if rc != pid {
        return Err(std::io::Error::last_os_error());
    }
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    Ok(ChildEnd {
        succeeded: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        cpu_us: us(usage.ru_utime) + us(usage.ru_stime),
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use super::colour_wanted;
        assert!(colour_wanted(None, true));
        assert!(!colour_wanted(None, false));
        assert!(!colour_wanted(Some(OsStr::new("1")), true));
        assert!(!colour_wanted(Some(OsStr::new("false")), true));
        // an empty NO_COLOR does not disable colour (no-color.org)
        assert!(colour_wanted(Some(OsStr::new("")), true));
        assert!(!colour_wanted(Some(OsStr::new("")), false));
    }

    #[test]
    fn the_soft_limit_ends_at_the_hard_limit() {
        let soft = super::raise_fd_limit().unwrap();
        // SAFETY: as above.
        let hard = unsafe {
            let mut lim: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
            lim.rlim_max as u64
        };
        assert_eq!(soft, hard);
    }

    #[test]
    fn usage_grows_with_work() {
        let before = super::resource_usage();
        let mut x = 0u64;
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let after = super::resource_usage();
        assert!(
            after.cpu_us >= before.cpu_us + 20_000,
            "{before:?} {after:?}"
        );
        assert!(after.peak_rss_bytes >= 64 << 20, "{after:?}");
    }
}
