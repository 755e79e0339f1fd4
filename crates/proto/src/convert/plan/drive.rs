//! How a plan drives load (open or closed loop, its schedule, stages and
//! think time), to and from the wire.

use cicada_plan::schedule::{RateStage, ScheduleSpec};
use cicada_plan::shape::{Ramp, RampStrategy, ThinkTime};
use cicada_plan::units::{Rate, Span};
use cicada_plan::{ClosedLoop, Drive, Stripe, UserStage};

use super::{PlanError, duration, from_span, span};
use crate::v1;

pub(super) fn drive(d: &Drive) -> v1::plan::Drive {
    match d {
        Drive::Open {
            stripe,
            schedule,
            slots,
            fleet_slots,
        } => v1::plan::Drive::Open(v1::OpenLoop {
            stripe: stripe.map(|s| v1::Stripe {
                index: s.index,
                count: s.count,
            }),
            schedule: Some(schedule_to(schedule)),
            slots: *slots,
            fleet_slots: *fleet_slots,
        }),
        Drive::Closed(c) => v1::plan::Drive::Closed(v1::ClosedLoop {
            seed: c.seed,
            stride: c.stride,
            users: c.users.clone(),
            requests: c.requests,
            duration: c.duration.map(span),
            stages: c
                .stages
                .iter()
                .map(|s| v1::UserStage {
                    start: Some(span(s.start)),
                    end: s.end.map(span),
                    users: s.users,
                    spawn_rate: s.spawn_rate,
                })
                .collect(),
            think: Some(think(&c.think)),
            pool_size: c.pool_size,
        }),
    }
}

pub(super) fn drive_from(d: v1::plan::Drive) -> Result<Drive, PlanError> {
    Ok(match d {
        v1::plan::Drive::Open(o) => Drive::Open {
            stripe: o.stripe.map(|s| Stripe {
                index: s.index,
                count: s.count,
            }),
            schedule: schedule_from(o.schedule.ok_or(PlanError::Missing("schedule"))?)?,
            slots: o.slots,
            fleet_slots: o.fleet_slots,
        },
        v1::plan::Drive::Closed(c) => Drive::Closed(ClosedLoop {
            seed: c.seed,
            stride: c.stride,
            users: c.users,
            requests: c.requests,
            duration: c.duration.map(from_span),
            stages: c
                .stages
                .into_iter()
                .map(|s| {
                    Ok(UserStage {
                        start: duration(s.start, "stages.start")?,
                        end: s.end.map(from_span),
                        users: s.users,
                        spawn_rate: s.spawn_rate,
                    })
                })
                .collect::<Result<_, PlanError>>()?,
            think: think_from(c.think.unwrap_or_default())?,
            pool_size: c.pool_size,
            index_base: 0,
        }),
    })
}

fn schedule_to(s: &ScheduleSpec) -> v1::Schedule {
    v1::Schedule {
        seed: s.seed,
        rate: s.rate.per_second(),
        burstiness: s.burstiness,
        requests: s.requests,
        duration: s.duration.map(span),
        pool_size: s.pool_size,
        ramp: s.ramp.map(|r| v1::Ramp {
            exponential: r.strategy == RampStrategy::Exponential,
            start_rps: r.start_rps,
            end_rps: r.end_rps,
        }),
        stages: s
            .stages
            .iter()
            .map(|r| v1::RateStage {
                end: Some(span(r.end)),
                rate: r.rate,
                burstiness: r.burstiness,
            })
            .collect(),
        arrivals: s
            .arrivals_us
            .as_ref()
            .map(|us| v1::Arrivals { us: us.clone() }),
    }
}

fn schedule_from(s: v1::Schedule) -> Result<ScheduleSpec, PlanError> {
    Ok(ScheduleSpec {
        seed: s.seed,
        rate: s.rate.map_or(Rate::Infinite, Rate::Finite),
        burstiness: s.burstiness,
        requests: s.requests,
        duration: s.duration.map(from_span),
        pool_size: s.pool_size,
        ramp: s.ramp.map(|r| Ramp {
            strategy: if r.exponential {
                RampStrategy::Exponential
            } else {
                RampStrategy::Linear
            },
            start_rps: r.start_rps,
            end_rps: r.end_rps,
        }),
        stages: s
            .stages
            .into_iter()
            .map(|r| {
                Ok(RateStage {
                    end: duration(r.end, "schedule.stages.end")?,
                    rate: r.rate,
                    burstiness: r.burstiness,
                })
            })
            .collect::<Result<_, PlanError>>()?,
        arrivals_us: s.arrivals.map(|a| a.us),
    })
}

fn think(t: &ThinkTime) -> v1::ThinkTime {
    use v1::think_time::Kind;
    v1::ThinkTime {
        kind: match t {
            ThinkTime::None => None,
            ThinkTime::Constant(d) => Some(Kind::Constant(span(d.get()))),
            ThinkTime::Uniform(lo, hi) => Some(Kind::Uniform(v1::UniformThink {
                low: Some(span(lo.get())),
                high: Some(span(hi.get())),
            })),
            ThinkTime::Exponential(d) => Some(Kind::Exponential(span(d.get()))),
        },
    }
}

fn think_from(t: v1::ThinkTime) -> Result<ThinkTime, PlanError> {
    use v1::think_time::Kind;
    Ok(match t.kind {
        None => ThinkTime::None,
        Some(Kind::Constant(d)) => ThinkTime::Constant(Span(from_span(d))),
        Some(Kind::Uniform(u)) => ThinkTime::Uniform(
            Span(duration(u.low, "think.uniform.low")?),
            Span(duration(u.high, "think.uniform.high")?),
        ),
        Some(Kind::Exponential(d)) => ThinkTime::Exponential(Span(from_span(d))),
    })
}
