//! `--web-wait`: the fleet has joined and waits, idle, until the web UI's
//! start form (`POST /swarm`) says what to run. The form's fields become
//! overrides after the command line's own `--set`s; the scenario they give
//! is checked, its request pool built and its target resolved before the
//! form is told the run started (or why it did not).

use cicada_probe::{self as target, Target};
use cicada_scenarios::Setting;
use cicada_scenarios::dataset::Pool;

use super::setup::{self, Setup};
use crate::cli::RunArgs;
use crate::error::{FleetError, RunError};
use crate::fleet::{Event, Fleet};
use crate::signals::Signals;
use cicada_web::{Refusal, RunState, Web};

/// Wait for a start form that describes a runnable scenario; the run's
/// pool and target for it. The fleet is read meanwhile (its heartbeats; a
/// worker that leaves is let go).
pub(super) async fn wait(
    args: &RunArgs,
    setup: &mut Setup,
    web: &mut Web,
    fleet: &mut Fleet,
    signals: &mut Signals,
) -> Result<(Pool, Target), RunError> {
    eprintln!("cicada: idle with the fleet attached; start the run from the page or POST /swarm");
    loop {
        tokio::select! {
            ask = web.next_swarm() => {
                let Some(ask) = ask else {
                    return Err(RunError::WebStopped);
                };
                match reload(args, setup, &ask.settings).await {
                    Ok(ready) => {
                        let feed = web.feed();
                        feed.set_scenario(setup.scenario.clone());
                        feed.set_state(RunState::Running);
                        ask.answer(Ok(()));
                        return Ok(ready);
                    }
                    Err(e) => ask.answer(Err(Refusal(e.to_string()))),
                }
            }
            ev = fleet.next() => match ev {
                None => return Err(FleetError::ServerStopped.into()),
                Some(Event::Left { worker, reason }) => {
                    eprintln!("cicada: worker {worker} left while idle: {reason}");
                    fleet.let_go(worker);
                }
                Some(_) => {}
            },
            signal = signals.next() => return Err(RunError::Interrupted {
                signal,
                message: format!("{signal} while waiting for the start form: no request was sent; no results to write"),
            }),
        }
    }
}

/// The scenario with the form's overrides, its pool and its target.
async fn reload(
    args: &RunArgs,
    setup: &mut Setup,
    settings: &[Setting],
) -> Result<(Pool, Target), RunError> {
    let loaded = crate::cli::scenario::of_run_with(args, settings)?;
    let mut scenario = loaded.scenario;
    if let Some(dir) = &args.output_dir {
        scenario.output.dir = dir.clone();
    }
    setup::check_streams_per_worker(&scenario, setup.workers)?;
    let pool = crate::pool::build(&scenario, setup.tokenizer.as_ref(), args.quiet).await?;
    let target = target::resolve(&scenario, setup.mock_ip(), pool.entries.first()).await?;
    setup.scenario = scenario;
    Ok((pool, target))
}
