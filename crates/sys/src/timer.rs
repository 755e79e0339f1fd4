//! A timerfd: the kernel wakes a poller at an absolute instant of the
//! monotonic clock, to the nanosecond (the mock's token timer rides on it).
//! Linux only; elsewhere [`TimerFd::new`] says it is unsupported.

pub use imp::TimerFd;

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::time::{Duration, Instant};

    use crate::clock::{Clock, now};

    /// A non-blocking `CLOCK_MONOTONIC` timerfd.
    #[derive(Debug)]
    pub struct TimerFd {
        fd: OwnedFd,
        /// `Instant` and the kernel's monotonic clock read at one moment, to
        /// turn an `Instant` into an absolute expiry.
        base: (Instant, Duration),
    }

    impl AsRawFd for TimerFd {
        fn as_raw_fd(&self) -> RawFd {
            self.fd.as_raw_fd()
        }
    }

    impl TimerFd {
        /// A new, disarmed timer.
        pub fn new() -> io::Result<TimerFd> {
            // SAFETY: timerfd_create takes no pointers; the fd it returns is ours.
            let raw = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` is a freshly created descriptor nobody else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let base = (Instant::now(), now(Clock::Monotonic)?);
            Ok(TimerFd { fd, base })
        }

        /// Fire once at `at` (at once if it has passed).
        pub fn arm(&self, at: Instant) -> io::Result<()> {
            let (base_instant, base_mono) = self.base;
            let base_ns = base_mono.as_nanos() as i128;
            let delta_ns = if at >= base_instant {
                at.duration_since(base_instant).as_nanos() as i128
            } else {
                -(base_instant.duration_since(at).as_nanos() as i128)
            };
            // zero would disarm: the earliest expiry is 1 ns
            let ns = (base_ns + delta_ns).max(1);
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: (ns / 1_000_000_000) as libc::time_t,
                    tv_nsec: (ns % 1_000_000_000) as libc::c_long,
                },
            };
            // SAFETY: the itimerspec is ours and valid; the old value is not asked for.
            let r = unsafe {
                libc::timerfd_settime(
                    self.fd.as_raw_fd(),
                    libc::TFD_TIMER_ABSTIME,
                    &spec,
                    std::ptr::null_mut(),
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        /// Consume the expiry count (`WouldBlock` when it has not fired).
        pub fn read_expiries(&self) -> io::Result<u64> {
            let mut n = 0u64;
            // SAFETY: reads 8 bytes into the u64 we own.
            let r = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut n as *mut u64).cast(),
                    std::mem::size_of::<u64>(),
                )
            };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(n)
        }
    }
}

/// Without timerfd the clock is always coarse.
#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::os::fd::{AsRawFd, RawFd};
    use std::time::Instant;

    /// No timer: [`TimerFd::new`] fails, so callers fall back.
    #[derive(Debug)]
    pub struct TimerFd;

    impl AsRawFd for TimerFd {
        fn as_raw_fd(&self) -> RawFd {
            -1
        }
    }

    impl TimerFd {
        /// Unsupported here.
        pub fn new() -> io::Result<TimerFd> {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "timerfd is Linux only",
            ))
        }
        /// Nothing to arm.
        pub fn arm(&self, _at: Instant) -> io::Result<()> {
            Ok(())
        }
        /// Nothing fires.
        pub fn read_expiries(&self) -> io::Result<u64> {
            Ok(0)
        }
    }
}
