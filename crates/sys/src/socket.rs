//! What the kernel knows of a socket, and reads that bring the kernel's
//! receive stamp with them: the client's dialling, resending and timing
//! read these (`cicada_client::http`).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Linux's TCP states (include/net/tcp_states.h; libc does not name them).
pub const TCP_ESTABLISHED: u8 = 1;
/// The connection is closed (after a reset, or both sides' FIN).
pub const TCP_CLOSE: u8 = 7;
/// The peer closed its side; ours is still open.
pub const TCP_CLOSE_WAIT: u8 = 8;

/// A non-blocking connect is under way (`connect`'s error on such a socket).
pub const EINPROGRESS: i32 = libc::EINPROGRESS;
/// The peer is gone: a write found the connection closed.
pub const EPIPE: i32 = libc::EPIPE;

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
pub fn tcp_state(fd: RawFd) -> Option<u8> {
    info(fd).map(|i| i.tcpi_state)
}

/// The smoothed round-trip time the kernel measured on `fd`.
pub fn rtt(fd: RawFd) -> Option<Duration> {
    info(fd)
        .filter(|i| i.tcpi_rtt > 0)
        .map(|i| Duration::from_micros(u64::from(i.tcpi_rtt)))
}

/// The pending error of `fd` (`SO_ERROR`), cleared by reading it.
pub fn socket_error(fd: RawFd) -> Option<i32> {
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

/// Peek at one byte of `fd` without taking it and without blocking: 0 when
/// the peer closed, 1 when a byte waits, `WouldBlock` when none does.
pub fn peek(fd: RawFd) -> io::Result<usize> {
    let mut byte = 0u8;
    // SAFETY: recv into one byte we own, on a socket the caller owns;
    // MSG_PEEK leaves the data in place and MSG_DONTWAIT never blocks.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Ask the kernel to stamp packets received on `fd` (`SO_TIMESTAMPNS`).
pub fn enable_rx_stamps(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads the int we pass, for its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `recvmsg` into `len` bytes at `ptr`: the bytes read and, when the kernel
/// stamped them, the realtime clock's time (since the Unix epoch) the
/// latest of them arrived.
///
/// # Safety
/// `ptr` must be valid for writes of `len` bytes; it may be uninitialised
/// memory (the kernel writes it, nothing reads it first).
#[inline]
pub unsafe fn recv_stamped(
    fd: RawFd,
    ptr: *mut u8,
    len: usize,
) -> io::Result<(usize, Option<Duration>)> {
    let mut iov = libc::iovec {
        iov_base: ptr.cast(),
        iov_len: len,
    };
    // room for one timespec control message, aligned for cmsghdr
    let mut control = [0u64; 8];
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg writes at most iov_len bytes at `ptr` (the caller's
    // memory of that length) and at most msg_controllen bytes into `control`.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    if n == 0 {
        return Ok((0, None));
    }
    Ok((n, stamp(&msg).map(crate::clock::from_timespec)))
}

/// The `SCM_TIMESTAMPNS` control message of a received `msg`, if any.
fn stamp(msg: &libc::msghdr) -> Option<libc::timespec> {
    let mut found = None;
    // SAFETY: the CMSG macros walk the control buffer recvmsg filled, within
    // msg_controllen; the data is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                found = Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(c).cast::<libc::timespec>(),
                ));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    found
}
