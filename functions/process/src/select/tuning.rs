//! The selection's and the claim loop's tuning constants in one value, so
//! that the lab can run a stack with one of them changed (`lifo simulate
//! --constants`). The product always runs [`Tuning::default`], today's
//! constants: the value is carried by [`crate::ProcessConfig`], set by
//! the lab only, never read from the environment or the template.

use super::deadline;
use super::fair::{self, LateReach};
use std::time::Duration;

/// Every tuning constant of the claim policy and the claim loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    /// The heads are read again after serving a few claims once this old
    /// ([`super::heads::HeadsPolicy::min_age`]).
    pub heads_min_age: Duration,
    /// The heads are read again when older than this
    /// ([`super::heads::HeadsPolicy::max_age`]).
    pub heads_max_age: Duration,

    /// A backlog short of this many seconds of throughput is an overload
    /// ([`deadline::OVERLOAD_SECONDS`]).
    pub overload_seconds: f64,
    /// Arrivals at this many times the throughput are an overload
    /// ([`deadline::OVERLOAD_RATIO`]).
    pub overload_ratio: f64,
    /// Once overloaded, it lasts while arrivals stay at this many times
    /// the throughput ([`deadline::OVERLOAD_LEAVE_RATIO`]).
    pub overload_leave_ratio: f64,
    /// Arrivals are counted over this window (ms,
    /// [`deadline::ARRIVALS_WINDOW_MS`]).
    pub arrivals_window_ms: u64,
    /// Tasks arrive while each read sees one claimable this long (ms)
    /// before it ([`deadline::ARRIVAL_GAP`]).
    pub arrival_gap: u64,
    /// Entries per shard of the lane's oldest-first read; 0: none
    /// ([`deadline::OLDEST_READ_PAGE`]).
    pub oldest_read_page: usize,
    /// The lane's oldest-first reads come at most this often (ms,
    /// [`deadline::OLDEST_READ_GAP`]).
    pub oldest_read_gap: u64,
    /// Until a claim ended, a claim is taken to hold its slot this long
    /// (ms, [`deadline::PRIOR_HOLD_MS`]).
    pub prior_hold_ms: f64,
    /// Weight of the latest hold in the hold's mean and variance
    /// ([`deadline::HOLD_WEIGHT`]).
    pub hold_weight: f64,
    /// Deviations of the hold the lane's guard keeps in reserve
    /// ([`deadline::JITTER_DEVIATIONS`]).
    pub jitter_deviations: f64,

    /// How far back the fair share counts service ([`fair::WINDOW`]).
    pub window: Duration,
    /// A tenant with at most this many waiting keeps up while another
    /// floods ([`fair::FEW_WAITING`]).
    pub few_waiting: usize,
    /// Entries per shard per read once tenants are seen, and candidates of
    /// one tenant carried and handed over ([`fair::PAGE`]).
    pub page: usize,
    /// Tenanted heads that served a claim are read again once this old
    /// ([`fair::MIN_AGE`]).
    pub min_age: Duration,
    /// Heads older than this are read again before a slot goes to a tenant
    /// not favoured ([`fair::FRESH`]).
    pub fresh: Duration,
    /// Each tenanted read reaches back to the read before, less this
    /// ([`fair::REACH_BACK`]).
    pub reach_back: Duration,
    /// How often, and how far, a tenanted read reaches further back
    /// ([`fair::LATE_REACH`]).
    pub late_reach: LateReach,
    /// Entries per shard of an invocation's first read, at least
    /// ([`fair::FIRST_READ_PAGE`]).
    pub first_read_page: usize,
    /// How long a task found late keeps the reach's margin wide
    /// ([`fair::LATE_WINDOW`]).
    pub late_window: Duration,
    /// What lateness adds to the reach's margin at most
    /// ([`fair::MAX_MARGIN`]).
    pub max_margin: Duration,

    /// How long after a rest's end an invocation waiting for it reads
    /// again (ms, [`crate::claim_loop`]'s `REST_END_MARGIN_MS`).
    pub rest_end_margin_ms: u64,
    /// While it waits for a rest to end, an invocation reads again at
    /// least this often (`REST_WAIT_STEP`).
    pub rest_wait_step: Duration,
}

/// The heads' read-again ages of [`super::heads::HeadsPolicy::new`].
pub const HEADS_MIN_AGE: Duration = Duration::from_millis(100);
pub const HEADS_MAX_AGE: Duration = Duration::from_secs(1);

impl Default for Tuning {
    /// Today's constants.
    fn default() -> Self {
        Self {
            heads_min_age: HEADS_MIN_AGE,
            heads_max_age: HEADS_MAX_AGE,
            overload_seconds: deadline::OVERLOAD_SECONDS,
            overload_ratio: deadline::OVERLOAD_RATIO,
            overload_leave_ratio: deadline::OVERLOAD_LEAVE_RATIO,
            arrivals_window_ms: deadline::ARRIVALS_WINDOW_MS,
            arrival_gap: deadline::ARRIVAL_GAP,
            oldest_read_page: deadline::OLDEST_READ_PAGE,
            oldest_read_gap: deadline::OLDEST_READ_GAP,
            prior_hold_ms: deadline::PRIOR_HOLD_MS,
            hold_weight: deadline::HOLD_WEIGHT,
            jitter_deviations: deadline::JITTER_DEVIATIONS,
            window: fair::WINDOW,
            few_waiting: fair::FEW_WAITING,
            page: fair::PAGE,
            min_age: fair::MIN_AGE,
            fresh: fair::FRESH,
            reach_back: fair::REACH_BACK,
            late_reach: fair::LATE_REACH,
            first_read_page: fair::FIRST_READ_PAGE,
            late_window: fair::LATE_WINDOW,
            max_margin: fair::MAX_MARGIN,
            rest_end_margin_ms: crate::claim_loop::REST_END_MARGIN_MS,
            rest_wait_step: crate::claim_loop::REST_WAIT_STEP,
        }
    }
}
