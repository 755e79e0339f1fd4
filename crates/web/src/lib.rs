//! `cicada run --web [ADDR]` (and `cicada web`): Locust's web UI for a
//! cicada run, served by the coordinator's process while the run goes. The
//! page (`page`: HTML, CSS and a small script drawing SVG charts, compiled
//! in; nothing is fetched) reads a Locust-compatible API (`routes`) over
//! the board the run loop keeps (`state`, rendered by `stats`, with the
//! load in force from `load`, the target's `/metrics` from `server_side`
//! and the client-bound verdict from `client_verdict`); `auth`
//! decides who may ask; `form` reads the start form. With `--web-ui DIR`,
//! Locust's own built page (`bundle`) is served at `/` instead, fed by the
//! same API and the routes only it reads (`locust`); cicada's page stays at
//! `/cicada`.
//!
//! The run loop reaches the server two ways: `/stop` arrives as a stop
//! the signal listener hands out like Ctrl-C's, and `POST /swarm` (when
//! started with `--web-wait`) as a [`SwarmAsk`] it answers once the
//! scenario it describes is checked; while the run goes, `POST /swarm`
//! (the page's Edit) arrives as a [`SteerAsk`] the step's helm answers once
//! the change is sent to the fleet.

mod auth;
mod bundle;
mod client_verdict;
mod figures;
#[cfg(test)]
mod fixtures;
mod form;
mod load;
mod locust;
mod page;
mod routes;
mod server_side;
pub mod state;
mod stats;

use std::net::SocketAddr;
use std::sync::Arc;

use cicada_serve::Server;
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

pub use state::{BoardSink, Feed, RunState};

/// Environment variable holding the UI's token (or use `--web-token-file`).
pub const WEB_TOKEN_ENV: &str = "CICADA_WEB_TOKEN";

/// Why the UI could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The address could not be bound.
    #[error("--web {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// A non-loopback address without a token.
    #[error(
        "--web {0} is not a loopback address: give a token with --web-token-file FILE \
         or CICADA_WEB_TOKEN (only 127.0.0.0/8 and ::1 are served without one)"
    )]
    NeedsToken(std::net::IpAddr),
    /// `--web-ui DIR` is not Locust's built page.
    #[error(transparent)]
    Ui(#[from] bundle::BundleError),
}

/// Why the run would not do what the page asked (start with the form's
/// values, change the load, reset the figures): said to the person as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl From<&str> for Refusal {
    fn from(why: &str) -> Self {
        Self(why.to_string())
    }
}

/// A start form that was sent: the overrides it asks for, and where to say
/// whether the run starts.
#[derive(Debug)]
pub struct SwarmAsk {
    /// The form's settings, typed, in its order.
    pub settings: Vec<cicada_scenarios::Setting>,
    reply: oneshot::Sender<Result<(), Refusal>>,
}

impl SwarmAsk {
    /// Tell the form whether the run starts (or why not).
    pub fn answer(self, outcome: Result<(), Refusal>) {
        let _ = self.reply.send(outcome);
    }
}

/// A change of the running load that was sent (the page's Edit, or
/// `POST /swarm` mid-run).
#[derive(Debug)]
pub struct SteerAsk {
    /// What changes.
    pub edit: Edit,
    reply: oneshot::Sender<Result<String, Refusal>>,
}

/// What a change asks of the load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Edit {
    /// A closed loop's: Locust's users and spawn rate.
    Users {
        /// Users across the fleet from the change on.
        users: u32,
        /// New users per second (`None`: all at once).
        spawn_rate: Option<f64>,
    },
    /// An open loop's: its mean rate (infinite: as fast as the cap lets)
    /// and its fleet-wide cap, each `None` when unchanged.
    Open {
        /// Requests per second from the change on.
        rate: Option<f64>,
        /// Requests in flight across the fleet from the change on.
        max_concurrency: Option<u32>,
    },
}

