//! A scenario's run split over workers, one plan each, so that the server
//! sees the same load for any worker count: the scenario's schedule,
//! sampling, windows and users, striped by the plan crate's arithmetic
//! (`cicada_plan::sharding`).
//!
//! Open loop: request `i` goes to worker `i mod N` (striping); concurrency
//! slots split as evenly as integers allow. Closed loop: user `u` lives on
//! worker `u mod N`. Each worker receives only the pool entries it will use.

use std::time::Duration;

use cicada_plan::pool::PoolEntry;
use cicada_plan::schedule::{RateStage, ScheduleSpec};
use cicada_plan::sharding::{active_workers, slots_for, stripe_entries, stripe_uses};
use cicada_plan::units::Rate;
use cicada_plan::{
    ClosedLoop, ConversationSettings, Drive, Plan, ResolvedSampling, ResolvedTarget, StageWindow,
    Stripe, UserStage, WorkloadPart,
};

use crate::dataset::Pool;
use crate::scenario::{DEFAULT_NUM_PROMPTS, Dataset};

/// Sampling with the scenario's defaults applied: `ignore_eos` is on for the
/// synthetic workloads (random, as in `vllm bench serve`; prefix; trace), whose
/// output lengths are a specification rather than a natural answer, where the
/// backend's servers understand it; asked for explicitly, it is always sent.
pub fn resolve_sampling(s: &crate::Scenario) -> ResolvedSampling {
    let sm = &s.sampling;
    ResolvedSampling {
        temperature: sm.temperature,
        top_p: sm.top_p,
        top_k: sm.top_k,
        ignore_eos: sm
            .ignore_eos
            .unwrap_or(s.dataset.kind().synthetic() && s.target.backend.ignore_eos_by_default()),
        min_tokens: sm.min_tokens,
        extra_body: pooling_fields(s).chain(sm.extra_body.clone()).collect(),
    }
}

/// `[pooling]`'s request fields for a pooling backend (`sampling.extra_body`
/// overrides them).
fn pooling_fields(s: &crate::Scenario) -> impl Iterator<Item = (String, serde_json::Value)> {
    let p = &s.pooling;
    let pools = s.target.backend.pools(s.mock.api);
    let format = p.encoding_format.clone().map(serde_json::Value::String);
    let dimensions = p.dimensions.map(serde_json::Value::from);
    [("encoding_format", format), ("dimensions", dimensions)]
        .into_iter()
        .filter_map(move |(k, v)| Some((k.to_string(), v.filter(|_| pools)?)))
}

/// Windows of the scenario's `[[stages]]` (empty without stages).
pub fn stage_windows(s: &crate::Scenario) -> Vec<StageWindow> {
    let mut start = Duration::ZERO;
    s.stages
        .iter()
        .enumerate()
        .map(|(i, st)| {
            let end = start + st.duration.get();
            let w = StageWindow {
                name: st
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("stage-{}", i + 1)),
                start,
                end,
            };
            start = end;
            w
        })
        .collect()
}

fn total_requests(s: &crate::Scenario) -> Option<u64> {
    match (s.load.num_prompts, s.load.duration, s.stages.is_empty()) {
        (Some(n), _, _) => Some(n),
        (None, None, true) => Some(DEFAULT_NUM_PROMPTS),
        _ => None,
    }
}

fn run_duration(s: &crate::Scenario) -> Option<Duration> {
    stage_windows(s)
        .last()
        .map(|w| w.end)
        .or(s.load.duration.map(|d| d.get()))
}

/// Whether the scenario is a closed loop (users) rather than an open one (rates).
pub fn is_closed_loop(s: &crate::Scenario) -> bool {
    s.load.users.is_some() || s.stages.iter().any(|st| st.users.is_some())
}

/// Whether the load intends a send time for each request: a finite rate, a
/// ramp, rate stages, a trace's timestamps, or closed-loop users (previous
/// end plus think time). An open loop at `request_rate = "inf"` does not:
/// every request is due at the barrier, so a send later than that is
/// waiting for a concurrency slot, not a missed schedule.
pub fn has_intended_send_times(s: &crate::Scenario) -> bool {
    is_closed_loop(s)
        || s.load.request_rate.per_second().is_some()
        || s.load.ramp.is_some()
        || !s.stages.is_empty()
        || matches!(s.dataset, Dataset::Trace(_))
}

