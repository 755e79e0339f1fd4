//! `cicada run`: scenario -> fleet -> one step per sweep value -> results.
//!
//! [`run`] reads top-down: settle the command line (`setup`), build the
//! request pool, resolve the target, join the fleet, run every step, shut
//! the fleet down, then print the run's summary and pick the exit code.

mod finish;
pub mod repeat;
mod setup;
mod start_form;

use cicada_metrics::Counter;
use cicada_plan::Plan;
use cicada_plan::shape::Warmup;
use cicada_scenarios::dataset::Pool;
use cicada_scenarios::sharding::{Recipient, StepInputs};
use cicada_scenarios::{Scenario, sharding};

use crate::cli::RunArgs;
use crate::error::{RunEnd, RunError, StepError};
use crate::fleet::Fleet;
use crate::live::LiveSink;
use crate::merge::Aggregate;
use crate::progress::{Display, Progress};
use crate::signals::Signals;
use crate::step::{Helm, SaturationWatch, Step, run_step};
use crate::sweep::{self, Outcome, Sweeper};
use cicada_probe::hooks::Hooks;
use cicada_probe::scrape::Watch;
use cicada_probe::{self as target, Target};
use cicada_results::RunResult;
use cicada_results::abort::AbortWatch;
use cicada_results::console::Console;
use cicada_results::files::Files;
use cicada_results::sink::{RunFinished, Sink, Sinks, StepBegan, StepFinished};
use cicada_results::steady::{Plateau, SteadyWatch};
use cicada_results::write::RunContext;
use cicada_web::{BoardSink, Control, Feed, RunState, Web};
use finish::{FinishedStep, step_results};
use tokio::sync::mpsc;

/// Run a scenario; how it ended.
pub async fn run(args: RunArgs) -> Result<RunEnd, RunError> {
    // from the first moment: a Ctrl-C while the pool is built or the target
    // probed stops with a word, not by the default action
    let mut signals = Signals::install();
    let (mut setup, pool, target) = tokio::select! {
        r = prepare(&args) => r?,
        signal = signals.next() => return Err(RunError::Interrupted {
            signal,
            message: format!("{signal} while preparing the run: stopped before any request was sent; no results to write"),
        }),
    };
    let mut fleet = setup.fleet(&args, &mut signals).await?;
    let mut web = setup.web.take();
    let (pool, target) = match web.as_mut() {
        Some(w) => {
            let members: Vec<(u32, String)> =
                fleet.active().map(|(i, m)| (i, m.host.clone())).collect();
            w.feed().roster(&members);
            if let Some(stop) = w.take_stop() {
                signals.attach_web(stop);
            }
            if args.web_wait {
                let started =
                    start_form::wait(&args, &mut setup, w, &mut fleet, &mut signals).await;
                match started {
                    Ok(ready) => ready,
                    Err(e) => {
                        fleet.shutdown().await;
                        return Err(e);
                    }
                }
            } else {
                (pool, target)
            }
        }
        None => (pool, target),
    };
    let feed = web.as_ref().map(Web::feed);
    // the run's outputs, in the order they hear each event (the result
    // files join first when the run starts)
    let mut out = Sinks::new();
    out.push(Box::new(Progress::new(Display::choose(
        args.quiet,
        args.headless,
    ))));
    out.push(Box::new(Console));
    if let Some(live) = setup.live.take() {
        out.push(Box::new(LiveSink::new(live, &setup.scenario.name)));
    }
    if let Some(feed) = &feed {
        out.push(Box::new(BoardSink::new(feed.clone())));
    }
    let mut steps = Steps {
        ctx: RunContext {
            scenario_origin: setup.origin.clone(),
            target: target.resolved.clone(),
            workers: setup.workers,
            dataset: pool.report.clone(),
        },
        run_id: setup::random_hex(8),
        sweeper: Sweeper::new(&setup.scenario),
        out,
        finished: Vec::new(),
        stage_results: Vec::new(),
        web: feed,
        steer: web.as_mut().and_then(Web::take_steer),
    };
    let hooks = match Hooks::new(&setup.scenario, &target) {
        Ok(h) => h,
        Err(e) => {
            fleet.shutdown().await;
            return Err(e.into());
        }
    };
    let env = Env {
        setup: &setup,
        pool: &pool,
        target: &target,
        hooks: hooks.as_ref(),
    };
    let outcome = steps.run_all(&env, &mut fleet, &mut signals).await;
    fleet.shutdown().await;
    drop(target.mock);
    if let Some(feed) = &steps.web {
        feed.set_state(RunState::Stopped);
    }
    outcome?;
    let end = steps.finish();
    if let (true, Some(w)) = (args.web_wait, &web) {
        eprintln!(
            "cicada: the run ended; its results stay at {} until Ctrl-C",
            w.url()
        );
        signals.next().await;
    }
    Ok(end)
}

