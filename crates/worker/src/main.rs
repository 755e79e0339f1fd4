//! `worker`: joins a coordinator and runs its share of the load.

use cicada_client::tls;
use cicada_worker::{Identity, WorkerArgs, index_from_environment, read_token};
use clap::Parser;

fn main() {
    let args = WorkerArgs::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CICADA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(cicada_client::sys::stderr_colour())
        .init();
    tls::install_crypto_provider();
    cicada_client::sys::raise_fd_limit();
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let tls = match args.tls() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("worker: cannot read a TLS file: {e}");
            std::process::exit(2);
        }
    };
    let token = match read_token(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("worker: cannot read the token: {e}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("worker: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let who = Identity {
        requested_index: args.index.or_else(index_from_environment),
        token,
        threads,
    };
    let result = runtime.block_on(async {
        // SIGINT/SIGTERM (a Ctrl-C, a pod deletion): finish, report, leave
        let leave = cicada_worker::Leave::new();
        tokio::spawn(cicada_worker::watch_signals(leave.clone()));
        cicada_worker::serve(&args.coordinator, who, &tls, args.dial_timeout, leave).await
    });
    if let Err(e) = result {
        eprintln!("worker: {e}");
        std::process::exit(e.exit_code());
    }
}
