//! The tuning constants the sweep knows: each one's name (the constant's
//! in the code), what it does, the workloads it was made for, and how its
//! variants change [`Tuning`]: without it (the code path off, or the value
//! that disables it, as `without` says), at half and at double its value.

use super::Bench;
use process::select::Tuning;
use std::time::Duration;

/// Longer than any run: a duration that never elapses in one.
pub const NEVER: Duration = Duration::from_secs(86_400);

/// One tuning constant.
pub struct Constant {
    /// The constant's name in the code.
    pub name: &'static str,
    /// Where it lives.
    pub place: &'static str,
    /// What it does, in a sentence.
    pub does: &'static str,
    /// What "without" sets, in words; `None`: it has no off value.
    pub without: Option<&'static str>,
    /// The workloads it is judged on.
    pub benches: &'static [Bench],
    /// Applies a variant to a tuning: `None` is "without", `Some(f)` the
    /// value scaled by `f`.
    pub apply: fn(&mut Tuning, Option<f64>),
}

fn scale_ms(v: u64, f: f64) -> u64 {
    (v as f64 * f).round() as u64
}

fn scale_n(v: usize, f: f64) -> usize {
    (v as f64 * f).round() as usize
}

const LANE: &[Bench] = &[
    Bench::AdaptiveOverload,
    Bench::AdaptiveMild,
    Bench::AdaptiveOverloadJitter,
    Bench::AdaptiveMildJitter,
];
const SHARE: &[Bench] = &[Bench::Tenants10To1, Bench::Tenants20To1Two];
/// The heads' knobs, also over shards (what their reads are spread over).
const HEADS: &[Bench] = &[Bench::LifoOverload, Bench::LifoMild, Bench::LifoShards];
/// The lane's oldest-first reads, also where arrivals stop and start.
const OLDEST: &[Bench] = &[
    Bench::AdaptiveOverload,
    Bench::AdaptiveMild,
    Bench::AdaptiveOverloadJitter,
    Bench::AdaptiveMildJitter,
    Bench::AdaptiveBatches,
];
/// The share's reads, also where tail calls come under the flood.
const SHARE_READS: &[Bench] = &[
    Bench::Tenants10To1,
    Bench::Tenants20To1Two,
    Bench::Tenants20To1TwoShort,
];
const RESTS: &[Bench] = &[Bench::Rests, Bench::RestsNoLag];

