//! The ideal scheduler of a mix of tenants, to judge the fair share by: the
//! fair share's own policy ([`process::select::fair`]) with nothing in its
//! way. A slot is filled the instant it frees, from every task waiting at
//! that instant: no reads, no claims, no wake-ups, no tail calls. Each
//! tenant gives its newest task (its oldest, if it keeps up); a task older
//! than its TTL is shed.
//!
//! Fed a real run's arrivals (the same tasks, tenants and times), with the
//! run's slots and run times drawn as its downstream draws them, it gives
//! what this policy achieves with perfect knowledge; the real queue's
//! figures are judged against it (`lifo simulate --mix tenants`). What a
//! real start costs that no scheduler avoids (the claim's round trip and
//! the outcome's write, inside each slot's hold) can be added to each run
//! ([`Slots::overhead`]). `model/fair_share.py` is where it came from; this
//! one runs the policy's own code.

use lifo_core::priority::Priority;
use process::select::fair::{Cap, Ledger, keeping_up};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::time::Duration;

/// The virtual clock's epoch (ms): the ledger keeps wall-clock times.
const EPOCH_MS: u64 = 1_700_000_000_000;

/// One task that arrives: when (ms from the run's start) and whose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The time the task was stamped with: its age and its TTL count from
    /// here.
    pub at_ms: u64,
    /// When its write was done (at least `at_ms`): no scheduler can start
    /// it sooner. A create request stamps its tasks when it begins.
    pub written_ms: u64,
    pub tenant: String,
}

impl Arrival {
    /// A task written the instant it was stamped.
    pub fn at(at_ms: u64, tenant: &str) -> Self {
        Self {
            at_ms,
            written_ms: at_ms,
            tenant: tenant.to_owned(),
        }
    }
}

/// The slots the ideal fills and how long each run holds one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slots {
    /// Runs at once (the runner's concurrency).
    pub slots: usize,
    /// A run's mean time.
    pub latency: Duration,
    /// Each run takes `latency × (1 ± jitter)`, uniform.
    pub jitter: f64,
    /// A task not started this long after it arrived is shed.
    pub ttl: Duration,
    /// Added to every slot's hold: what each start costs beyond its run.
    pub overhead: Duration,
    /// At most this many runs of one tenant at once (the tenant cap).
    pub tenant_cap: Option<usize>,
    /// Seed of the run times.
    pub seed: u64,
}

/// What became of one arrival: when it started (ms from the run's start),
/// or `None` if it was shed.
pub type Started = Option<u64>;

