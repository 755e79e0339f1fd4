//! The gRPC endpoint workers attach to, with its limits for strangers.

use std::time::Duration;

use cicada_proto::v1::coordinator_server::CoordinatorServer;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::FleetOptions;
use super::server::{FleetService, Inbound};
use super::{connections, hello_limit};
use crate::error::FleetError;

/// Most concurrent streams on one connection: a worker attaches once per
/// connection; more would only let a stranger open hellos in parallel.
const MAX_STREAMS_PER_CONNECTION: u32 = 2;

/// Most bytes of request headers: gRPC's are a few hundred.
const MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;

/// Serve the gRPC endpoint on `listener`, its inbound messages into `tx`.
/// Before a worker proved the token it may hold one of
/// [`connections::UNAUTHENTICATED_MAX`] connections for a while, two
/// streams on it, 16 KiB of headers and a hello of at most
/// [`hello_limit::HELLO_MAX_BYTES`]; after, messages up to
/// [`cicada_proto::MAX_MESSAGE_BYTES`].
pub(super) fn serve(
    options: &FleetOptions,
    listener: TcpListener,
    tx: mpsc::Sender<Inbound>,
) -> Result<tokio::task::JoinHandle<()>, FleetError> {
    let service = CoordinatorServer::new(FleetService::new(options.token.clone(), tx))
        .max_decoding_message_size(cicada_proto::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(cicada_proto::MAX_MESSAGE_BYTES);
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &options.tls {
        builder = builder
            .tls_config(tls.server_config())
            .map_err(FleetError::Tls)?;
    }
    Ok(tokio::spawn(async move {
        let result = builder
            .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
            .http2_max_header_list_size(MAX_HEADER_LIST_BYTES)
            .http2_keepalive_interval(Some(Duration::from_secs(2)))
            .http2_keepalive_timeout(Some(cicada_proto::TRANSPORT_KEEPALIVE_TIMEOUT))
            .add_service(hello_limit::HelloLimit(service))
            .serve_with_incoming(connections::Incoming::new(listener))
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "the coordinator's gRPC server stopped");
        }
    }))
}
