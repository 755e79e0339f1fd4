//! `coord run`: scenario -> fleet -> one step per sweep value -> results.

use std::path::{Path, PathBuf};

use anyhow::Context;
use cicada_metrics::Counter;
use cicada_scenarios::shape::Warmup;
use cicada_scenarios::tokenizer::Tokenizer;
use cicada_scenarios::{Scenario, plan, sharding};
use rand::Rng;

use crate::cli::RunArgs;
use crate::error::{EXIT_DEGRADED, EXIT_INTERRUPTED, RunError};
use crate::fleet::{Fleet, FleetOptions};
use crate::live::LiveMetrics;
use crate::merge::Aggregate;
use crate::progress::{Display, Progress};
use crate::report::outputs::{Outputs, StepDone};
use crate::report::results::{RunContext, StepId, step_results, write_step};
use crate::report::{RunResult, stages};
use crate::signals::Signals;
use crate::step::{Step, run_step};
use crate::sweep::{Outcome, Sweeper};
use crate::{server_metrics, target};

fn random_hex(bytes: usize) -> String {
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

fn worker_bin(args: &RunArgs) -> anyhow::Result<PathBuf> {
    if let Some(p) = &args.worker_bin {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("locating the coord executable")?;
    let dir = exe.parent().context("coord has no parent directory")?;
    Ok(dir.join(format!("worker{}", std::env::consts::EXE_SUFFIX)))
}

/// The shared worker token: `--token-file`, else `CICADA_TOKEN`, else (local
/// fleets only) a random one handed to the local workers.
fn worker_token(args: &RunArgs, remote: bool) -> Result<String, RunError> {
    if let Some(path) = &args.token_file {
        let t = std::fs::read_to_string(path)
            .map_err(|e| RunError::BadInput(format!("--token-file {}: {e}", path.display())))?;
        let t = t.trim().to_string();
        if t.is_empty() {
            return Err(RunError::BadInput(format!(
                "--token-file {}: the file is empty",
                path.display()
            )));
        }
        return Ok(t);
    }
    match std::env::var(crate::fleet::TOKEN_ENV) {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ if remote => Err(RunError::BadInput(format!(
            "remote workers need a shared token: set {} (coordinator and workers) or pass --token-file",
            crate::fleet::TOKEN_ENV
        ))),
        _ => Ok(random_hex(16)),
    }
}

/// TLS for the worker port from the `--tls-*` files.
fn server_tls(args: &RunArgs) -> Result<Option<crate::fleet::ServerTls>, RunError> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| RunError::BadInput(format!("{}: {e}", p.display())))
    };
    Ok(Some(crate::fleet::ServerTls {
        cert_pem: read(cert)?,
        key_pem: read(key)?,
        client_ca_pem: args.tls_client_ca.as_deref().map(read).transpose()?,
        cert_path: cert.clone(),
    }))
}

/// Most concurrent streams one worker is given: each is a connection and a
/// task (about 30 KB); `coord selftest` measures 10,000 on one core.
const MAX_STREAMS_PER_WORKER: u32 = 100_000;

/// Refuse a run that would give one worker more streams than it can hold.
fn check_streams_per_worker(s: &Scenario, workers: u32) -> Result<(), RunError> {
    let Some(peak) = cicada_scenarios::peak_streams(s) else {
        return Ok(());
    };
    let per_worker = peak.div_ceil(workers.max(1));
    if per_worker <= MAX_STREAMS_PER_WORKER {
        return Ok(());
    }
    Err(RunError::BadInput(format!(
        "{peak} concurrent streams over {workers} worker(s) is {per_worker} per worker; \
         one worker holds at most {MAX_STREAMS_PER_WORKER}: use --workers {} or more",
        peak.div_ceil(MAX_STREAMS_PER_WORKER)
    )))
}

/// Remote workers reach the embedded mock at the address they reached us at.
fn reach_embedded_mock(plans: &mut [plan::Plan], fleet: &Fleet) {
    for p in plans {
        let Some(ip) = fleet
            .members()
            .get(&p.worker_index)
            .and_then(|m| m.local)
            .map(|a| a.ip())
        else {
            continue;
        };
        if ip.is_loopback() {
            continue;
        }
        let host = match ip {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        };
        for url in &mut p.target.urls {
            *url = url.replacen("127.0.0.1", &host, 1);
        }
    }
}

