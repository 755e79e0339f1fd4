//! One client connection, served the ways real servers end connections:
//! kept alive (the default), closed after every response while answering as
//! if kept alive (llama.cpp's `llama-server`), or closed after sitting idle
//! (uvicorn's keep-alive timeout in front of vLLM and SGLang, proxies' idle
//! timeouts), or after a number of requests (nginx's `keepalive_requests`:
//! a GOAWAY on HTTP/2). A client that reuses connections must survive all
//! of them.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

use crate::reply::{ResponseBody, Shared};
use crate::routes::route;

/// Serve HTTP on `stream` until the client hangs up or the configured
/// connection behaviour ends it.
pub(crate) async fn serve<S>(stream: S, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let close_after_response = shared.config.close_after_response;
    let idle = shared
        .config
        .idle_timeout_ms
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis);
    let max_requests = shared.config.keepalive_requests.map(|n| n as usize);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if let Some(n) = shared.config.h2_max_streams {
        builder.http2().max_concurrent_streams(n);
    }
    if !close_after_response && idle.is_none() && max_requests.is_none() {
        let service = service_fn(move |req| {
            let shared = shared.clone();
            async move { Ok::<_, Infallible>(route(shared, req).await) }
        });
        let _ = builder
            .serve_connection(TokioIo::new(stream), service)
            .await;
        return;
    }
    let activity = Arc::new(Activity::default());
    let seen = activity.clone();
    let service = service_fn(move |req| {
        let (shared, activity) = (shared.clone(), seen.clone());
        activity.started();
        async move {
            let resp = route(shared, req).await;
            Ok::<_, Infallible>(resp.map(|body| {
                Tracked {
                    inner: body,
                    activity,
                    ended: false,
                }
                .boxed()
            }))
        }
    });
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        let idle_now = !closing && activity.in_flight() == 0 && activity.responses() > 0;
        let quiet = async {
            match idle {
                Some(d) if idle_now => tokio::time::sleep(d).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = conn.as_mut() => return,
            () = activity.changed.notified() => {
                let taken = activity.in_flight() + activity.responses();
                if close_after_response && activity.responses() > 0 && !closing {
                    // the response is out: end the connection although its
                    // head never said so, as llama-server does
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                } else if max_requests.is_some_and(|n| taken >= n) && !closing {
                    // nginx's keepalive_requests: HTTP/2 sends GOAWAY at
                    // once (the streams it took finish), HTTP/1.1 closes
                    // once the response in flight is out
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
            () = quiet => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

/// Requests of one connection: in flight, and responses fully produced.
#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    responses: AtomicUsize,
    changed: Notify,
}

impl Activity {
    fn started(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_one();
    }

    fn ended(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.responses.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_one();
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    fn responses(&self) -> usize {
        self.responses.load(Ordering::SeqCst)
    }
}

/// A response body that tells its connection when it has been produced
/// whole (or abandoned).
struct Tracked {
    inner: ResponseBody,
    activity: Arc<Activity>,
    ended: bool,
}

impl Tracked {
    fn end(&mut self) {
        if !std::mem::replace(&mut self.ended, true) {
            self.activity.ended();
        }
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.end();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.end();
    }
}