/// The global open-loop schedule of a scenario's run over `pool`: the seeded
/// arrival process, or the pool's own send times when it is a replayed trace.
pub fn schedule_of(s: &crate::Scenario, pool: &Pool) -> ScheduleSpec {
    let stages = stage_windows(s)
        .iter()
        .zip(&s.stages)
        .filter_map(|(w, st)| {
            st.request_rate
                .and_then(Rate::per_second)
                .map(|rate| RateStage {
                    end: w.end,
                    rate,
                    burstiness: st.burstiness.unwrap_or(s.load.burstiness),
                })
        })
        .collect();
    ScheduleSpec {
        seed: s.seed,
        rate: s.load.request_rate,
        burstiness: s.load.burstiness,
        requests: match &pool.arrivals_us {
            Some(a) => Some(a.len() as u64),
            None => total_requests(s),
        },
        duration: run_duration(s),
        pool_size: pool.entries.len() as u64,
        ramp: s.load.ramp,
        stages,
        arrivals_us: pool.arrivals_us.clone(),
    }
}

fn closed_loop_of(s: &crate::Scenario, pool_size: u64, worker: u32, workers: u32) -> ClosedLoop {
    let windows = stage_windows(s);
    let stages: Vec<UserStage> = if windows.is_empty() {
        vec![UserStage {
            start: Duration::ZERO,
            end: None,
            users: s.load.users.unwrap_or(1),
            spawn_rate: s.load.spawn_rate,
        }]
    } else {
        windows
            .iter()
            .zip(&s.stages)
            .map(|(w, st)| UserStage {
                start: w.start,
                end: Some(w.end),
                users: st.users.unwrap_or(0),
                spawn_rate: st.spawn_rate.or(s.load.spawn_rate),
            })
            .collect()
    };
    let stride = stages.iter().map(|p| p.users).max().unwrap_or(1).max(1);
    ClosedLoop {
        seed: s.seed,
        stride,
        users: (0..stride)
            .filter(|u| u % workers.max(1) == worker)
            .collect(),
        requests: total_requests(s),
        duration: run_duration(s),
        stages,
        think: s.load.think_time,
        pool_size,
        index_base: 0,
    }
}

/// Who one plan of a step is for.
#[derive(Debug, Clone)]
pub struct Recipient {
    /// The fleet member's index, which its records carry (`Plan::worker_index`).
    pub member: u32,
    /// The target as this member reaches it (a remote worker reaches the
    /// embedded mock at another address than a local one).
    pub target: ResolvedTarget,
    /// Each workload's target as this member reaches it, in `[[workloads]]`
    /// order (empty without workloads).
    pub workloads: Vec<ResolvedTarget>,
}

/// What every plan of a step shares besides the scenario.
#[derive(Debug, Clone, Copy)]
pub struct StepInputs<'a> {
    pub run_id: &'a str,
    /// The step (0 without a sweep, else from 1).
    pub step: u32,
    pub pool: &'a Pool,
    /// Shipped to workers that count or verify output tokens.
    pub tokenizer: Option<&'a crate::tokenizer::Tokenizer>,
    /// The load may change while it runs (the web UI): a time-bound closed
    /// loop's workers then get the whole pool, as a change's users use
    /// entries the plan's users did not.
    pub steerable: bool,
}

/// One plan per recipient for a step of the run, each complete as it is
/// sent: the `k`-th recipient gets stripe `k` of `recipients.len()` (the
/// same global load for any count), named by its member index.
pub fn step_plans(
    s: &crate::Scenario,
    step: &StepInputs<'_>,
    recipients: &[Recipient],
) -> Vec<Plan> {
    let workers = u32::try_from(recipients.len()).unwrap_or(u32::MAX).max(1);
    let pool = step.pool;
    let schedule = schedule_of(s, pool);
    let sampling = resolve_sampling(s);
    // a mix's sessions are its workloads' (`WorkloadPart::sessions`)
    let conversations = if s.workloads.is_empty() {
        conversation_settings(s)
    } else {
        None
    };
    let whole_pool = step.steerable && conversations.is_none();
    (0..workers)
        .zip(recipients)
        .map(|(w, to)| {
            let (drive, mut mine) = if is_closed_loop(s) {
                closed_drive(s, pool, w, workers, whole_pool)
            } else {
                open_drive(s, pool, &schedule, w, workers)
            };
            if !pool.workloads.is_empty() && !mine.is_empty() {
                // which entries a stripe uses depends on each request's
                // drawn workload: every sending worker gets them all
                mine = pool.entries.clone();
            }
            Plan {
                run_id: step.run_id.to_string(),
                step: step.step,
                worker_index: to.member,
                worker_count: workers,
                target: to.target.clone(),
                sampling: sampling.clone(),
                slo: s.slo,
                drive,
                stages: stage_windows(s),
                warmup: s.load.warmup,
                cooldown: s.load.cooldown,
                pool: mine,
                shapes: pool.shapes.clone(),
                report_interval_ms: s.load.report_interval.get().as_millis() as u64,
                tokenizer: step.tokenizer.map(|t| t.json().to_string()),
                verify_every: s.tokenizer.as_ref().map_or(0, |t| t.verify_every),
                conversations: conversations.clone(),
                details: s.output.save_detailed,
                workloads: workload_parts(s, pool, &to.workloads),
            }
        })
        .collect()
}

