//! The size limit before authentication. tonic sets one decoding limit per
//! service, and ours must take plans-sized reports (up to
//! [`cicada_proto::MAX_MESSAGE_BYTES`]) from workers that proved the token;
//! so this layer reads the gRPC length prefix of each attach stream's first
//! message, the hello, and fails the stream when it announces more than
//! [`HELLO_MAX_BYTES`], before a byte of it is buffered. Later messages are
//! only read once the hello passed the token check (the attach handler reads
//! nothing else before), so the full limit applies to token holders alone.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::server::NamedService;

/// Largest hello an attach may send (an honest one is about 200 bytes).
pub(super) const HELLO_MAX_BYTES: usize = 64 * 1024;

/// gRPC's per-message prefix: a compression flag and a big-endian u32 length.
const PREFIX: usize = 5;

/// A gRPC service whose requests' first message may be at most [`HELLO_MAX_BYTES`].
#[derive(Debug, Clone)]
pub(super) struct HelloLimit<S>(pub S);

impl<S: NamedService> NamedService for HelloLimit<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for HelloLimit<S>
where
    S: Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        self.0
            .call(req.map(|b| Body::new(FirstMessage::new(b, HELLO_MAX_BYTES))))
    }
}

/// A request body that fails once its first message's prefix announces more than `limit`.
struct FirstMessage {
    inner: Body,
    limit: usize,
    prefix: [u8; PREFIX],
    /// Prefix bytes seen; the check is done once it reaches [`PREFIX`].
    seen: usize,
}

impl FirstMessage {
    fn new(inner: Body, limit: usize) -> Self {
        Self {
            inner,
            limit,
            prefix: [0; PREFIX],
            seen: 0,
        }
    }

    /// Take the prefix bytes at the start of `data`; an error once the
    /// whole prefix is in and announces too much.
    fn check(&mut self, data: &[u8]) -> Result<(), tonic::Status> {
        if self.seen == PREFIX {
            return Ok(());
        }
        for &b in data.iter().take(PREFIX - self.seen) {
            self.prefix[self.seen] = b;
            self.seen += 1;
        }
        if self.seen < PREFIX {
            return Ok(());
        }
        let [_, a, b, c, d] = self.prefix;
        let len = u32::from_be_bytes([a, b, c, d]) as usize;
        if len > self.limit {
            return Err(tonic::Status::resource_exhausted(format!(
                "a first message of {len} bytes: at most {} before the token is checked",
                self.limit
            )));
        }
        Ok(())
    }
}

impl http_body::Body for FirstMessage {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, tonic::Status>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(f)) = &frame
            && let Some(data) = f.data_ref()
            && let Err(refusal) = self.check(data)
        {
            return Poll::Ready(Some(Err(refusal)));
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(len: u32) -> Vec<u8> {
        let mut p = vec![0];
        p.extend_from_slice(&len.to_be_bytes());
        p
    }

    #[test]
    fn the_first_prefix_decides_even_when_split_across_frames() {
        let mut small = FirstMessage::new(Body::empty(), 100);
        assert!(small.check(&prefix(100)[..2]).is_ok());
        assert!(small.check(&prefix(100)[2..]).is_ok());
        // later messages are not this layer's business
        assert!(small.check(&prefix(u32::MAX)).is_ok());

        let mut big = FirstMessage::new(Body::empty(), 100);
        assert!(big.check(&prefix(101)[..1]).is_ok());
        assert!(big.check(&[]).is_ok());
        assert!(big.check(&prefix(101)[1..4]).is_ok());
        let e = big.check(&[101, 7, 7]).unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.message().contains("101 bytes"), "{}", e.message());
    }
}
