//! Process-level settings both binaries (`coord`, `worker`) share: the
//! open-file limit for holding thousands of connections, and whether what
//! they write to stderr may carry colour.

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
}
