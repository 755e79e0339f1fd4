//! `coord`: the cicada command line, one subcommand per role, each served
//! by the crate whose job it is.

use clap::{Parser, Subcommand};

/// cicada: a distributed load generator for LLM inference servers.
#[derive(Debug, Parser)]
#[command(name = "coord", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `coord` can do.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario over a fleet of workers and report the results.
    Run(Box<cicada_coordinator::cli::RunArgs>),
    /// Serve the built-in mock inference server.
    Mock(Box<cicada_coordinator::cli::MockArgs>),
    /// Check a scenario file without running it.
    Validate(cicada_coordinator::cli::ValidateArgs),
    /// Measure this machine's client: throughput, CPU per token and timing
    /// error against the built-in mock, one core each.
    Selftest(cicada_bench::SelftestArgs),
    /// Compare result files side by side, or merge them into one row.
    Report(cicada_results::cli::ReportArgs),
}

fn main() {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CICADA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(cicada_client::sys::stderr_colour())
        .init();
    cicada_client::tls::install_crypto_provider();
    cicada_client::sys::raise_fd_limit();
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
    let code = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => cicada_coordinator::run(*args).await,
            Command::Mock(args) => cicada_coordinator::mock(*args).await,
            Command::Validate(args) => cicada_coordinator::validate(&args),
            Command::Selftest(args) => cicada_bench::selftest(args).await,
            Command::Report(args) => cicada_results::cli::report(&args),
        }
    });
    std::process::exit(code);
}
