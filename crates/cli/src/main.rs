//! `cicada`: the one command line, one subcommand per role, each served by
//! the crate whose job it is. Local workers are this same executable run as
//! `cicada worker`. Flags are read here (`args`) and handed to the
//! libraries as plain settings.

mod args;
mod exit;

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
    Run(Box<args::run::RunArgs>),
    /// Serve Locust's web UI with the fleet attached and idle until its
    /// start form (or `POST /swarm`) starts the run: `run --web-wait`.
    Web(Box<args::run::RunArgs>),
    /// Join a coordinator (`cicada run`) and run this worker's share of the load.
    Worker(Box<args::worker::WorkerArgs>),
    /// Serve the built-in mock inference server.
    Mock(Box<args::run::MockArgs>),
    /// Check a scenario file without running it.
    Validate(args::run::ValidateArgs),
    /// Measure this machine's client: throughput, CPU per token and timing
    /// error against the built-in mock, one core each.
    #[cfg(feature = "bench")]
    Selftest(Box<args::selftest::SelftestArgs>),
    /// Compare result files side by side, or merge them into one row.
    Report(args::report::ReportArgs),
    /// Is B different from A? Each headline figure's difference, its
    /// confidence interval and significance; `--fail-if` gates CI.
    Compare(args::compare::CompareArgs),
}

fn main() {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CICADA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(cicada_sys::process::stderr_colour())
        .init();
    cicada_client::tls::install_crypto_provider();
    // who reads HTTP/1.1 in this process (local workers inherit the variable)
    if std::env::var("CICADA_HTTP1").as_deref() == Ok("hyper") {
        cicada_client::http::H1Impl::Hyper.make_default();
    }
    cicada_sys::process::raise_fd_limit();
    let code = match cli.command {
        // the worker sizes its own runtime (`--threads`)
        Command::Worker(args) => exit::of_worker(cicada_worker::main((*args).into())),
        // `cicada web` takes the run's flags: its --dry-run describes the
        // same plans and starts no UI
        Command::Run(args) | Command::Web(args) if args.dry_run => {
            let json = args.json;
            block_on(cicada_coordinator::dry_run((*args).into()), |r| match r {
                Ok(d) => {
                    println!("{}", if json { d.json() } else { d.text() });
                    0
                }
                Err(e) => exit::of_error(&e),
            })
        }
        Command::Run(args) => {
            block_on(cicada_coordinator::run_repeated((*args).into()), summarised)
        }
        Command::Web(args) => {
            let mut args: cicada_coordinator::cli::RunArgs = (*args).into();
            args.web_wait = true;
            block_on(cicada_coordinator::run(args), exit::of_run)
        }
        Command::Mock(args) => block_on(cicada_coordinator::mock((*args).into()), |r| {
            r.map_or_else(|e| exit::of_error(&e), |()| 0)
        }),
        Command::Validate(args) => match cicada_coordinator::validate(&args.into()) {
            Ok(line) => {
                println!("{line}");
                0
            }
            Err(e) => exit::of_error(&e),
        },
        #[cfg(feature = "bench")]
        Command::Selftest(args) => {
            block_on(cicada_bench::selftest((*args).into()), exit::of_selftest)
        }
        Command::Report(args) => exit::of_report(cicada_report::cli::report(&args.into())),
        Command::Compare(args) => exit::of_compare(cicada_report::compare::run(&args.into())),
    };
    std::process::exit(code);
}

/// `cicada run`'s exit code; repeated runs are summarised first (what
/// completed, even after a signal or a failed run).
fn summarised(outcome: Result<cicada_coordinator::Runs, cicada_coordinator::RunError>) -> i32 {
    use cicada_coordinator::Runs;
    match outcome {
        Ok(Runs::Once(end)) => exit::of_run(Ok(end)),
        Ok(Runs::Repeated(r)) => {
            let dirs: Vec<_> = r.complete().map(|d| d.dir.clone()).collect();
            if let Err(e) =
                cicada_report::repeats::report(&r.dir, &dirs, r.spec.level, r.spec.cv_warn)
            {
                eprintln!("error: summarising the runs in {}: {e}", r.dir.display());
            }
            let end = r.end();
            match r.error {
                Some(e) => exit::of_error(&e),
                None => exit::of_run(Ok(end)),
            }
        }
        Err(e) => exit::of_error(&e),
    }
}

/// Run a subcommand on a multi-threaded runtime; its exit code, which
/// `code` makes of its outcome. The runtime is shut down without waiting
/// for blocking work the command left behind: a Ctrl-C while the dataset
/// is built ends the command, and the build it abandoned must not hold
/// the process for as long as it would have taken.
fn block_on<T>(command: impl std::future::Future<Output = T>, code: impl FnOnce(T) -> i32) -> i32 {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let outcome = runtime.block_on(command);
            runtime.shutdown_background();
            code(outcome)
        }
        Err(e) => {
            eprintln!("cicada: cannot start the runtime: {e}");
            1
        }
    }
}
