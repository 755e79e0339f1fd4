//! What the kernel knows of a TCP socket: its state, round-trip time and
//! pending error (read through `cicada_sys`). Read by opening (`dial`),
//! resending (`send`) and timing (`response`), below all three.

pub(crate) use cicada_sys::socket::{
    TCP_CLOSE, TCP_CLOSE_WAIT, TCP_ESTABLISHED, rtt, socket_error, tcp_state,
};
