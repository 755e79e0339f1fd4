//! Sweeps: run the scenario several times with one load key varied.
//!
//! `list` runs one step per listed value. `auto` follows GuideLLM: a
//! synchronous step (one request at a time), a max-throughput step (every
//! request at once), then evenly spaced constant rates between the two
//! measured rates. `slo` searches for capacity: the highest request rate whose
//! requests meet every `[slo]` bound for at least `fraction` of them, by
//! bisection down to `resolution` req/s.

use cicada_plan::units::Rate;
use cicada_scenarios::Scenario;
use cicada_scenarios::shape::{Sweep, SweepMode, auto_rates};

pub use cicada_results::stages::Search;

/// One discrete step to run.
#[derive(Debug, Clone)]
pub struct Step {
    /// Label in results ("max_concurrency=4", "rate=12.5", "synchronous", ...).
    pub name: String,
    /// The scenario with this step's load applied.
    pub scenario: Scenario,
}

/// What a finished step tells the sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Successful requests per second.
    pub request_throughput: f64,
    /// Share of sent requests that succeeded and met every SLO.
    pub attainment: f64,
}

/// Produces the steps of a run one at a time.
#[derive(Debug)]
pub struct Sweeper {
    base: Scenario,
    sweep: Option<Sweep>,
    done: Vec<Outcome>,
    /// Rates chosen by `auto` after its first two steps.
    auto_rates: Vec<f64>,
    search: Option<Search>,
    /// Rate of the SLO probe in flight.
    probing: Option<f64>,
    /// Upper end of the SLO search range once known.
    top: Option<f64>,
    emitted: usize,
}

fn with_rate(base: &Scenario, rate: Rate) -> Scenario {
    let mut s = base.clone();
    s.load.request_rate = rate;
    s.sweep = None;
    s
}

fn rate_name(r: f64) -> String {
    format!("rate={}", (r * 1000.0).round() / 1000.0)
}

impl Sweeper {
    /// A sweeper for the scenario (a single step when it has no `[sweep]`).
    pub fn new(base: &Scenario) -> Self {
        let mut plain = base.clone();
        plain.sweep = None;
        Self {
            sweep: base.sweep.clone(),
            base: plain,
            done: Vec::new(),
            auto_rates: Vec::new(),
            search: None,
            probing: None,
            top: None,
            emitted: 0,
        }
    }

    /// Whether this is a sweep of several steps.
    pub fn is_sweep(&self) -> bool {
        self.sweep.is_some()
    }

    /// The SLO search result so far (for `mode = "slo"`).
    pub fn search(&self) -> Option<Search> {
        self.search
    }

