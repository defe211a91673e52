//! The adaptive limit on runs in flight: the downstream's capacity, found
//! from its latency and its refusals, not configured (docs/design.md, "The
//! adaptive limit").
//!
//! A gradient limit in rounds. A round is as many ended runs as the limit
//! (about one latency's worth), all started at the limit as it is now. At
//! a round's end (but the first after a change, which only settles: its
//! runs queued behind the old limit's):
//! - its mean latency against the unloaded latency (the fastest run of the
//!   last [`BASELINE_ROUNDS`] to twice that many rounds: past its
//!   capacity a downstream queues runs, so the runs that found a slot free
//!   show the unloaded latency) says whether the downstream queues runs.
//!   Above [`TOLERANCE`] times it, the limit falls to what the latency
//!   implies the downstream serves at once (Little's law: runs in flight ×
//!   unloaded / latency) and a queue of its square root, at most halving a
//!   round;
//! - else, when the runs in flight reached half the limit (the limit, not
//!   the demand, held them back), it rises: by its square root up to
//!   [`QUEUE_FORMING`] times the unloaded latency, by one above;
//!
//! and at once, on a refusal (HTTP 429 or 503, Lambda's throttle, a
//! timeout), it halves, at most once a latency (the last round's). Runs
//! that started before the last change measured the old limit: their
//! latencies and refusals are not counted. Time is an
//! argument (ms on any monotonic clock), never read here.

use serde::{Deserialize, Serialize};

/// A round's latency above this many times the unloaded latency means the
/// downstream queues runs inside itself.
pub const TOLERANCE: f64 = 1.5;
/// Up to this many times the unloaded latency, no queue is forming: the
/// limit rises by its square root; above, by one.
pub const QUEUE_FORMING: f64 = 1.1;
/// Latency differences under this are the host's noise, not a queue
/// (a downstream that answers in 0 ms would otherwise look queued at 1 ms).
pub const NOISE_MS: f64 = 10.0;
/// The unloaded latency is the fastest run of the last this many rounds
/// to twice that many: a downstream whose own latency grew (a cold cache)
/// is believed within that many rounds.
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
    fastest_ms: Option<f64>,
    latency_sum_ms: f64,
    peak_in_flight: usize,
}