impl SteerAsk {
    /// Tell the form what became of the change (a message either way).
    pub fn answer(self, outcome: Result<String, Refusal>) {
        let _ = self.reply.send(outcome);
    }
}

/// `/stats/reset` (GET or POST): the figures start again (Locust's reset).
#[derive(Debug)]
pub struct ResetAsk {
    reply: oneshot::Sender<Result<String, Refusal>>,
}

impl ResetAsk {
    /// Tell the caller where the figures start now (or why they do not).
    pub fn answer(self, outcome: Result<String, Refusal>) {
        let _ = self.reply.send(outcome);
    }
}

/// What the page asks of a running step.
#[derive(Debug)]
pub enum Control {
    /// Change the load (the Edit form).
    Change(SteerAsk),
    /// Start the figures again.
    Reset(ResetAsk),
}

/// What every connection of the server shares.
#[derive(Debug)]
struct Shared {
    feed: Feed,
    guard: auth::Guard,
    /// Locust's own page, served at `/` (`--web-ui`).
    ui: Option<bundle::Bundle>,
    stop: mpsc::UnboundedSender<&'static str>,
    swarm: mpsc::Sender<SwarmAsk>,
    steer: mpsc::Sender<Control>,
}

/// A running web UI.
#[derive(Debug)]
pub struct Web {
    addr: SocketAddr,
    feed: Feed,
    token: Option<String>,
    stop: Option<mpsc::UnboundedReceiver<&'static str>>,
    swarm: mpsc::Receiver<SwarmAsk>,
    steer: Option<mpsc::Receiver<Control>>,
    /// Stops serving when the UI is dropped.
    _server: Server,
}

impl Web {
    /// Bind `addr` and serve the UI for `feed` until dropped; a
    /// non-loopback `addr` needs a `token`; `ui` is the directory of
    /// Locust's built page to serve at `/` instead of cicada's.
    pub async fn serve(
        addr: SocketAddr,
        token: Option<String>,
        feed: Feed,
        ui: Option<&std::path::Path>,
    ) -> Result<Self, WebError> {
        let guard = auth::Guard::new(addr.ip(), token)?;
        let ui = ui.map(bundle::Bundle::load).transpose()?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| WebError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| WebError::Bind { addr, source })?;
        let (stop_tx, stop_rx) = mpsc::unbounded_channel();
        let (swarm_tx, swarm_rx) = mpsc::channel(4);
        let (steer_tx, steer_rx) = mpsc::channel(4);
        let token = guard.token().map(str::to_string);
        let shared = Arc::new(Shared {
            feed: feed.clone(),
            guard,
            ui,
            stop: stop_tx,
            swarm: swarm_tx,
            steer: steer_tx,
        });
        let server =
            cicada_serve::serve(listener, "web UI", move |req: http::Request<Incoming>| {
                let shared = shared.clone();
                async move { routes::respond(req, &shared).await }
            });
        Ok(Self {
            addr: bound,
            feed,
            token,
            stop: Some(stop_rx),
            swarm: swarm_rx,
            steer: Some(steer_rx),
            _server: server,
        })
    }

    /// The page's address to print (with `?token=` when one is needed).
    pub fn url(&self) -> String {
        match &self.token {
            Some(_) => format!("http://{}/?token=<the token>", self.addr),
            None => format!("http://{}/", self.addr),
        }
    }

    /// The board the run loop writes.
    pub fn feed(&self) -> Feed {
        self.feed.clone()
    }

    /// `/stop`'s channel, handed once to the signal listener.
    pub fn take_stop(&mut self) -> Option<mpsc::UnboundedReceiver<&'static str>> {
        self.stop.take()
    }

    /// The changes and resets sent while the run goes, handed once to the run loop.
    pub fn take_steer(&mut self) -> Option<mpsc::Receiver<Control>> {
        self.steer.take()
    }

    /// The next start form sent (`None` once the server is gone). Cancel-safe.
    pub async fn next_swarm(&mut self) -> Option<SwarmAsk> {
        self.swarm.recv().await
    }
}
