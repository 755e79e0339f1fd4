//! The one place cicada calls libc: the kernel's clocks (`clock`), the
//! mock's timerfd (`timer`), what a socket knows and its receive stamps
//! (`socket`), and the process's limits, usage, signals and CPU pinning
//! (`process`). Each call sits behind a safe function with its `SAFETY`
//! reason, so the crates above hold no `unsafe` FFI of their own.
//!
//! It sits below every crate (libc only), because its callers are spread
//! across the house: the client (sockets, stamps), the mock (timers), the
//! worker (its own CPU and memory), the coordinator (stopping local
//! workers), the bench (pinning, children's usage) and the binary (limits).

pub mod clock;
pub mod process;
pub mod socket;
pub mod timer;