/// When measuring starts, µs after the barrier: the end of the warm-up.
fn warmup_end_us(s: &Scenario, pool: &cicada_scenarios::dataset::Pool) -> u64 {
    match s.load.warmup {
        None => 0,
        Some(Warmup::Duration(d)) => d.get().as_micros() as u64,
        Some(Warmup::Requests(n)) => sharding::schedule_of(s, pool)
            .global()
            .nth(n as usize)
            .map_or(0, |slot| slot.offset.as_micros() as u64),
    }
}

/// Run a scenario; returns the process exit code.
pub async fn run(args: RunArgs) -> Result<i32, RunError> {
    let loaded = crate::cli::scenario::of_run(&args)?;
    let mut scenario = loaded.scenario;
    if let Some(dir) = &args.output_dir {
        scenario.output.dir = dir.clone();
    }
    let local_workers = args
        .workers
        .unwrap_or(if args.expect_workers.is_some() { 0 } else { 1 });
    let workers = args.expect_workers.unwrap_or(local_workers);
    if workers == 0 {
        return Err(RunError::BadInput(
            "no workers: give --workers N (local) and/or --expect-workers N (total)".into(),
        ));
    }
    if workers < local_workers {
        return Err(RunError::BadInput(format!(
            "--expect-workers {workers} is fewer than the {local_workers} local --workers"
        )));
    }
    check_streams_per_worker(&scenario, workers)?;
    let remote = workers > local_workers;
    let token = worker_token(&args, remote)?;
    let tls = server_tls(&args)?;
    let tokenizer = match &scenario.tokenizer {
        Some(spec) => {
            Some(Tokenizer::load(&spec.source).map_err(|e| RunError::BadInput(e.to_string()))?)
        }
        None => None,
    };
    let live = match args.metrics_addr {
        Some(addr) => {
            let live = LiveMetrics::serve(addr)
                .await
                .map_err(|e| RunError::BadInput(e.to_string()))?;
            eprintln!("coord: live metrics at http://{}/metrics", live.addr());
            Some(live)
        }
        None => None,
    };
    let pool = crate::pool::build(&scenario, tokenizer.as_ref(), args.quiet).await?;
    let mock_ip = if remote {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::LOCALHOST.into()
    };
    let target = target::resolve(&scenario, mock_ip, pool.entries.first()).await?;
    let options = FleetOptions {
        local_workers,
        expect_workers: workers,
        listen: args.listen,
        wait_workers: args.wait_workers,
        local: crate::fleet::LocalWorkers::Processes(worker_bin(&args)?),
        token,
        heartbeat_timeout: args.heartbeat_timeout,
        tls,
    };
    let mut signals = Signals::install();
    let mut fleet = Fleet::start(options).await?;
    if remote {
        eprintln!(
            "coord: waiting for {} remote worker(s) on {} (worker --coordinator {}://HOST:{})",
            workers - local_workers,
            fleet.addr,
            if fleet.options.tls.is_some() {
                "https"
            } else {
                "http"
            },
            fleet.addr.port()
        );
    }
    tracing::info!(addr = %fleet.addr, workers, "waiting for workers");
    if let Err(e) = fleet.join().await {
        fleet.shutdown().await;
        return Err(e.into());
    }
    let ctx = RunContext {
        scenario_origin: loaded.origin,
        target: target.resolved.clone(),
        workers,
        dataset: pool.report.clone(),
    };
    let run_id = random_hex(8);
    let mut sweeper = Sweeper::new(&scenario);
    let mut finished: Vec<RunResult> = Vec::new();
    let mut stage_results: Vec<RunResult> = Vec::new();
    let mut progress = Progress::new(
        Display::choose(args.quiet, args.headless),
        live,
        &scenario.name,
    );
    let mut number = 0u32;
    let outcome: anyhow::Result<()> = async {
        let outputs = Outputs::create(&scenario)?;
        while let Some(step) = sweeper.next_step() {
            if number > 0
                && let Some(pause) = scenario.sweep.as_ref().and_then(|s| s.pause)
            {
                tokio::time::sleep(pause.get()).await;
            }
            number += 1;
            let step_no = if sweeper.is_sweep() { number } else { 0 };
            let mut plans = plan::plans_for(
                &step.scenario,
                &target.resolved,
                &pool,
                tokenizer.as_ref(),
                &run_id,
                step_no,
                workers,
            );
            if remote && target.mock.is_some() {
                reach_embedded_mock(&mut plans, &fleet);
            }
            let windows = plans.first().map(|p| p.stages.clone()).unwrap_or_default();
            let interval_s = step.scenario.load.report_interval.get().as_secs_f64();
            let mut agg = Aggregate::new(interval_s, 0..workers);
            agg.sink = Some(outputs.step_sink(step_no));
            progress.step(
                step_no,
                workers,
                plans.first().and_then(plan::Plan::duration),
            );
            if sweeper.is_sweep() {
                eprintln!("stage {step_no}: {}", step.name);
            }
            let mut watch = server_metrics::Watch::start(&step.scenario, &target, &windows).await;
            let end = run_step(
                &mut fleet,
                &mut signals,
                Step {
                    number: step_no,
                    plans: &plans,
                    agg: &mut agg,
                    progress: &mut progress,
                    on_start: &mut |at| watch.started(at),
                },
            )
            .await;
            let server = watch.finish().await;
            let end = end?;
            let id = StepId {
                number: step_no,
                name: step.name.clone(),
            };
            let warmup_end = warmup_end_us(&step.scenario, &pool);
            let mut results = step_results(
                &ctx,
                &id,
                &step.scenario,
                &windows,
                &mut agg,
                &end,
                warmup_end,
                server,
            );
            let s = results[0].summary();
            sweeper.finished(Outcome {
                request_throughput: s.request_throughput,
                attainment: if s.sent > 0 {
                    results[0].total.counter(Counter::Goodput) as f64 / s.sent as f64
                } else {
                    0.0
                },
            });
            let extra = outputs.step_done(StepDone {
                current: &results,
                earlier: &finished,
                earlier_stages: &stage_results,
                sweep: sweeper.is_sweep(),
                search: sweeper.search(),
            })?;
            write_step(&results, sweeper.is_sweep(), &extra)?;
            let whole = results.remove(0);
            let stop = whole.partial();
            finished.push(whole);
            stage_results.extend(results);
            if stop {
                break;
            }
        }
        Ok(())
    }
    .await;
    fleet.shutdown().await;
    drop(target.mock);
    outcome?;
    if sweeper.is_sweep() {
        print!("{}", stages::render("Sweep", &finished, sweeper.search()));
    } else if !stage_results.is_empty() {
        print!("{}", stages::render("Stages", &stage_results, None));
    }
    Ok(if finished.iter().any(RunResult::partial) {
        EXIT_INTERRUPTED
    } else if finished.iter().any(RunResult::degraded) {
        EXIT_DEGRADED
    } else {
        crate::report::gates::exit_code(&finished).unwrap_or(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_never_given_more_streams_than_it_holds() {
        let mut s = Scenario::default();
        s.load.users = Some(250_000);
        let e = check_streams_per_worker(&s, 2).unwrap_err().to_string();
        assert!(e.contains("--workers 3 or more"), "{e}");
        assert!(check_streams_per_worker(&s, 3).is_ok());
        s.load.users = None;
        assert!(
            check_streams_per_worker(&s, 1).is_ok(),
            "open loop: no bound known"
        );
    }

    #[test]
    fn warmup_ends_where_measuring_starts() {
        let mut s = Scenario::default();
        s.load.num_prompts = Some(100);
        s.load.request_rate = cicada_scenarios::units::Rate::Finite(10.0);
        let pool = cicada_scenarios::dataset::build_pool(&s, None).unwrap();
        assert_eq!(warmup_end_us(&s, &pool), 0);
        s.load.warmup = Some(Warmup::Duration(cicada_scenarios::units::Span::secs(3)));
        assert_eq!(warmup_end_us(&s, &pool), 3_000_000);
        s.load.warmup = Some(Warmup::Requests(10));
        let tenth = sharding::schedule_of(&s, &pool)
            .global()
            .nth(10)
            .unwrap()
            .offset;
        assert_eq!(warmup_end_us(&s, &pool), tenth.as_micros() as u64);
        assert!(warmup_end_us(&s, &pool) > 0);
    }
}
