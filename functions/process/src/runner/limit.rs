//! The adaptive limit on runs in flight: the downstream's capacity, found
//! from its latency and its refusals, not configured (docs/design.md, "The
//! adaptive limit").
//!
//! A gradient limit in rounds. A round is as many ended runs as the limit
//! (about one latency's worth of runs). At a round's end:
//! - its mean latency against the unloaded latency (the lowest round mean
//!   of the last [`BASELINE_ROUNDS`]) says whether the downstream queues
//!   runs. Above [`TOLERANCE`] times it, the limit falls to what the
//!   latency implies the downstream serves at once (Little's law: runs in
//!   flight × unloaded / latency), at most halving a round;
//! - else, when the runs in flight reached half the limit (the limit, not
//!   the demand, held them back), it rises by its square root;
//!
//! and at once, on a refusal (HTTP 429 or 503, Lambda's throttle, a
//! timeout), it halves. Refusals and latencies of runs that started before
//! the last halving measured the old limit: they are not counted again.
//! Time is an argument (ms on any monotonic clock), never read here.

use serde::{Deserialize, Serialize};

/// A round's latency above this many times the unloaded latency means the
/// downstream queues runs inside itself.
pub const TOLERANCE: f64 = 1.5;
/// Latency differences under this are the host's noise, not a queue
/// (a downstream that answers in 0 ms would otherwise look queued at 1 ms).
pub const NOISE_MS: f64 = 10.0;
/// The unloaded latency is the lowest round mean of the last this many
/// rounds: a downstream whose own latency grew (a cold cache) is believed
/// after that many rounds.
pub const BASELINE_ROUNDS: u32 = 30;

/// One run that ended, as the limit is told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub started_ms: u64,
    pub ended_ms: u64,
    /// Refused (429, 503, a throttle) or timed out: the downstream is over
    /// its capacity.
    pub refused: bool,
    /// Runs in flight when it started, itself included.
    pub in_flight: usize,
}

impl Sample {
    pub fn latency_ms(&self) -> u64 {
        self.ended_ms.saturating_sub(self.started_ms)
    }
}

/// How the limit changed on a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// A round near the unloaded latency, with the limit in use.
    Rose { from: usize, to: usize },
    /// A round's latency climbed past [`TOLERANCE`] × the unloaded one.
    Fell {
        from: usize,
        to: usize,
        latency_ms: f64,
        unloaded_ms: f64,
    },
    /// A refusal or a timeout.
    Halved { from: usize, to: usize },
}

/// The runs of the round being measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Round {
    samples: usize,
    latency_sum_ms: f64,
    in_flight_sum: usize,
    peak_in_flight: usize,
}

/// The adaptive limit's state.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradient {
    limit: f64,
    ceiling: usize,
    unloaded_ms: Option<f64>,
    /// Rounds since the unloaded latency was last set.
    unloaded_age: u32,
    round: Round,
    /// When it last halved: refusals of runs started before were sent at
    /// the old limit.
    halved_at: Option<u64>,
}

/// What a tail call hands over of a limit (the handover's `limit` key).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handed {
    pub limit: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unloaded_ms: Option<f64>,
    #[serde(default)]
    pub unloaded_age: u32,
}

impl Gradient {
    /// Starts at `ceiling` (`RunnerMaxConcurrency`, what a fixed limit
    /// would run): it only takes away what the downstream shows it cannot
    /// serve.
    pub fn new(ceiling: usize) -> Self {
        let ceiling = ceiling.max(1);
        Self {
            limit: ceiling as f64,
            ceiling,
            unloaded_ms: None,
            unloaded_age: 0,
            round: Round::default(),
            halved_at: None,
        }
    }

    /// Resumes what the invocation before handed over, within `ceiling`
    /// (the settings may have changed since).
    pub fn resume(ceiling: usize, handed: &Handed) -> Self {
        let mut g = Self::new(ceiling);
        if handed.limit.is_finite() {
            g.limit = handed.limit.clamp(1.0, g.ceiling as f64);
        }
        g.unloaded_ms = handed.unloaded_ms.filter(|u| u.is_finite() && *u >= 0.0);
        g.unloaded_age = handed.unloaded_age.min(BASELINE_ROUNDS);
        g
    }

    pub fn handed(&self) -> Handed {
        Handed {
            limit: self.limit,
            unloaded_ms: self.unloaded_ms,
            unloaded_age: self.unloaded_age,
        }
    }

    /// Runs that may be in flight now: 1 to the ceiling.
    pub fn limit(&self) -> usize {
        (self.limit.floor() as usize).clamp(1, self.ceiling)
    }