/// The run's settings, its request pool and its target, ready to go.
async fn prepare(args: &RunArgs) -> Result<(setup::Setup, Pool, Target), RunError> {
    let setup = setup::prepare(args).await?;
    let pool = crate::pool::build(&setup.scenario, setup.tokenizer.as_ref(), args.quiet).await?;
    let target = target::resolve(&setup.scenario, setup.mock_ip(), pool.entries.first()).await?;
    Ok((setup, pool, target))
}

/// What every step of the run shares.
struct Env<'a> {
    setup: &'a setup::Setup,
    pool: &'a Pool,
    target: &'a Target,
    /// The server hooks `[hooks]` asks for, if any.
    hooks: Option<&'a Hooks>,
}

/// The run's steps and their results so far.
struct Steps {
    ctx: RunContext,
    run_id: String,
    sweeper: Sweeper,
    /// The run's outputs.
    out: Sinks,
    /// Every finished step's whole result.
    finished: Vec<RunResult>,
    /// Every finished `[[stages]]` window's result.
    stage_results: Vec<RunResult>,
    /// The web UI's board, if it is served.
    web: Option<Feed>,
    /// The web UI's changes of the running load, if it is served.
    steer: Option<mpsc::Receiver<Control>>,
}

impl Steps {
    /// Run each step the sweep asks for (one without a sweep), pausing
    /// between them, until the last or until one is cut short.
    async fn run_all(
        &mut self,
        env: &Env<'_>,
        fleet: &mut Fleet,
        signals: &mut Signals,
    ) -> Result<(), RunError> {
        self.out
            .push_front(Box::new(Files::create(&env.setup.scenario)?));
        let mut number = 0u32;
        while let Some(step) = self.sweeper.next_step() {
            if number > 0
                && let Some(pause) = env.setup.scenario.sweep.as_ref().and_then(|s| s.pause)
            {
                tokio::time::sleep(pause.get()).await;
            }
            number += 1;
            let step_no = if self.sweeper.is_sweep() { number } else { 0 };
            let stop = self.one(env, fleet, signals, (step_no, step)).await?;
            if stop {
                break;
            }
        }
        Ok(())
    }

    /// Plan, run and write one step; true when it was cut short.
    async fn one(
        &mut self,
        env: &Env<'_>,
        fleet: &mut Fleet,
        signals: &mut Signals,
        (step_no, step): (u32, sweep::Step),
    ) -> Result<bool, RunError> {
        let mut plans = self.plans(env, fleet, &step.scenario, step_no);
        if plans.is_empty() {
            return Err(StepError::NoWorkerLeft.into());
        }
        // before the step is announced: a failed hook stops the run with
        // nothing of this step written
        let mut hook_calls = Vec::new();
        if let Some(hooks) = env.hooks {
            hooks.before(&mut hook_calls, &mut show_hook).await?;
        }
        let windows = plans
            .first()
            .map(|(_, p)| p.stages.clone())
            .unwrap_or_default();
        let interval_s = step.scenario.load.report_interval.get().as_secs_f64();
        let mut agg = Aggregate::new(interval_s, plans.iter().map(|(m, _)| *m));
        let warmup_end_us = warmup_end_us(&step.scenario, env.pool);
        let plateau = cicada_results::steady::plateau(&step.scenario);
        if let Some(p) = plateau {
            agg.watch_steady(SteadyWatch::new(p, warmup_end_us, interval_s));
        }
        if let Some(w) = AbortWatch::new(&step.scenario.abort, warmup_end_us, interval_s) {
            agg.watch_abort(w);
        }
        let saturation = match plateau {
            Some(Plateau::Rate { target, .. }) => Some(SaturationWatch {
                target,
                from_us: warmup_end_us,
                interval_s,
                spec: step.scenario.saturation.clone(),
            }),
            _ => None,
        };
        let members: Vec<(u32, String)> =
            fleet.active().map(|(i, m)| (i, m.host.clone())).collect();
        self.out.step_began(&StepBegan {
            result: &RunResult::new(&self.ctx, step_no, step.name.clone(), step.scenario.clone()),
            sweep: self.sweeper.is_sweep(),
            workers: &members,
            duration: plans.first().and_then(|(_, p)| p.duration()),
        });
        let mut watch = Watch::start(&step.scenario, env.target, &windows).await;
        if let Some(feed) = &self.web {
            feed.follow_server(step_no, watch.live());
        }
        let mut helm = self
            .steer
            .as_mut()
            .map(|asks| Helm::new(asks, self.web.as_ref(), step_no, &plans));
        let end = run_step(
            fleet,
            signals,
            Step {
                number: step_no,
                plans: &mut plans,
                agg: &mut agg,
                out: &mut self.out,
                on_start: &mut |at| watch.started(at),
                helm: helm.as_mut(),
                saturation,
            },
        )
        .await;
        let server = watch.finish().await;
        // the profiler stops even when the step failed; its error waits
        // until the step's results are written
        let after = match env.hooks {
            Some(hooks) => hooks.after(&mut hook_calls, &mut show_hook).await,
            None => Ok(()),
        };
        let (windows, changes) = match helm {
            Some(h) => (h.windows, h.changes),
            None => (windows, Vec::new()),
        };
        let finished = FinishedStep {
            number: step_no,
            name: step.name.clone(),
            scenario: &step.scenario,
            windows: &windows,
            changes: &changes,
            end: end?,
            warmup_end_us,
            server,
        };
        let mut results = step_results(&self.ctx, finished, &mut agg);
        results[0].hooks = hook_calls;
        let stop = self.record(results)?;
        after?;
        Ok(stop)
    }

