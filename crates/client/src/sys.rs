//! Process limits for holding thousands of connections.

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
