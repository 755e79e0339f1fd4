//! The kernel's clocks read directly, where `std::time` has no word for
//! them (the realtime clock a receive stamp is on, a thread's CPU time, the
//! monotonic clock a timerfd expires on).

use std::io;
use std::time::Duration;

/// A kernel clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Wall-clock time since the Unix epoch (`CLOCK_REALTIME`).
    Realtime,
    /// Time since an arbitrary start that never steps (`CLOCK_MONOTONIC`).
    Monotonic,
    /// CPU time the calling thread used (`CLOCK_THREAD_CPUTIME_ID`).
    ThreadCpu,
}

impl Clock {
    fn id(self) -> libc::clockid_t {
        match self {
            Clock::Realtime => libc::CLOCK_REALTIME,
            Clock::Monotonic => libc::CLOCK_MONOTONIC,
            Clock::ThreadCpu => libc::CLOCK_THREAD_CPUTIME_ID,
        }
    }
}

/// `clock` now, as the time since its start.
#[inline]
pub fn now(clock: Clock) -> io::Result<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    if unsafe { libc::clock_gettime(clock.id(), &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(from_timespec(ts))
}

/// A timespec the kernel wrote as a duration (negative parts read as 0).
pub(crate) fn from_timespec(ts: libc::timespec) -> Duration {
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_clock_reads_and_the_monotonic_one_never_goes_back() {
        let a = now(Clock::Monotonic).unwrap();
        let b = now(Clock::Monotonic).unwrap();
        assert!(b >= a);
        assert!(now(Clock::Realtime).unwrap() > Duration::from_secs(1_600_000_000));
        assert!(now(Clock::ThreadCpu).is_ok());
    }
}
