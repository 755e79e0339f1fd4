//! What the kernel knows of a TCP socket: its state, round-trip time and
//! pending error. Read by opening (`dial`), resending (`send`) and timing
//! (`response`), below all three.

use std::os::fd::RawFd;
use std::time::Duration;

/// Linux's TCP states (include/net/tcp_states.h; libc does not name them).
pub(crate) const TCP_ESTABLISHED: u8 = 1;
/// The connection is closed (after a reset, or both sides' FIN).
pub(crate) const TCP_CLOSE: u8 = 7;
/// The peer closed its side; ours is still open.
pub(crate) const TCP_CLOSE_WAIT: u8 = 8;

/// The kernel's view of the TCP connection on `fd`.
fn info(fd: RawFd) -> Option<libc::tcp_info> {
    // SAFETY: an all-zero tcp_info is valid plain data
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes into `info` we own, within `len`
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(info)
}

/// The kernel's TCP state of `fd` (`TCP_ESTABLISHED`, `TCP_CLOSE`, ...).
pub(crate) fn tcp_state(fd: RawFd) -> Option<u8> {
    info(fd).map(|i| i.tcpi_state)
}

/// The smoothed round-trip time the kernel measured on `fd`.
pub(crate) fn rtt(fd: RawFd) -> Option<Duration> {
    info(fd)
        .filter(|i| i.tcpi_rtt > 0)
        .map(|i| Duration::from_micros(u64::from(i.tcpi_rtt)))
}

/// The pending error of `fd` (`SO_ERROR`), cleared by reading it.
pub(crate) fn socket_error(fd: RawFd) -> Option<i32> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes an int into `err`, within `len`
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0 && err != 0).then_some(err)
}
