//! `cicada`: the one command line, one subcommand per role, each served by
//! the crate whose job it is. Local workers are this same executable run as
//! `cicada worker`.

use clap::{Parser, Subcommand};

/// cicada: a distributed load generator for LLM inference servers.
#[derive(Debug, Parser)]
#[command(name = "cicada", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `cicada` can do.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario over a fleet of workers and report the results.
    Run(Box<cicada_coordinator::cli::RunArgs>),
    /// Serve Locust's web UI with the fleet attached and idle until its
    /// start form (or `POST /swarm`) starts the run: `run --web-wait`.
    Web(Box<cicada_coordinator::cli::RunArgs>),
    /// Join a coordinator (`cicada run`) and run this worker's share of the load.
    Worker(Box<cicada_worker::WorkerArgs>),
    /// Serve the built-in mock inference server.
    Mock(Box<cicada_coordinator::cli::MockArgs>),
    /// Check a scenario file without running it.
    Validate(cicada_coordinator::cli::ValidateArgs),
    /// Measure this machine's client: throughput, CPU per token and timing
    /// error against the built-in mock, one core each.
    Selftest(Box<cicada_bench::SelftestArgs>),
    /// Compare result files side by side, or merge them into one row.
    Report(cicada_report::cli::ReportArgs),
    /// Is B different from A? Each headline figure's difference, its
    /// confidence interval and significance; `--fail-if` gates CI.
    Compare(cicada_report::compare::CompareArgs),
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
    let code = match cli.command {
        // the worker sizes its own runtime (`--threads`)
        Command::Worker(args) => cicada_worker::main(*args),
        Command::Run(args) => block_on(cicada_coordinator::run(*args)),
        Command::Web(mut args) => {
            args.web_wait = true;
            block_on(cicada_coordinator::run(*args))
        }
        Command::Mock(args) => block_on(cicada_coordinator::mock(*args)),
        Command::Validate(args) => cicada_coordinator::validate(&args),
        Command::Selftest(args) => block_on(cicada_bench::selftest(*args)),
        Command::Report(args) => cicada_report::cli::report(&args),
        Command::Compare(args) => cicada_report::compare::run(&args),
    };
    std::process::exit(code);
}

/// Run a subcommand on a multi-threaded runtime; its exit code.
fn block_on(command: impl std::future::Future<Output = i32>) -> i32 {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(command),
        Err(e) => {
            eprintln!("cicada: cannot start the runtime: {e}");
            1
        }
    }
}