/// The adaptive limit's state.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradient {
    limit: f64,
    ceiling: usize,
    unloaded_ms: Option<f64>,
    /// Rounds since the unloaded latency's window began.
    unloaded_age: u32,
    /// The fastest run since the window began: the next unloaded latency.
    next_unloaded_ms: Option<f64>,
    round: Round,
    /// When the limit last changed: runs started before measured the old
    /// one.
    changed_at: Option<u64>,
    /// The round after a change only settles: its runs queued behind the
    /// old limit's, so their latency is still the old one's.
    settling: bool,
    /// The last round's mean latency (ms).
    latency_ms: Option<f64>,
    /// Refusals of runs started before this are not counted: after a
    /// halving, runs sent at once still meet the old limit's queue for
    /// about one latency (as TCP halves once a round trip).
    refusals_from: Option<u64>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_unloaded_ms: Option<f64>,
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
            next_unloaded_ms: None,
            round: Round::default(),
            changed_at: None,
            settling: false,
            latency_ms: None,
            refusals_from: None,
        }
    }

    /// Resumes what the invocation before handed over, within `ceiling`
    /// (the settings may have changed since).
    pub fn resume(ceiling: usize, handed: &Handed) -> Self {
        let mut g = Self::new(ceiling);
        if handed.limit.is_finite() {
            g.limit = handed.limit.clamp(1.0, g.ceiling as f64);
        }
        let valid = |u: &f64| u.is_finite() && *u >= 0.0;
        g.unloaded_ms = handed.unloaded_ms.filter(valid);
        g.next_unloaded_ms = handed.next_unloaded_ms.filter(valid);
        g.unloaded_age = handed.unloaded_age.min(BASELINE_ROUNDS);
        g
    }

    pub fn handed(&self) -> Handed {
        Handed {
            limit: self.limit,
            unloaded_ms: self.unloaded_ms,
            unloaded_age: self.unloaded_age,
            next_unloaded_ms: self.next_unloaded_ms,
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
        if self.changed_at.is_some_and(|at| s.started_ms < at) {
            return None;
        }
        let from = self.limit();
        if s.refused {
            if self.refusals_from.is_some_and(|at| s.started_ms < at) {
                return None;
            }
            self.limit = (self.limit / 2.0).max(1.0);
            self.round = Round::default();
            let to = self.limit();
            self.changed_at = Some(s.ended_ms);
            let latency = self.latency_ms.unwrap_or(0.0).round() as u64;
            self.refusals_from = Some(s.ended_ms + latency);
            self.settling = true;
            return Some(Change::Halved { from, to });
        }
        let ms = s.latency_ms() as f64;
        let r = &mut self.round;
        r.samples += 1;
        r.latency_sum_ms += ms;
        r.fastest_ms = Some(r.fastest_ms.map_or(ms, |f| f.min(ms)));
        r.peak_in_flight = r.peak_in_flight.max(s.in_flight);
        if r.samples < from {
            return None;
        }
        let round = std::mem::take(&mut self.round);
        let change = self.end_round(&round, from);
        if change.is_some() {
            self.changed_at = Some(s.ended_ms);
            self.settling = true;
        }
        change
    }

    /// The unloaded latency after a round whose fastest run took
    /// `fastest` ms: the fastest of the window, the window renewed every
    /// [`BASELINE_ROUNDS`].
    fn unloaded_after(&mut self, fastest: f64) -> f64 {
        let lowest = |a: Option<f64>| a.map_or(fastest, |a| a.min(fastest));
        self.next_unloaded_ms = Some(lowest(self.next_unloaded_ms));
        self.unloaded_ms = Some(lowest(self.unloaded_ms));
        self.unloaded_age += 1;
        if self.unloaded_age >= BASELINE_ROUNDS {
            self.unloaded_ms = self.next_unloaded_ms.take();
            self.unloaded_age = 0;
        }
        self.unloaded_ms.unwrap_or(fastest)
    }

    fn end_round(&mut self, round: &Round, from: usize) -> Option<Change> {
        let n = round.samples as f64;
        let latency = round.latency_sum_ms / n;
        self.latency_ms = Some(latency);
        let unloaded = self.unloaded_after(round.fastest_ms.unwrap_or(latency));
        if std::mem::take(&mut self.settling) {
            return None;
        }
        if latency > TOLERANCE * unloaded + NOISE_MS {
            // What the downstream serves at once (Little's law), never
            // less than half the limit in one round (one slow round may be
            // an outlier) nor more than it.
            // Saturated, the runs in flight are the limit; the count at
            // each start undercounts a refill.
            let in_flight = round.peak_in_flight.min(from) as f64;
            let serves = in_flight * unloaded / latency;
            // And a queue of its square root in front of it, so that a
            // slot freed while the next claim is on its way does not idle.
            let target = serves + serves.sqrt();
            self.limit = target.clamp(self.limit / 2.0, self.limit).max(1.0);
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
        // No queue yet: by its square root; a queue forming: by one.
        let step = if latency <= QUEUE_FORMING * unloaded + NOISE_MS {
            self.limit.sqrt()
        } else {
            1.0
        };
        self.limit = (self.limit + step).min(self.ceiling as f64);
        let to = self.limit();
        (to > from).then_some(Change::Rose { from, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ends a round of `g.limit()` runs, each `latency` ms with `in_flight`
    /// in flight, started 1 ms apart from `*now`; what changed at its end.
    /// `*now` moves past the round's last end.
    fn round(g: &mut Gradient, now: &mut u64, latency: u64, in_flight: usize) -> Option<Change> {
        let mut last = None;
        let n = g.limit() as u64;
        for i in 0..n {
            last = g.tell(Sample {
                started_ms: *now + i,
                ended_ms: *now + i + latency,
                refused: false,
                in_flight,
            });
        }
        *now += n + latency + 1;
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
                next_unloaded_ms: None,
            },
        );
        let mut now = 0;
        let mut seen = Vec::new();
        for _ in 0..12 {
            let l = g.limit();
            round(&mut g, &mut now, 1000, l);
            seen.push(g.limit());
        }
        // 4 → 6 → 8.45 → 11.35 → 14.72 → 18.56 → 20 (the ceiling), each
        // rise followed by a round that only settles.
        assert_eq!(seen, [6, 6, 8, 8, 11, 11, 14, 14, 18, 18, 20, 20]);
        assert_eq!(g.unloaded_ms(), Some(1000.0));
    }

    #[test]
    fn it_falls_to_what_the_latency_says_the_downstream_serves() {
        let mut g = Gradient::new(10);
        let mut now = 0;
        assert_eq!(round(&mut g, &mut now, 1000, 10), None, "at the ceiling");
        // 10 in flight take 2.5 s: the downstream serves 4 at once; 4 and
        // a queue of 2.
        assert_eq!(
            round(&mut g, &mut now, 2500, 10),
            Some(Change::Fell {
                from: 10,
                to: 6,
                latency_ms: 2500.0,
                unloaded_ms: 1000.0
            })
        );
        // The round after a change settles.
        assert_eq!(round(&mut g, &mut now, 1500, 6), None);
        // 6 in flight take 1.5 s: within the tolerance, a queue forming:
        // it rises by one.
        assert_eq!(
            round(&mut g, &mut now, 1500, 6),
            Some(Change::Rose { from: 6, to: 7 })
        );
        assert_eq!(round(&mut g, &mut now, 1000, 7), None);
        // No queue: by its square root.
        assert_eq!(
            round(&mut g, &mut now, 1050, 7),
            Some(Change::Rose { from: 7, to: 9 })
        );
        assert_eq!(round(&mut g, &mut now, 2250, 9), None);
        // 9 take 2.25 s: 9 × 1000 / 2250 = 4, and 2 queued; at most halving
        // (9.65 / 2 = 4.8).
        assert_eq!(
            round(&mut g, &mut now, 2250, 9),
            Some(Change::Fell {
                from: 9,
                to: 6,
                latency_ms: 2250.0,
                unloaded_ms: 1000.0
            })
        );
        // Far past its capacity: half a round at most.
        assert_eq!(round(&mut g, &mut now, 9000, 6), None);
        assert_eq!(
            round(&mut g, &mut now, 9000, 6),
            Some(Change::Fell {
                from: 6,
                to: 3,
                latency_ms: 9000.0,
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
    fn it_halves_at_most_once_a_latency() {
        let mut g = Gradient::new(16);
        let mut now = 0;
        round(&mut g, &mut now, 1000, 16);
        assert_eq!(
            refusal(&mut g, now, now + 1),
            Some(Change::Halved { from: 16, to: 8 })
        );
        // Sent after the halving, but within a latency of it: the old
        // limit's queue refused it.
        assert_eq!(refusal(&mut g, now + 500, now + 501), None);
        assert_eq!(
            refusal(&mut g, now + 1001, now + 1002),
            Some(Change::Halved { from: 8, to: 4 })
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
                next_unloaded_ms: None,
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
    fn the_unloaded_latency_is_the_fastest_run_of_a_window_renewed_every_baseline_rounds() {
        let mut g = Gradient::resume(
            8,
            &Handed {
                limit: 8.0,
                unloaded_ms: Some(1000.0),
                unloaded_age: BASELINE_ROUNDS - 2,
                next_unloaded_ms: Some(1200.0),
            },
        );
        let mut now = 0;
        // 1.4 s: within the tolerance of the window's 1 s.
        assert_eq!(round(&mut g, &mut now, 1400, 8), None);
        assert_eq!(g.unloaded_ms(), Some(1000.0));
        // The window is over: the fastest run of the next one (1.2 s).
        round(&mut g, &mut now, 1400, 8);
        assert_eq!(g.unloaded_ms(), Some(1200.0));
        round(&mut g, &mut now, 1400, 8);
        assert_eq!(g.unloaded_ms(), Some(1200.0));
        // A faster run is the unloaded latency at once.
        round(&mut g, &mut now, 900, 8);
        assert_eq!(g.unloaded_ms(), Some(900.0));
    }

    #[test]
    fn runs_that_found_a_slot_free_show_the_unloaded_latency() {
        // Started at 20 against a downstream of 10: in the first round,
        // half the runs take 1 s and half wait for them; then all take 2 s.
        let mut g = Gradient::new(20);
        for i in 0..20 {
            let latency = if i < 10 { 1000 } else { 2000 };
            g.tell(Sample {
                started_ms: i,
                ended_ms: i + latency,
                refused: false,
                in_flight: 20,
            });
        }
        assert_eq!((g.limit(), g.unloaded_ms()), (20, Some(1000.0)));
        let mut now = 3000;
        assert_eq!(
            round(&mut g, &mut now, 2000, 20),
            Some(Change::Fell {
                from: 20,
                to: 13,
                latency_ms: 2000.0,
                unloaded_ms: 1000.0
            })
        );
    }

    #[test]
    fn runs_started_before_a_change_do_not_count_in_the_next_round() {
        let mut g = Gradient::new(4);
        let mut now = 0;
        round(&mut g, &mut now, 1000, 4);
        round(&mut g, &mut now, 3000, 4);
        assert_eq!(g.limit(), 2);
        // Slow runs sent at the old limit end after the fall: not counted.
        for _ in 0..4 {
            assert_eq!(
                g.tell(Sample {
                    started_ms: 1500,
                    ended_ms: now + 5000,
                    refused: false,
                    in_flight: 4
                }),
                None
            );
        }
        assert_eq!(round(&mut g, &mut now, 1000, 2), None, "it settles");
        assert_eq!(
            round(&mut g, &mut now, 1000, 2),
            Some(Change::Rose { from: 2, to: 4 })
        );
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
            next_unloaded_ms: Some(f64::INFINITY),
        };
        let g = Gradient::resume(6, &nan);
        assert_eq!((g.limit(), g.unloaded_ms()), (6, None));
    }
}