/// Schedules `arrivals` (ascending by `written_ms`, and by `at_ms` among
/// those written at once) into `slots`; one entry per arrival, in the same
/// order.
pub fn schedule(arrivals: &[Arrival], slots: &Slots) -> Vec<Started> {
    let mut out: Vec<Started> = vec![None; arrivals.len()];
    let mut rng = fastrand::Rng::with_seed(slots.seed);
    let cap = slots.tenant_cap.map(|n| Cap::new(n, slots.slots, None));
    let mut ledger = Ledger::new(None).with_cap(cap);
    // Each tenant's waiting arrivals (index), oldest first.
    let mut waiting: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    // (end ms, arrival index) of the runs holding a slot.
    let mut ends: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut free = slots.slots;
    let ttl_ms = slots.ttl.as_millis() as u64;
    let latency_ms = slots.latency.as_secs_f64() * 1000.0;
    let overhead_ms = slots.overhead.as_millis() as u64;
    let mut next = 0;
    loop {
        let arrival = arrivals.get(next).map(|a| a.written_ms);
        let end = ends.peek().map(|Reverse((at, _))| *at);
        let now = match (arrival, end) {
            (None, None) => break,
            (Some(a), None) => a,
            (None, Some(e)) => e,
            (Some(a), Some(e)) => a.min(e),
        };
        while let Some(Reverse((at, i))) = ends.peek().copied()
            && at <= now
        {
            ends.pop();
            free += 1;
            ledger.end(&i.to_string());
        }
        while let Some(a) = arrivals.get(next)
            && a.written_ms <= now
        {
            waiting.entry(a.tenant.as_str()).or_default().push(next);
            next += 1;
        }
        if free == 0 {
            continue;
        }
        for list in waiting.values_mut() {
            list.retain(|i| now.saturating_sub(arrivals[*i].at_ms) <= ttl_ms);
        }
        waiting.retain(|_, list| !list.is_empty());
        if waiting.is_empty() {
            continue;
        }
        let counts: HashMap<String, usize> = waiting
            .iter()
            .map(|(t, list)| ((*t).to_owned(), list.len()))
            .collect();
        let keeping = keeping_up(&counts, &ledger.flooding(&counts));
        let mut shares = ledger
            .shares(waiting.keys().copied(), EPOCH_MS + now)
            .with_keeping_up(keeping);
        while free > 0 {
            // Each tenant's newest; its oldest if it keeps up.
            let gives = |tenant: &str, list: &Vec<usize>| {
                if shares.keeps_up(tenant) {
                    list.first().map(|i| (0, *i))
                } else {
                    list.last().map(|i| (list.len() - 1, *i))
                }
            };
            let firsts = waiting.iter().filter_map(|(tenant, list)| {
                let (_, i) = gives(tenant, list)?;
                Some((*tenant, Priority::Normal.key(EPOCH_MS + arrivals[i].at_ms)))
            });
            let Some(tenant) = shares.pick(firsts) else {
                break;
            };
            let Some(list) = waiting.get_mut(tenant) else {
                break;
            };
            let Some((at, i)) = gives(tenant, list) else {
                break;
            };
            list.remove(at);
            shares.book(tenant);
            ledger.start(&i.to_string(), tenant, EPOCH_MS + now);
            out[i] = Some(now);
            free -= 1;
            let run = latency_ms * (1.0 + slots.jitter * (2.0 * rng.f64() - 1.0));
            ends.push(Reverse((now + run.round() as u64 + overhead_ms, i)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(n: usize, latency_ms: u64) -> Slots {
        Slots {
            slots: n,
            latency: Duration::from_millis(latency_ms),
            jitter: 0.0,
            ttl: Duration::from_secs(20),
            overhead: Duration::ZERO,
            tenant_cap: None,
            seed: 1,
        }
    }

    fn arrivals(tenant: &str, every_ms: u64, n: usize) -> Vec<Arrival> {
        (0..n)
            .map(|i| Arrival::at(i as u64 * every_ms, tenant))
            .collect()
    }

    fn merged(mut a: Vec<Arrival>, b: Vec<Arrival>) -> Vec<Arrival> {
        a.extend(b);
        a.sort_by_key(|a| a.at_ms);
        a
    }

    #[test]
    fn a_task_starts_no_sooner_than_its_write_and_its_age_counts_from_its_stamp() {
        // Stamped at 0, written at 300 ms (a slow create request): the free
        // slot waits for the write. Another, stamped at 100 and written at
        // once, starts at 100.
        let a = vec![
            Arrival {
                written_ms: 300,
                ..Arrival::at(0, "a")
            },
            Arrival::at(100, "b"),
        ];
        let mut sorted = a.clone();
        sorted.sort_by_key(|a| a.written_ms);
        let got = schedule(&sorted, &slots(2, 1_000));
        assert_eq!(got, [Some(100), Some(300)]);
        // Its TTL counts from the stamp: one written after it passed is shed.
        let late = [Arrival {
            written_ms: 21_000,
            ..Arrival::at(0, "a")
        }];
        assert_eq!(schedule(&late, &slots(1, 100)), [None]);
    }

    #[test]
    fn under_capacity_every_task_starts_the_moment_it_arrives() {
        let a = arrivals("a", 100, 50);
        let got = schedule(&a, &slots(2, 150));
        for (a, s) in a.iter().zip(&got) {
            assert_eq!(*s, Some(a.at_ms));
        }
    }

    #[test]
    fn overloaded_it_starts_the_newest_and_sheds_what_waits_past_its_ttl() {
        // One slot, runs of 1 s, a task every 100 ms for 60 s, TTL 20 s.
        let a = arrivals("a", 100, 600);
        let s = Slots {
            ttl: Duration::from_secs(20),
            ..slots(1, 1_000)
        };
        let got = schedule(&a, &s);
        let started: Vec<(u64, u64)> = a
            .iter()
            .zip(&got)
            .filter_map(|(a, s)| s.map(|s| (a.at_ms, s)))
            .collect();
        // One start a second while tasks arrive, then the drain.
        assert!((60..=81).contains(&started.len()), "{}", started.len());
        assert!(started.iter().all(|(at, s)| s - at <= 20_000));
        // While tasks arrive, each start takes the newest: at most 100 ms old.
        assert!(
            started
                .iter()
                .filter(|(_, s)| *s < 59_000)
                .all(|(at, s)| s - at <= 100)
        );
    }

    #[test]
    fn every_slot_works_while_anyone_waits_and_backlogged_tenants_share_evenly() {
        // Three tenants, each wanting far more than the four slots give.
        let mut a = arrivals("a", 10, 3_000);
        a = merged(a, arrivals("b", 10, 3_000));
        a = merged(a, arrivals("c", 10, 3_000));
        let got = schedule(&a, &slots(4, 200));
        let starts = |t: &str| {
            a.iter()
                .zip(&got)
                .filter(|(a, s)| a.tenant == t && s.is_some_and(|s| s < 30_000))
                .count()
        };
        let total = starts("a") + starts("b") + starts("c");
        // 4 slots × 5 runs a second × 30 s.
        assert_eq!(total, 600);
        for t in ["a", "b", "c"] {
            let share = starts(t) as f64 / total as f64;
            assert!((share - 1.0 / 3.0).abs() < 0.1 / 3.0, "{t}: {share}");
        }
    }

    #[test]
    fn a_quiet_tenant_waits_for_a_slot_to_free_not_for_the_flood() {
        // a floods 4 slots; b writes one task a second, each starting at the
        // next slot to free (a run is 400 ms: within 100 ms on average).
        let a_tasks = arrivals("a", 20, 3_000);
        let b_tasks: Vec<Arrival> = (0..50).map(|i| Arrival::at(1_000 * i + 7, "b")).collect();
        let all = merged(a_tasks, b_tasks);
        let got = schedule(&all, &slots(4, 400));
        let waits: Vec<u64> = all
            .iter()
            .zip(&got)
            .filter(|(a, _)| a.tenant == "b")
            .map(|(a, s)| s.map_or(u64::MAX, |s| s - a.at_ms))
            .collect();
        assert!(waits.iter().all(|w| *w <= 400), "{waits:?}");
    }

    #[test]
    fn a_tenant_that_keeps_up_while_another_floods_goes_first_oldest_first() {
        // One slot, runs of 100 ms. q writes three tasks at 0-2 ms, f ten
        // at 3-12 ms, r one at 13 ms. At 100 and 200 ms f floods (10 of 13
        // waiting) and q keeps up: q's older task first, then its newer,
        // though f and r were served less (without the rule, f's newest
        // would go at 100 ms: it has waited longer than r's).
        let mut a: Vec<Arrival> = (0..3).map(|i| Arrival::at(i, "q")).collect();
        a.extend((3..13).map(|i| Arrival::at(i, "f")));
        a.push(Arrival::at(13, "r"));
        let got = schedule(&a, &slots(1, 100));
        assert_eq!(&got[..3], [Some(0), Some(100), Some(200)]);
        // At 300 ms only f and r wait: with two tenants nobody floods, and
        // the share decides by service and wait alone: f's newest, then r.
        assert_eq!(got[12], Some(300));
        assert_eq!(got[13], Some(400));
    }

    #[test]
    fn a_capped_tenant_never_holds_more_than_its_cap_and_slots_idle_for_it() {
        let a = arrivals("a", 10, 1_000);
        let s = Slots {
            tenant_cap: Some(2),
            ..slots(5, 100)
        };
        let got = schedule(&a, &s);
        // Two at once, 100 ms each: 20 starts a second over 10 s of
        // arrivals, then the drain of the last 10 s of TTL.
        let in_load = got.iter().filter(|s| s.is_some_and(|s| s < 10_000)).count();
        assert_eq!(in_load, 200);
        let mut starts: Vec<u64> = got.iter().flatten().copied().collect();
        starts.sort_unstable();
        for w in starts.windows(3) {
            assert!(w[2] - w[0] >= 100, "three runs at once: {w:?}");
        }
    }

    #[test]
    fn the_overhead_lengthens_each_hold() {
        let a = arrivals("a", 1, 100);
        let bare = schedule(&a, &slots(1, 100));
        let s = Slots {
            overhead: Duration::from_millis(25),
            ..slots(1, 100)
        };
        let slower = schedule(&a, &s);
        let last = |got: &[Started]| got.iter().flatten().max().copied();
        assert_eq!(last(&bare), Some(99 * 100));
        assert_eq!(slower.iter().flatten().count(), 100);
        assert_eq!(last(&slower), Some(99 * 125));
    }
}