    pub fn unloaded_ms(&self) -> Option<f64> {
        self.unloaded_ms
    }

    /// Takes in a run that ended; how the limit changed, if it did.
    pub fn tell(&mut self, s: Sample) -> Option<Change> {
        if self.halved_at.is_some_and(|at| s.started_ms < at) {
            return None;
        }
        let from = self.limit();
        if s.refused {
            self.limit = (self.limit / 2.0).max(1.0);
            self.halved_at = Some(s.ended_ms);
            self.round = Round::default();
            return Some(Change::Halved {
                from,
                to: self.limit(),
            });
        }
        let r = &mut self.round;
        r.samples += 1;
        r.latency_sum_ms += s.latency_ms() as f64;
        r.in_flight_sum += s.in_flight;
        r.peak_in_flight = r.peak_in_flight.max(s.in_flight);
        if r.samples < from {
            return None;
        }
        let round = std::mem::take(&mut self.round);
        self.end_round(&round, from)
    }

    fn end_round(&mut self, round: &Round, from: usize) -> Option<Change> {
        let n = round.samples as f64;
        let latency = round.latency_sum_ms / n;
        let unloaded = match self.unloaded_ms {
            Some(u) if latency >= u && self.unloaded_age < BASELINE_ROUNDS => {
                self.unloaded_age += 1;
                u
            }
            _ => {
                self.unloaded_ms = Some(latency);
                self.unloaded_age = 0;
                latency
            }
        };
        if latency > TOLERANCE * unloaded + NOISE_MS {
            // What the downstream serves at once (Little's law), never
            // less than half the limit in one round (one slow round may be
            // an outlier) nor more than it.
            let in_flight = round.in_flight_sum as f64 / n;
            let serves = in_flight * unloaded / latency;
            self.limit = serves.clamp(self.limit / 2.0, self.limit).max(1.0);
            let to = self.limit();
            return (to < from).then_some(Change::Fell {
                from,
                to,
                latency_ms: latency,
                unloaded_ms: unloaded,
            });
        }
        if 2 * round.peak_in_flight < from {
            // The demand held runs back, not the limit: nothing learned.
            return None;
        }
        self.limit = (self.limit + self.limit.sqrt()).min(self.ceiling as f64);
        let to = self.limit();
        (to > from).then_some(Change::Rose { from, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ends a round of `g.limit()` runs, each `latency` ms with `in_flight`
    /// in flight, from `*now`; what changed at its end.
    fn round(g: &mut Gradient, now: &mut u64, latency: u64, in_flight: usize) -> Option<Change> {
        let n = g.limit();
        let mut last = None;
        for _ in 0..n {
            last = g.tell(Sample {
                started_ms: *now,
                ended_ms: *now + latency,
                refused: false,
                in_flight,
            });
            *now += latency / n as u64 + 1;
        }
        last
    }

    fn refusal(g: &mut Gradient, started_ms: u64, ended_ms: u64) -> Option<Change> {
        g.tell(Sample {
            started_ms,
            ended_ms,
            refused: true,
            in_flight: g.limit(),
        })
    }

    #[test]
    fn it_rises_by_its_square_root_a_round_while_latency_stays_unloaded_up_to_the_ceiling() {
        let mut g = Gradient::resume(
            20,
            &Handed {
                limit: 4.0,
                unloaded_ms: None,
                unloaded_age: 0,
            },
        );
        let mut now = 0;
        let mut seen = Vec::new();
        for _ in 0..8 {
            let l = g.limit();
            round(&mut g, &mut now, 1000, l);
            seen.push(g.limit());
        }
        // 4 → 6 → 8.45 → 11.35 → 14.72 → 18.56 → 20 (the ceiling).
        assert_eq!(seen, [6, 8, 11, 14, 18, 20, 20, 20]);
        assert_eq!(g.unloaded_ms(), Some(1000.0));
    }

    #[test]
    fn it_falls_to_what_the_latency_says_the_downstream_serves() {
        let mut g = Gradient::new(10);
        let mut now = 0;
        assert_eq!(round(&mut g, &mut now, 1000, 10), None, "at the ceiling");
        // 10 in flight take 2.5 s: the downstream serves 4 at once.
        assert_eq!(
            round(&mut g, &mut now, 2500, 10),
            Some(Change::Fell {
                from: 10,
                to: 5,
                latency_ms: 2500.0,
                unloaded_ms: 1000.0
            }),
            "at most halving a round"
        );
        // 5 in flight take 1.25 s: within the tolerance, and it rises.
        assert_eq!(
            round(&mut g, &mut now, 1250, 5),
            Some(Change::Rose { from: 5, to: 7 })
        );
        // 7 take 1.75 s: 7 × 1000 / 1750 = 4.
        assert_eq!(
            round(&mut g, &mut now, 1750, 7),
            Some(Change::Fell {
                from: 7,
                to: 4,
                latency_ms: 1750.0,
                unloaded_ms: 1000.0
            })
        );
    }

    #[test]
    fn a_refusal_halves_it_at_once_and_earlier_runs_refusals_do_not_again() {
        let mut g = Gradient::new(16);
        assert_eq!(
            refusal(&mut g, 0, 100),
            Some(Change::Halved { from: 16, to: 8 })
        );
        // Sent before the halving: the old limit's.
        assert_eq!(refusal(&mut g, 50, 120), None);
        assert_eq!(
            g.tell(Sample {
                started_ms: 60,
                ended_ms: 5000,
                refused: false,
                in_flight: 16
            }),
            None
        );
        assert_eq!(g.limit(), 8);
        assert_eq!(
            refusal(&mut g, 100, 200),
            Some(Change::Halved { from: 8, to: 4 })
        );
        assert_eq!(
            refusal(&mut g, 300, 400),
            Some(Change::Halved { from: 4, to: 2 })
        );
    }

    #[test]
    fn it_never_goes_below_one() {
        let mut g = Gradient::new(3);
        let mut t = 0;
        for _ in 0..5 {
            refusal(&mut g, t, t + 1);
            t += 2;
        }
        assert_eq!(g.limit(), 1);
        let mut now = 100;
        round(&mut g, &mut now, 1000, 1);
        round(&mut g, &mut now, 9000, 1);
        assert_eq!(g.limit(), 1);
    }

    #[test]
    fn the_demand_not_the_limit_holding_runs_back_teaches_nothing() {
        let mut g = Gradient::resume(
            20,
            &Handed {
                limit: 10.0,
                unloaded_ms: Some(1000.0),
                unloaded_age: 0,
            },
        );
        let mut now = 0;
        assert_eq!(round(&mut g, &mut now, 1000, 4), None);
        assert_eq!(g.limit(), 10);
        assert_eq!(
            round(&mut g, &mut now, 1000, 5),
            Some(Change::Rose { from: 10, to: 13 })
        );
    }

    #[test]
    fn a_downstream_slower_for_good_is_believed_after_the_baseline_rounds() {
        let mut g = Gradient::resume(
            8,
            &Handed {
                limit: 8.0,
                unloaded_ms: Some(1000.0),
                unloaded_age: BASELINE_ROUNDS - 1,
            },
        );
        let mut now = 0;
        // 1.4 s: within the tolerance; the old baseline's last round.
        assert_eq!(round(&mut g, &mut now, 1400, 8), None);
        assert_eq!(g.unloaded_ms(), Some(1000.0));
        // Its age is up: this round's latency is the unloaded one now.
        round(&mut g, &mut now, 1400, 8);
        assert_eq!(g.unloaded_ms(), Some(1400.0));
        // A faster round is always the baseline.
        round(&mut g, &mut now, 900, 8);
        assert_eq!(g.unloaded_ms(), Some(900.0));
    }

    #[test]
    fn latency_under_the_noise_floor_is_not_a_queue() {
        let mut g = Gradient::new(4);
        let mut now = 0;
        round(&mut g, &mut now, 0, 4);
        assert_eq!(round(&mut g, &mut now, 8, 4), None);
        assert_eq!(g.limit(), 4);
    }

    #[test]
    fn what_is_handed_over_resumes_within_the_ceiling() {
        let mut g = Gradient::new(10);
        refusal(&mut g, 0, 1);
        let handed = g.handed();
        let json = serde_json::to_value(handed).unwrap();
        assert_eq!(json, serde_json::json!({"limit": 5.0, "unloadedAge": 0}));
        let back: Handed = serde_json::from_value(json).unwrap();
        assert_eq!(Gradient::resume(10, &back).limit(), 5);
        // A ceiling lowered since, and nonsense, are bounded.
        assert_eq!(Gradient::resume(3, &back).limit(), 3);
        let nan = Handed {
            limit: f64::NAN,
            unloaded_ms: Some(-1.0),
            unloaded_age: 99,
        };
        let g = Gradient::resume(6, &nan);
        assert_eq!((g.limit(), g.unloaded_ms()), (6, None));
    }
}
