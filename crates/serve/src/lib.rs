//! The one HTTP server loop of cicada's run-time endpoints: the web UI
//! (`cicada-web`) and live `/metrics` (the coordinator's `live`) each bind
//! their listener, then hand it here with the function that answers a
//! request. Connections are served by hyper-util's auto builder (HTTP/1.1,
//! or HTTP/2 with prior knowledge); dropping the [`Server`] stops accepting.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How long to wait after a failed accept (out of file descriptors, say)
/// before the next, so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A listener being served; dropping it stops accepting connections.
#[derive(Debug)]
pub struct Server {
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serve `listener` with `respond` on a task of its own until the returned
/// [`Server`] is dropped; `name` says which endpoint a failed accept's
/// warning is about.
pub fn serve<F, Fut, B>(listener: TcpListener, name: &'static str, respond: F) -> Server
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Server {
        task: tokio::spawn(accept_loop(listener, name, respond)),
    }
}

async fn accept_loop<F, Fut, B>(listener: TcpListener, name: &'static str, respond: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "{name}: accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let respond = respond.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let answer = respond(req);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::Bytes;
    use http_body_util::Full;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(addr).await?;
        let ask = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(ask.as_bytes()).await?;
        let mut out = String::new();
        stream.read_to_string(&mut out).await?;
        Ok(out)
    }

    #[tokio::test]
    async fn answers_each_request_until_dropped() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = serve(listener, "test", |req: Request<Incoming>| async move {
            let body = format!("you asked for {}", req.uri().path());
            Response::new(Full::new(Bytes::from(body)))
        });
        for path in ["/a", "/b"] {
            let answer = get(addr, path).await.unwrap();
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            assert!(
                answer.ends_with(&format!("you asked for {path}")),
                "{answer}"
            );
        }
        drop(server);
        // the aborted loop drops the listener: nothing accepts any more
        let mut refused = false;
        for _ in 0..100 {
            if TcpStream::connect(addr).await.is_err() {
                refused = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(refused, "{addr} still accepts after the server was dropped");
    }
}
