//! A connection's byte stream: plain TCP or TLS over it, opened with
//! `TCP_NODELAY`, and a cheap check that an idle one is still open.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::HttpError;
use super::endpoint::Origin;

/// Plain TCP or TLS.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// Connect to `origin` (one of its addresses), with TLS when it is https.
    pub async fn open(origin: &Origin, tls: Option<&Arc<TlsConnector>>) -> Result<Self, HttpError> {
        let addr = origin.next_addr().await?;
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| HttpError::Connect {
                addr: addr.to_string(),
                reason: e.to_string(),
            })?;
        // a token is a few bytes: never let Nagle hold our request back
        let _ = tcp.set_nodelay(true);
        if !origin.tls {
            return Ok(Stream::Plain(tcp));
        }
        let (Some(connector), Some(name)) = (tls, origin.server_name.clone()) else {
            return Err(HttpError::Tls {
                host: origin.host.clone(),
                reason: "no TLS settings for an https target".into(),
            });
        };
        let stream = connector
            .connect(name, tcp)
            .await
            .map_err(|e| HttpError::Tls {
                host: origin.host.clone(),
                reason: e.to_string(),
            })?;
        Ok(Stream::Tls(Box::new(stream)))
    }

    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(bytes).await,
            Stream::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }

    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf).await,
            Stream::Tls(s) => s.read(buf).await,
        }
    }

    /// Whether an idle connection still looks open: the server has not
    /// closed it (no end-of-stream waiting to be read). A plain connection
    /// with unexpected bytes waiting is not reusable either; on TLS, bytes
    /// may be a session ticket, so only a close counts.
    pub fn looks_open(&self) -> bool {
        let (fd, tls) = match self {
            Stream::Plain(s) => (s.as_raw_fd(), false),
            Stream::Tls(s) => (s.get_ref().0.as_raw_fd(), true),
        };
        let mut byte = 0u8;
        // SAFETY: recv into one byte we own, on a socket we own; MSG_PEEK
        // leaves the data in place and MSG_DONTWAIT never blocks.
        let n = unsafe {
            libc::recv(
                fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        match n {
            0 => false,
            n if n > 0 => tls,
            _ => io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock,
        }
    }
}