/// Every constant, in the order of the table.
pub fn all() -> Vec<Constant> {
    vec![
        Constant {
            name: "HEADS_MIN_AGE",
            place: "select/heads.rs (HeadsPolicy::new)",
            does: "the heads are read again after serving 2S−1 claims once this old (100 ms)",
            without: Some("0: read again after 2S−1 claims whatever their age"),
            benches: HEADS,
            apply: |t, f| {
                t.heads_min_age = f.map_or(Duration::ZERO, |f| t.heads_min_age.mul_f64(f))
            },
        },
        Constant {
            name: "HEADS_MAX_AGE",
            place: "select/heads.rs (HeadsPolicy::new)",
            does: "the heads are read again when older than this (1 s)",
            without: Some("never: read again only when served enough or spent"),
            benches: HEADS,
            apply: |t, f| t.heads_max_age = f.map_or(NEVER, |f| t.heads_max_age.mul_f64(f)),
        },
        Constant {
            name: "OVERLOAD_SECONDS",
            place: "select/deadline/mod.rs",
            does: "a backlog short of this many seconds of throughput is an overload (2 s): newest first",
            without: Some("∞: the backlog's shortfall never makes an overload"),
            benches: LANE,
            apply: |t, f| t.overload_seconds = f.map_or(f64::INFINITY, |f| t.overload_seconds * f),
        },
        Constant {
            name: "OVERLOAD_RATIO",
            place: "select/deadline/mod.rs",
            does: "arrivals at this many times the throughput are an overload (1.75)",
            without: Some("∞: the arrival rate never makes an overload"),
            benches: LANE,
            apply: |t, f| t.overload_ratio = f.map_or(f64::INFINITY, |f| t.overload_ratio * f),
        },
        Constant {
            name: "OVERLOAD_LEAVE_RATIO",
            place: "select/deadline/mod.rs",
            does: "an overload lasts while arrivals stay at this many times the throughput (1.5)",
            without: Some("∞: no hysteresis, an overload lasts while it would begin"),
            benches: LANE,
            apply: |t, f| {
                t.overload_leave_ratio = f.map_or(f64::INFINITY, |f| t.overload_leave_ratio * f)
            },
        },
        Constant {
            name: "ARRIVALS_WINDOW_MS",
            place: "select/deadline/mod.rs",
            does: "the arrival rate is counted over this window (5 s)",
            without: None,
            benches: LANE,
            apply: |t, f| {
                t.arrivals_window_ms = scale_ms(t.arrivals_window_ms, f.unwrap_or(1.0)).max(1)
            },
        },
        Constant {
            name: "ARRIVAL_GAP",
            place: "select/deadline/mod.rs",
            does: "tasks still arrive while a read sees one claimable within this before it (500 ms)",
            without: Some("∞: tasks always count as arriving (no drain detection)"),
            benches: LANE,
            apply: |t, f| {
                t.arrival_gap = f.map_or(NEVER.as_millis() as u64, |f| scale_ms(t.arrival_gap, f))
            },
        },
        Constant {
            name: "OLDEST_READ_PAGE",
            place: "select/deadline/mod.rs",
            does: "entries per shard of the lane's oldest-first read (500)",
            without: Some("0: no oldest-first read (the lane sees what the heads read)"),
            benches: LANE,
            apply: |t, f| t.oldest_read_page = f.map_or(0, |f| scale_n(t.oldest_read_page, f)),
        },
        Constant {
            name: "OLDEST_READ_GAP",
            place: "select/deadline/mod.rs",
            does: "the lane's oldest-first reads come at most this often (1 s)",
            without: Some("0: one at every refill once arrivals stop"),
            benches: OLDEST,
            apply: |t, f| t.oldest_read_gap = f.map_or(0, |f| scale_ms(t.oldest_read_gap, f)),
        },
        Constant {
            name: "PRIOR_HOLD_MS",
            place: "select/deadline/mod.rs",
            does: "until a claim ended, a claim is taken to hold its slot this long (1 s)",
            without: Some("0: no prior (1 ms, the floor)"),
            benches: LANE,
            apply: |t, f| t.prior_hold_ms = f.map_or(0.0, |f| t.prior_hold_ms * f),
        },
        Constant {
            name: "HOLD_WEIGHT",
            place: "select/deadline/mod.rs",
            does: "weight of the latest hold in the hold's moving mean and variance (0.1)",
            without: Some("1: no smoothing, the last hold alone (variance 0)"),
            benches: LANE,
            apply: |t, f| t.hold_weight = f.map_or(1.0, |f| t.hold_weight * f),
        },
        Constant {
            name: "JITTER_DEVIATIONS",
            place: "select/deadline/mod.rs",
            does: "deviations of the hold the lane's guard keeps in reserve (2)",
            without: Some("0: the guard is the margin and one mean hold"),
            benches: LANE,
            apply: |t, f| t.jitter_deviations = f.map_or(0.0, |f| t.jitter_deviations * f),
        },
        Constant {
            name: "WINDOW",
            place: "select/fair/ledger.rs",
            does: "how far back the fair share counts each tenant's service (10 s)",
            without: Some("0: no service counted (every tenant ranks as the least served)"),
            benches: SHARE,
            apply: |t, f| t.window = f.map_or(Duration::ZERO, |f| t.window.mul_f64(f)),
        },
        Constant {
            name: "FEW_WAITING",
            place: "select/fair/ledger.rs",
            does: "a tenant with at most this many waiting keeps up while one floods: it goes first, oldest first (4)",
            without: Some("0: no tenant keeps up"),
            benches: SHARE,
            apply: |t, f| t.few_waiting = f.map_or(0, |f| scale_n(t.few_waiting, f)),
        },
        Constant {
            name: "PAGE",
            place: "select/fair/mod.rs",
            does: "entries per shard per read once tenants are seen; each tenant's candidates carried and handed over (20)",
            without: Some("0: the heads' own page, nothing carried or handed over"),
            benches: SHARE,
            apply: |t, f| t.page = f.map_or(0, |f| scale_n(t.page, f)),
        },
        Constant {
            name: "MIN_AGE",
            place: "select/fair/mod.rs",
            does: "tenanted heads that served claims are read again once this old (250 ms)",
            without: Some("the heads' own 100 ms"),
            benches: SHARE,
            apply: |t, f| t.min_age = f.map_or(t.heads_min_age, |f| t.min_age.mul_f64(f)),
        },
        Constant {
            name: "FRESH",
            place: "select/fair/mod.rs",
            does: "heads older than this are read again before a slot goes to a tenant not favoured (50 ms)",
            without: Some("never: no read for the sake of fairness"),
            benches: SHARE,
            apply: |t, f| t.fresh = f.map_or(NEVER, |f| t.fresh.mul_f64(f)),
        },
        Constant {
            name: "REACH_BACK",
            place: "select/fair/mod.rs",
            does: "each tenanted read reaches back to the read before less this (200 ms)",
            without: Some("0: to the read before exactly"),
            benches: SHARE_READS,
            apply: |t, f| t.reach_back = f.map_or(Duration::ZERO, |f| t.reach_back.mul_f64(f)),
        },
        Constant {
            name: "LATE_REACH",
            place: "select/fair/mod.rs (LateReach::reach)",
            does: "once a second a read reaches this far back, for tasks the index shows late (6 s)",
            without: Some("0: no further reach"),
            benches: SHARE,
            apply: |t, f| {
                t.late_reach.reach = f.map_or(Duration::ZERO, |f| t.late_reach.reach.mul_f64(f))
            },
        },
        Constant {
            name: "LATE_REACH_EVERY",
            place: "select/fair/mod.rs (LateReach::every)",
            does: "how often a read reaches LATE_REACH back (1 s)",
            without: Some("never: only the first read"),
            benches: SHARE,
            apply: |t, f| t.late_reach.every = f.map_or(NEVER, |f| t.late_reach.every.mul_f64(f)),
        },
        Constant {
            name: "FIRST_READ_PAGE",
            place: "select/fair/mod.rs",
            does: "entries per shard of an invocation's first read, at least (100)",
            without: Some("0: the usual page"),
            benches: SHARE_READS,
            apply: |t, f| t.first_read_page = f.map_or(0, |f| scale_n(t.first_read_page, f)),
        },
        Constant {
            name: "LATE_WINDOW",
            place: "select/fair/reach.rs",
            does: "how long a task found late keeps the reach's margin wide (10 s)",
            without: Some("0: a late task never widens the margin"),
            benches: SHARE,
            apply: |t, f| t.late_window = f.map_or(Duration::ZERO, |f| t.late_window.mul_f64(f)),
        },
        Constant {
            name: "MAX_MARGIN",
            place: "select/fair/reach.rs",
            does: "what lateness adds to the reach's margin at most (1 s)",
            without: Some("no cap (a day)"),
            benches: SHARE_READS,
            apply: |t, f| t.max_margin = f.map_or(NEVER, |f| t.max_margin.mul_f64(f)),
        },
        Constant {
            name: "REST_END_MARGIN_MS",
            place: "claim_loop.rs",
            does: "an invocation waiting for a rest to end reads again this long after it (20 ms)",
            without: Some("0 ms"),
            benches: RESTS,
            apply: |t, f| t.rest_end_margin_ms = f.map_or(0, |f| scale_ms(t.rest_end_margin_ms, f)),
        },
        Constant {
            name: "REST_WAIT_STEP",
            place: "claim_loop.rs",
            does: "while it waits for a rest, an invocation reads again at least this often (1 s)",
            without: Some("none: it sleeps until the rest ends"),
            benches: RESTS,
            apply: |t, f| t.rest_wait_step = f.map_or(NEVER, |f| t.rest_wait_step.mul_f64(f)),
        },
    ]
}

/// The constants called `names` (every one when empty); an unknown name is
/// refused, naming the ones there are.
pub fn select(names: &[String]) -> anyhow::Result<Vec<Constant>> {
    let all = all();
    if names.is_empty() {
        return Ok(all);
    }
    let known: Vec<&str> = all.iter().map(|c| c.name).collect();
    if let Some(bad) = names.iter().find(|n| !known.contains(&n.as_str())) {
        anyhow::bail!(
            "--constants: no tuning constant is called {bad:?}; there are {}",
            known.join(", ")
        );
    }
    Ok(all
        .into_iter()
        .filter(|c| names.iter().any(|n| n == c.name))
        .collect())
}