    /// Each member's plan for a step, by member index: the step's load
    /// striped over the members still in the fleet (the same global load
    /// for any count, so a sweep goes on after a worker was lost).
    fn plans(
        &self,
        env: &Env<'_>,
        fleet: &Fleet,
        scenario: &Scenario,
        step_no: u32,
    ) -> Vec<(u32, Plan)> {
        let recipients: Vec<Recipient> = fleet
            .active()
            .map(|(member, m)| {
                // a remote worker reaches the embedded mock where it reached us
                let via = m.local.filter(|_| env.setup.remote).map(|a| a.ip());
                Recipient {
                    member,
                    target: env.target.reached_from(via),
                    workloads: env.target.workloads_reached_from(via),
                }
            })
            .collect();
        let inputs = StepInputs {
            run_id: &self.run_id,
            step: step_no,
            pool: env.pool,
            tokenizer: env.setup.tokenizer.as_ref(),
            steerable: self.steer.is_some(),
        };
        sharding::step_plans(scenario, &inputs, &recipients)
            .into_iter()
            .map(|p| (p.worker_index, p))
            .collect()
    }

    /// Tell the sweep how the step went, hand its results to the outputs,
    /// keep them; true when it was cut short.
    fn record(&mut self, mut results: Vec<RunResult>) -> Result<bool, RunError> {
        // a step stopped early (a signal, a saturated server with `stop`, an
        // abort threshold): the sweep's later (higher) points would be too
        let first = &results[0];
        let stop = first.partial()
            || first.aborted.is_some()
            || first.saturated.as_ref().is_some_and(|s| s.stopped);
        let s = first.summary();
        self.sweeper.finished(Outcome {
            request_throughput: s.request_throughput,
            attainment: if s.sent > 0 {
                results[0].total.counter(Counter::Goodput) as f64 / s.sent as f64
            } else {
                0.0
            },
        });
        if stop {
            results[0].skipped = self.sweeper.remaining();
        }
        self.out.step_finished(
            &StepFinished {
                results: &results,
                earlier: &self.finished,
                earlier_stages: &self.stage_results,
                sweep: self.sweeper.is_sweep(),
                search: self.sweeper.search(),
            },
            &mut Vec::new(),
        )?;
        let whole = results.remove(0);
        self.finished.push(whole);
        self.stage_results.extend(results);
        Ok(stop)
    }

    /// Tell the outputs the run is over; how the run ended.
    fn finish(&mut self) -> RunEnd {
        self.out.run_finished(&RunFinished {
            steps: &self.finished,
            stages: &self.stage_results,
            sweep: self.sweeper.is_sweep(),
            search: self.sweeper.search(),
        });
        if let Some(signal) = self.finished.iter().find_map(|r| r.interrupted) {
            RunEnd::Stopped(signal)
        } else if self.finished.iter().any(|r| r.aborted.is_some()) {
            RunEnd::Aborted
        } else if self.finished.iter().any(RunResult::degraded) {
            RunEnd::Degraded
        } else {
            cicada_results::gates::failed_gate(&self.finished)
                .map_or(RunEnd::Passed, RunEnd::GateFailed)
        }
    }
}

/// A server hook's call on the console, as it ends.
fn show_hook(call: &cicada_results::hooks::HookCall) {
    eprintln!("cicada: server hook {}", call.line());
}

/// When measuring starts, µs after the barrier: the end of the warm-up.
fn warmup_end_us(s: &Scenario, pool: &Pool) -> u64 {
    match s.load.warmup {
        None => 0,
        Some(Warmup::Duration(d)) => d.get().as_micros() as u64,
        Some(Warmup::Requests(n)) => sharding::schedule_of(s, pool)
            .global()
            .nth(n as usize)
            .map_or(0, |slot| slot.offset.as_micros() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_ends_where_measuring_starts() {
        let mut s = Scenario::default();
        s.load.num_prompts = Some(100);
        s.load.request_rate = cicada_plan::units::Rate::Finite(10.0);
        let pool = cicada_scenarios::dataset::build_pool(&s, None).unwrap();
        assert_eq!(warmup_end_us(&s, &pool), 0);
        s.load.warmup = Some(Warmup::Duration(cicada_plan::units::Span::secs(3)));
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