    /// Record how the last step went.
    pub fn finished(&mut self, outcome: Outcome) {
        self.done.push(outcome);
        let Some(sw) = &self.sweep else { return };
        match sw.mode {
            SweepMode::Auto if self.done.len() == 2 => {
                let (sync, thr) = (
                    self.done[0].request_throughput,
                    self.done[1].request_throughput,
                );
                self.auto_rates = auto_rates(
                    sync,
                    thr.max(sync),
                    sw.points.unwrap_or(Sweep::DEFAULT_POINTS),
                );
            }
            SweepMode::Slo => {
                let fraction = sw.fraction.unwrap_or(Sweep::DEFAULT_FRACTION);
                let search = self.search.get_or_insert(Search {
                    passed: None,
                    failed: None,
                    resolution: sw.resolution.unwrap_or(1.0),
                    fraction,
                });
                let met = outcome.attainment >= fraction;
                match self.probing.take() {
                    Some(rate) if met => {
                        search.passed = Some(search.passed.map_or(rate, |p| p.max(rate)))
                    }
                    Some(rate) => search.failed = Some(search.failed.map_or(rate, |f| f.min(rate))),
                    None => {
                        // the max-throughput step: its rate bounds the search
                        self.top = Some(outcome.request_throughput);
                        if met {
                            search.passed = Some(outcome.request_throughput);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The names of the steps not run yet, as far as they are known, for a
    /// sweep stopped early (empty without a sweep).
    pub fn remaining(&self) -> Vec<String> {
        let Some(sw) = &self.sweep else {
            return Vec::new();
        };
        let i = self.emitted;
        match sw.mode {
            // exactly one list is set (validated)
            SweepMode::List => sw
                .max_concurrency
                .iter()
                .map(|c| format!("max_concurrency={c}"))
                .chain(sw.request_rate.iter().map(|r| format!("rate={r}")))
                .chain(sw.users.iter().map(|u| format!("users={u}")))
                .skip(i)
                .collect(),
            SweepMode::Auto if i < 2 => ["synchronous", "throughput"][i..]
                .iter()
                .map(|n| n.to_string())
                .chain(std::iter::once(format!(
                    "{} rates between them",
                    sw.points.unwrap_or(Sweep::DEFAULT_POINTS)
                )))
                .collect(),
            SweepMode::Auto => self
                .auto_rates
                .iter()
                .skip(i - 2)
                .map(|r| rate_name(*r))
                .collect(),
            SweepMode::Slo => vec!["the rest of the SLO search".to_string()],
        }
    }

    /// The next step to run, or None when the run is complete.
    pub fn next_step(&mut self) -> Option<Step> {
        let step = self.choose();
        if step.is_some() {
            self.emitted += 1;
        }
        step
    }

    fn choose(&mut self) -> Option<Step> {
        let Some(sw) = self.sweep.clone() else {
            return (self.emitted == 0).then(|| Step {
                name: String::new(),
                scenario: self.base.clone(),
            });
        };
        let i = self.emitted;
        match sw.mode {
            SweepMode::List => {
                if let Some(c) = sw.max_concurrency.get(i) {
                    let mut s = self.base.clone();
                    s.load.max_concurrency = Some(*c);
                    return Some(Step {
                        name: format!("max_concurrency={c}"),
                        scenario: s,
                    });
                }
                if let Some(r) = sw.request_rate.get(i) {
                    return Some(Step {
                        name: format!("rate={r}"),
                        scenario: with_rate(&self.base, *r),
                    });
                }
                let u = sw.users.get(i)?;
                let mut s = self.base.clone();
                s.load.users = Some(*u);
                Some(Step {
                    name: format!("users={u}"),
                    scenario: s,
                })
            }
            SweepMode::Auto => match i {
                0 => {
                    let mut s = with_rate(&self.base, Rate::Infinite);
                    s.load.max_concurrency = Some(1);
                    Some(Step {
                        name: "synchronous".into(),
                        scenario: s,
                    })
                }
                1 => Some(Step {
                    name: "throughput".into(),
                    scenario: with_rate(&self.base, Rate::Infinite),
                }),
                _ => {
                    let r = *self.auto_rates.get(i - 2)?;
                    Some(Step {
                        name: rate_name(r),
                        scenario: with_rate(&self.base, Rate::Finite(r)),
                    })
                }
            },
            SweepMode::Slo => self.next_probe(&sw),
        }
    }

    fn next_probe(&mut self, sw: &Sweep) -> Option<Step> {
        if self.top.is_none() {
            if let Some(max) = sw.max_rate {
                self.top = Some(max);
                self.search.get_or_insert(Search {
                    passed: None,
                    failed: None,
                    resolution: sw.resolution.unwrap_or(1.0),
                    fraction: sw.fraction.unwrap_or(Sweep::DEFAULT_FRACTION),
                });
            } else {
                return Some(Step {
                    name: "throughput".into(),
                    scenario: with_rate(&self.base, Rate::Infinite),
                });
            }
        }
        let search = self.search?;
        let top = self.top?;
        let lo = search.passed.unwrap_or(sw.min_rate.unwrap_or(0.0));
        // with max_rate given, the top itself is probed first
        let hi = match search.failed {
            Some(f) => f,
            None if sw.max_rate.is_some() && self.done.is_empty() => {
                self.probing = Some(top);
                return Some(Step {
                    name: rate_name(top),
                    scenario: with_rate(&self.base, Rate::Finite(top)),
                });
            }
            None => top,
        };
        if search.passed.is_some() && search.failed.is_none() {
            // the top of the range met the SLO: nothing above it to find
            return None;
        }
        if hi - lo <= search.resolution {
            return None;
        }
        let mid = (lo + hi) / 2.0;
        if mid <= 0.0 {
            return None;
        }
        self.probing = Some(mid);
        Some(Step {
            name: rate_name(mid),
            scenario: with_rate(&self.base, Rate::Finite(mid)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(sweep: Sweep) -> Scenario {
        Scenario {
            sweep: Some(sweep),
            ..Scenario::default()
        }
    }

    #[test]
    fn list_sweeps_one_stage_per_value() {
        let mut sw = Sweeper::new(&base(Sweep {
            max_concurrency: vec![1, 4, 16],
            ..Sweep::default()
        }));
        let mut names = Vec::new();
        while let Some(step) = sw.next_step() {
            assert!(step.scenario.sweep.is_none());
            names.push((step.name, step.scenario.load.max_concurrency));
            sw.finished(Outcome {
                request_throughput: 1.0,
                attainment: 1.0,
            });
        }
        assert_eq!(
            names,
            vec![
                ("max_concurrency=1".to_string(), Some(1)),
                ("max_concurrency=4".to_string(), Some(4)),
                ("max_concurrency=16".to_string(), Some(16))
            ]
        );
    }

    #[test]
    fn a_stopped_sweep_names_the_points_it_skips() {
        let mut sw = Sweeper::new(&base(Sweep {
            request_rate: vec![Rate::Finite(5.0), Rate::Finite(10.0), Rate::Infinite],
            ..Sweep::default()
        }));
        assert_eq!(sw.remaining(), ["rate=5", "rate=10", "rate=inf"]);
        sw.next_step();
        assert_eq!(sw.remaining(), ["rate=10", "rate=inf"]);
        sw.next_step();
        sw.next_step();
        assert!(sw.remaining().is_empty());
        assert!(Sweeper::new(&Scenario::default()).remaining().is_empty());
    }

    #[test]
    fn auto_sweep_is_sync_throughput_then_evenly_spaced_rates() {
        let mut sw = Sweeper::new(&base(Sweep {
            mode: SweepMode::Auto,
            points: Some(5),
            ..Sweep::default()
        }));
        let first = sw.next_step().unwrap();
        assert_eq!(first.scenario.load.max_concurrency, Some(1));
        sw.finished(Outcome {
            request_throughput: 2.0,
            attainment: 1.0,
        });
        let second = sw.next_step().unwrap();
        assert_eq!(second.scenario.load.request_rate, Rate::Infinite);
        sw.finished(Outcome {
            request_throughput: 8.0,
            attainment: 1.0,
        });
        let mut rates = Vec::new();
        while let Some(step) = sw.next_step() {
            rates.push(step.scenario.load.request_rate.per_second().unwrap());
            sw.finished(Outcome {
                request_throughput: 1.0,
                attainment: 1.0,
            });
        }
        assert_eq!(rates, vec![4.0, 6.0, 8.0]);
    }

    /// A fake server whose SLO holds up to 37.3 req/s: bisection lands within the resolution.
    #[test]
    fn slo_search_bisects_to_the_knee() {
        let knee = 37.3;
        let mut sw = Sweeper::new(&base(Sweep {
            mode: SweepMode::Slo,
            resolution: Some(0.5),
            ..Sweep::default()
        }));
        let mut probes = 0;
        while let Some(step) = sw.next_step() {
            probes += 1;
            let outcome = match step.scenario.load.request_rate {
                Rate::Infinite => Outcome {
                    request_throughput: 100.0,
                    attainment: 0.2,
                },
                Rate::Finite(r) => Outcome {
                    request_throughput: r,
                    attainment: if r <= knee { 0.95 } else { 0.5 },
                },
            };
            sw.finished(outcome);
            assert!(probes < 30);
        }
        let s = sw.search().unwrap();
        let (lo, hi) = (s.passed.unwrap(), s.failed.unwrap());
        assert!(lo <= knee && knee < hi && hi - lo <= 0.5, "{lo}..{hi}");
    }

    #[test]
    fn slo_search_reports_when_even_the_top_passes() {
        let mut sw = Sweeper::new(&base(Sweep {
            mode: SweepMode::Slo,
            resolution: Some(1.0),
            max_rate: Some(20.0),
            ..Sweep::default()
        }));
        let step = sw.next_step().unwrap();
        assert_eq!(step.scenario.load.request_rate, Rate::Finite(20.0));
        sw.finished(Outcome {
            request_throughput: 20.0,
            attainment: 1.0,
        });
        assert!(sw.next_step().is_none());
        assert_eq!(sw.search().unwrap().passed, Some(20.0));
        assert_eq!(sw.search().unwrap().failed, None);
    }
}