/// Each workload's resolved part (empty without `[[workloads]]`): its
/// target as `targets` has it, its sampling and SLO, its run of pool ids.
fn workload_parts(
    s: &crate::Scenario,
    pool: &Pool,
    targets: &[ResolvedTarget],
) -> Vec<WorkloadPart> {
    s.workloads
        .iter()
        .zip(s.workload_scenarios())
        .zip(targets.iter().zip(&pool.workloads))
        .map(|((w, own), (target, ids))| WorkloadPart {
            name: w.name.clone(),
            weight: w.weight,
            target: target.clone(),
            sampling: resolve_sampling(&own),
            slo: own.slo,
            pool_start: ids.start,
            pool_len: ids.end - ids.start,
            sessions: conversation_settings(&own).map(|c| ConversationSettings {
                // in a mix the fleet cap admits arrivals: a session holds
                // its one slot from its first turn to its end
                session_slots: true,
                ..c
            }),
        })
        .collect()
}

/// How workers run a multi-turn workload's sessions (`None` for the others).
fn conversation_settings(s: &crate::Scenario) -> Option<ConversationSettings> {
    let (think, session_slots) = match &s.dataset {
        Dataset::Conversations(c) => (c.think_time, false),
        // the concurrency unit of synthetic sessions is the session
        Dataset::MultiTurn(m) => (m.think_time, true),
        Dataset::Agentic(m) => (m.think_time, true),
        Dataset::AgentTrace(t) => (t.think_time, true),
        _ => return None,
    };
    Some(ConversationSettings {
        think_time_ms: think.get().as_millis() as u64,
        session_slots,
        session_header: s.target.session_header.clone(),
        spread_turns: !s.target.sticky_sessions,
    })
}

/// One plan per worker `0..workers`, every one reaching `target` alike.
pub fn plans_for(
    s: &crate::Scenario,
    target: &ResolvedTarget,
    pool: &Pool,
    tokenizer: Option<&crate::tokenizer::Tokenizer>,
    run_id: &str,
    step: u32,
    workers: u32,
) -> Vec<Plan> {
    let recipients: Vec<Recipient> = (0..workers.max(1))
        .map(|member| Recipient {
            member,
            target: target.clone(),
            workloads: vec![target.clone(); s.workloads.len()],
        })
        .collect();
    let inputs = StepInputs {
        run_id,
        step,
        pool,
        tokenizer,
        steerable: false,
    };
    step_plans(s, &inputs, &recipients)
}

/// Worker `w` of `workers`'s users, and the pool entries they use (all of
/// them with `whole_pool`, when the run is time-bound).
fn closed_drive(
    s: &crate::Scenario,
    pool: &Pool,
    w: u32,
    workers: u32,
    whole_pool: bool,
) -> (Drive, Vec<PoolEntry>) {
    let pool_size = pool.entries.len() as u64;
    let cl = closed_loop_of(s, pool_size, w, workers);
    let mine = if whole_pool && cl.requests.is_none() {
        pool.entries.clone()
    } else {
        let stride = cl.stride;
        pool.entries
            .iter()
            .filter(|e| {
                cl.users
                    .iter()
                    .any(|u| stripe_uses(e.id, *u, stride, pool_size))
            })
            .cloned()
            .collect()
    };
    (Drive::Closed(cl), mine)
}

