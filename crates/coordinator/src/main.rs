//! `coord`: the cicada coordinator.

use std::io::IsTerminal as _;

use clap::Parser;

fn main() {
    let cli = cicada_coordinator::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CICADA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // colour codes only for a terminal: a log file holds no escape sequences
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("coord: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(cicada_coordinator::main(cli));
    std::process::exit(code);
}
