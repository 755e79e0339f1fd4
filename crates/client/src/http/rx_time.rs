//! When bytes reached the socket, as the kernel stamped them.
//!
//! A token's arrival time read with `Instant::now()` after `read` returns
//! includes however long the task waited for the runtime: behind other
//! tasks, or behind a burst of requests being started. With `SO_TIMESTAMPNS`
//! the kernel stamps every packet as it is received, and `recvmsg` hands the
//! stamp of the latest packet the read consumed beside the bytes, so a
//! token's time no longer depends on what else the client was doing.
//!
//! The stamp is on the realtime clock; it is turned into a monotonic
//! [`Instant`] by its age (realtime now minus the stamp) taken back from the
//! monotonic now, so a realtime step between the two readings costs at most
//! that step, and an age outside [0, [`MAX_AGE`]] is not trusted (the read's
//! own instant is used instead). The kernel turns stamping on system-wide
//! from a work queue when the first socket asks, so the first packets after
//! that may come unstamped; they too get the read's own instant.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use tokio::time::Instant;

/// Oldest receive stamp believed: older ones mean the realtime clock stepped.
const MAX_AGE: Duration = Duration::from_secs(60);

/// Ask the kernel to stamp packets received on `fd`.
pub(crate) fn enable(fd: RawFd) -> io::Result<()> {
    cicada_sys::socket::enable_rx_stamps(fd)
}

/// `recv` into `buf`; the bytes read and, when the kernel stamped them, the
/// instant the latest of them arrived.
#[cfg(test)]
pub(crate) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<Instant>)> {
    recv_raw(fd, buf.as_mut_ptr(), buf.len())
}

/// [`recv`] into `len` bytes at `ptr`, which may be uninitialised memory
/// (the kernel writes it; nothing reads it first).
#[inline]
pub(crate) fn recv_raw(
    fd: RawFd,
    ptr: *mut u8,
    len: usize,
) -> io::Result<(usize, Option<Instant>)> {
    // SAFETY: callers pass `len` bytes of their own buffer at `ptr`.
    let (n, stamp) = unsafe { cicada_sys::socket::recv_stamped(fd, ptr, len) }?;
    Ok((n, stamp.and_then(to_instant)))
}

/// A realtime stamp as a monotonic instant (see the module docs).
fn to_instant(stamp: Duration) -> Option<Instant> {
    let now_rt = cicada_sys::clock::now(cicada_sys::clock::Clock::Realtime).ok()?;
    let now = Instant::now();
    let age = now_rt.checked_sub(stamp)?;
    if age > MAX_AGE {
        return None;
    }
    now.checked_sub(age)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// A connected pair whose client side has receive stamps on.
    fn stamped_pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        enable(client.as_raw_fd()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    /// Keeps the kernel's receive stamping on while it lives: a stamped
    /// pair that has seen a stamped packet. The kernel switches stamping on
    /// system-wide from a work queue when a socket first asks (and off again
    /// when the last such socket closes), so on a busy machine packets pass
    /// unstamped for however long that queue waits: a fixed sleep is a guess.
    pub(crate) struct StampingOn(std::net::TcpStream, std::net::TcpStream);

    /// Waits (up to 10 s) until the kernel stamps received packets.
    pub(crate) fn stamping_on() -> StampingOn {
        let (client, mut server) = stamped_pair();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            server.write_all(b".").unwrap();
            let mut buf = [0u8; 1];
            if recv(client.as_raw_fd(), &mut buf).unwrap().1.is_some() {
                return StampingOn(client, server);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the kernel stamped no packet within 10 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn stamping_comes_on() {
        let StampingOn(client, mut server) = stamping_on();
        server.write_all(b"x").unwrap();
        let mut buf = [0u8; 1];
        assert!(recv(client.as_raw_fd(), &mut buf).unwrap().1.is_some());
    }

    #[test]
    fn bytes_that_waited_carry_the_instant_they_arrived() {
        let _on = stamping_on();
        let (client, mut server) = stamped_pair();
        let before = Instant::now();
        server.write_all(b"hello").unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let mut buf = [0u8; 16];
        let (n, at) = recv(client.as_raw_fd(), &mut buf).unwrap();
        let read = Instant::now();
        assert_eq!(&buf[..n], b"hello");
        let at = at.expect("the kernel stamped the packet");
        assert!(
            at >= before - Duration::from_millis(1),
            "stamped before it was sent"
        );
        // the bytes sat in the socket for 30 ms: the stamp says so
        assert!(
            read.duration_since(at) >= Duration::from_millis(25),
            "stamped {:?} before the read",
            read.duration_since(at)
        );
    }

    #[test]
    fn a_closed_socket_reads_zero_without_a_stamp() {
        let (client, server) = stamped_pair();
        drop(server);
        let mut buf = [0u8; 4];
        assert_eq!(recv(client.as_raw_fd(), &mut buf).unwrap(), (0, None));
    }
}