/// Worker `w` of `workers`'s stripe of `schedule` (none past the workers
/// `max_concurrency` leaves a slot), its slots, and the pool entries it uses.
fn open_drive(
    s: &crate::Scenario,
    pool: &Pool,
    schedule: &ScheduleSpec,
    w: u32,
    workers: u32,
) -> (Drive, Vec<PoolEntry>) {
    let active = active_workers(workers, s.load.max_concurrency);
    let stripe = (w < active).then_some(Stripe {
        index: w,
        count: active,
    });
    let mine = match stripe {
        Some(st) => {
            let pool_size = pool.entries.len() as u64;
            let ids = stripe_entries(st.index, st.count, schedule.requests, pool_size);
            pool.entries
                .iter()
                .filter(|e| ids.contains(&e.id))
                .cloned()
                .collect()
        }
        None => Vec::new(),
    };
    let slots = match (stripe, s.load.max_concurrency) {
        (Some(st), Some(c)) => Some(slots_for(c, st.index, st.count)),
        (None, _) => Some(0),
        (Some(_), None) => None,
    };
    let drive = Drive::Open {
        stripe,
        schedule: schedule.clone(),
        slots,
        fleet_slots: stripe.and(s.load.max_concurrency),
    };
    (drive, mine)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::dataset::build_pool;
    use crate::shape::StageSpec;
    use cicada_plan::units::Span;
    use cicada_plan::{Routing, ServerFamily, TlsSettings, WireApi};

    fn target() -> ResolvedTarget {
        ResolvedTarget {
            api: WireApi::Chat,
            family: ServerFamily::Mock,
            urls: vec!["http://x/v1/chat/completions".into()],
            model: "m".into(),
            models: Vec::new(),
            model_assignment: Default::default(),
            headers: BTreeMap::new(),
            api_key_env: None,
            timeout_ms: 1000,
            stream: true,
            routing: Routing::default(),
            tls: TlsSettings::default(),
            keep_alive: true,
            http: cicada_plan::HttpVersion::Auto,
            addresses: cicada_plan::AddressChoice::First,
            proxy: cicada_plan::ProxySetting::Env,
            no_proxy: Vec::new(),
            max_event_bytes: 16 << 20,
        }
    }

    #[test]
    fn an_explicit_pool_size_caps_a_count_bound_pool_which_then_cycles() {
        let mut s = crate::Scenario::default();
        s.load.num_prompts = Some(10_000);
        s.load.pool_size = Some(25);
        s.dataset = Dataset::Random(crate::scenario::RandomSpec {
            input_len: 4.into(),
            ..Default::default()
        });
        let pool = build_pool(&s, None).unwrap();
        assert_eq!(pool.entries.len(), 25);
        let plans = plans_for(&s, &target(), &pool, None, "r", 0, 3);
        let total: u64 = plans.iter().map(Plan::planned_requests).sum();
        assert_eq!(total, 10_000);
        let Drive::Open { schedule, .. } = &plans[0].drive else {
            panic!("open loop")
        };
        assert_eq!(schedule.global().nth(9_999).unwrap().pool_id, 9_999 % 25);
    }

    #[test]
    fn open_loop_plans_cover_every_request_once_with_the_entries_they_need() {
        let mut s = crate::Scenario::default();
        s.load.num_prompts = Some(50);
        s.load.max_concurrency = Some(6);
        s.dataset = Dataset::Random(crate::scenario::RandomSpec {
            input_len: 8.into(),
            ..Default::default()
        });
        let pool = build_pool(&s, None).unwrap();
        for workers in [1u32, 4, 8] {
            let plans = plans_for(&s, &target(), &pool, None, "r", 0, workers);
            assert_eq!(plans.len(), workers as usize);
            let mut seen = Vec::new();
            let mut slots = 0;
            for p in &plans {
                let Drive::Open {
                    stripe,
                    schedule,
                    slots: my_slots,
                    fleet_slots,
                } = &p.drive
                else {
                    panic!("open loop")
                };
                slots += my_slots.unwrap();
                // the whole cap, shared by every worker that sends
                assert_eq!(*fleet_slots, stripe.and(Some(6)));
                if let Some(st) = stripe {
                    for slot in schedule.stripe(st.index, st.count) {
                        assert!(p.pool.iter().any(|e| e.id == slot.pool_id));
                        seen.push(slot.index);
                    }
                }
                let mine = stripe.map_or(0, |st| schedule.stripe(st.index, st.count).count());
                assert_eq!(p.planned_requests() as usize, mine);
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..50).collect::<Vec<u64>>(), "workers={workers}");
            assert_eq!(slots, 6);
        }
    }

    #[test]
    fn closed_loop_users_split_over_workers_and_stages_become_windows() {
        let mut s = crate::Scenario::default();
        s.load.users = Some(5);
        s.load.num_prompts = Some(23);
        s.load.burstiness = f64::INFINITY;
        s.load.think_time =
            cicada_plan::shape::ThinkTime::Uniform(Span::millis(5), Span::millis(9));
        s.load.warmup = Some(cicada_plan::shape::Warmup::Duration(Span::secs(1)));
        s.dataset = Dataset::Random(crate::scenario::RandomSpec {
            input_len: 4.into(),
            ..Default::default()
        });
        let pool = build_pool(&s, None).unwrap();
        for workers in [1u32, 2, 3] {
            let plans = plans_for(&s, &target(), &pool, None, "r", 0, workers);
            let mut users = Vec::new();
            let mut planned = 0;
            for p in &plans {
                let Drive::Closed(c) = &p.drive else {
                    panic!("closed loop")
                };
                users.extend(c.users.iter().copied());
                planned += p.planned_requests();
                for u in &c.users {
                    for k in 0..5 {
                        let i = c.index(*u, k);
                        if i < 23 {
                            assert!(p.pool.iter().any(|e| e.id == i % 23));
                        }
                    }
                }
            }
            users.sort_unstable();
            assert_eq!(users, vec![0, 1, 2, 3, 4]);
            assert_eq!(planned, 23);
        }
        let st = crate::Scenario {
            stages: vec![
                StageSpec {
                    name: None,
                    duration: Span::secs(5),
                    request_rate: None,
                    burstiness: None,
                    users: Some(2),
                    spawn_rate: None,
                },
                StageSpec {
                    name: Some("peak".into()),
                    duration: Span::secs(5),
                    request_rate: None,
                    burstiness: None,
                    users: Some(8),
                    spawn_rate: Some(4.0),
                },
            ],
            ..crate::Scenario::default()
        };
        let p = &plans_for(&st, &target(), &pool, None, "r", 0, 2)[1];
        assert_eq!(p.stages[1].name, "peak");
        assert_eq!(p.stage_of(Duration::from_secs(7)), 1);
        let Drive::Closed(c) = &p.drive else {
            panic!("closed loop")
        };
        assert_eq!(c.stride, 8);
        assert_eq!(c.users, vec![1, 3, 5, 7]);
        assert_eq!(c.duration, Some(Duration::from_secs(10)));
    }

    #[test]
    fn only_an_open_loop_at_infinite_rate_has_no_intended_send_times() {
        let mut s = crate::Scenario::default();
        s.load.max_concurrency = Some(4);
        assert!(!has_intended_send_times(&s), "inf rate, capped");
        s.load.request_rate = Rate::Finite(5.0);
        assert!(has_intended_send_times(&s), "a rate");
        let users = crate::Scenario {
            load: crate::scenario::Load {
                users: Some(2),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(has_intended_send_times(&users), "closed loop");
        let trace = crate::Scenario {
            dataset: Dataset::Trace(crate::scenario::TraceSpec {
                path: "t.jsonl".into(),
                speed: 1.0,
                block_size: 512,
            }),
            ..Default::default()
        };
        assert!(has_intended_send_times(&trace), "a trace's timestamps");
    }

    #[test]
    fn a_steps_plans_are_whole_for_the_members_they_go_to() {
        let mut s = crate::Scenario::default();
        s.load.users = Some(4);
        s.load.duration = Some(Span::secs(30));
        s.load.pool_size = Some(40);
        s.dataset = Dataset::Random(crate::scenario::RandomSpec {
            input_len: 4.into(),
            ..Default::default()
        });
        let pool = build_pool(&s, None).unwrap();
        let far = ResolvedTarget {
            urls: vec!["http://10.0.0.7:9/v1/chat/completions".into()],
            ..target()
        };
        let recipients = [
            Recipient {
                member: 2,
                target: target(),
                workloads: Vec::new(),
            },
            Recipient {
                member: 5,
                target: far.clone(),
                workloads: Vec::new(),
            },
        ];
        let mut inputs = StepInputs {
            run_id: "r",
            step: 3,
            pool: &pool,
            tokenizer: None,
            steerable: false,
        };
        let plans = step_plans(&s, &inputs, &recipients);
        let named: Vec<_> = plans
            .iter()
            .map(|p| (p.worker_index, p.worker_count, p.step))
            .collect();
        assert_eq!(named, [(2, 2, 3), (5, 2, 3)]);
        assert_eq!(plans[1].target, far);
        let Drive::Closed(c) = &plans[1].drive else {
            panic!("closed loop")
        };
        assert_eq!(c.users, [1, 3], "the second recipient has the second share");
        assert!(plans.iter().all(|p| p.pool.len() < 40));
        // the web UI may change the users: every worker gets the whole pool
        inputs.steerable = true;
        let plans = step_plans(&s, &inputs, &recipients);
        assert!(plans.iter().all(|p| p.pool == pool.entries));
        assert!(step_plans(&s, &inputs, &[]).is_empty());
    }
}
