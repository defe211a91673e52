//! A fair share per tenant: when several tenants have work, the tenants
//! served less lately than the most served one go first, newest first
//! within each, while a tenant floods the others that keep up go first
//! too, oldest first within each, and a tenant past its share of the rate
//! limit goes last; a tenant alone gets everything.
//!
//! The mechanism is a per-tenant order while claiming, not a change of the
//! index: a task's `tenant` is projected into the claimable index, so the
//! processor sees it on each candidate at no extra read. Each free slot
//! goes to one waiting tenant ([`Shares::pick`]), which gives its newest
//! task (its oldest if it keeps up):
//! - a tenant served less in the last [`WINDOW`] than the most served one
//!   (under its share) goes before one at the top, so the tenant that
//!   floods the queue gets what the others leave free, and no slot idles
//!   while anyone has work;
//! - among the tenants under the top, the one that has waited longest
//!   (since its newest task was written, or since its last start if that
//!   came later) goes first: across them, as near to first come, first
//!   served as newest first within each allows. Their p95 age at start is
//!   what the share is judged by, and ordering them by service instead let
//!   an unlucky task be passed over again and again;
//! - while some tenant floods ([`Ledger::flooding`]), a tenant with at
//!   most [`FEW_WAITING`] waiting in view that is not flooding keeps up
//!   ([`keeping_up`]): it goes with the tenants under the top whatever it
//!   was served, gives its oldest task first, and is ranked among them by
//!   that task's age. Its work is not piling up, so newest first within it
//!   would only make its oldest task wait behind its own newer ones and
//!   behind the flood's;
//! - with a rate limit, a tenant past `ceil(per_second / active)` starts
//!   in the last second goes last (active: running, or waiting in the
//!   heads);
//! - priorities come first: all this orders the tenants within a priority;
//! - with the opt-in cap ([`Cap`], `TENANT_MAX_IN_FLIGHT`), a tenant at its
//!   cap gets no slot, free or not.
//!
//! Service is counted in starts, not slot-time: runs of one downstream take
//! about as long whoever's task they run. Tasks without a tenant share one
//! (the empty name). The ledger of starts is handed from one invocation of
//! the tail-call loop to the next ([`handover`]).
//!
//! The LIFO guarantee that remains: within a tenant that does not keep up
//! (every tenant, while none floods), exactly what the heads give
//! ([`super::heads`]); across the tenants of a priority, a newer task is
//! passed over only for a tenant under the top or one that keeps up, or
//! because its own tenant is past its share of the rate or at its cap.
//! What it costs, once tasks with a tenant are seen (a queue without tenants pays nothing): the
//! tenant's name in each index entry, and reads of up to [`PAGE`] entries
//! per shard ([`policy`]).

mod handover;
mod ledger;

pub use handover::{MAX_BYTES as MAX_HANDOVER_BYTES, MAX_KEPT_BYTES, kept};
pub use ledger::{Cap, FEW_WAITING, Fairness, Ledger, Shares, WINDOW, keeping_up};

use super::heads::{HeadsPolicy, LateReach, ShardHeads};
use lifo_core::Candidate;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Candidates per shard per read with the fair share on. An index entry
/// with a tenant name is about 170 bytes: 20 fit in one 4 KB read (0.5 read
/// units). A tenant's task deeper than this under other tenants' newer
/// tasks stays in view from the reads before ([`HeadsPolicy::keep_per_tenant`]).
pub const PAGE: usize = 20;

/// With the fair share on, heads that served a claim are read again once
/// this old (without it, 100 ms): a slot for a favoured tenant is served
/// from the heads in hand, and one for the tenant at the top waits for
/// heads [`FRESH`] enough.
pub const MIN_AGE: Duration = Duration::from_millis(250);

/// With the fair share on, heads older than this are read again before a
/// free slot goes to a tenant at the top (or past its share of the rate):
/// a task that a tenant under its share wrote a moment ago is seen before
/// the slot goes to the tenant that floods. A slot for a favoured tenant
/// ([`Shares::favoured`]) is served from the heads in hand, as without
/// the share: a task written since would wait behind the one it takes.
pub const FRESH: Duration = Duration::from_millis(50);

/// With the fair share on, each read reaches back to the read before,
/// less this margin (the read's own flight, and a write's between the time
/// it stamps on a task and the task's entry in the index): tasks written
/// between two reads are all seen, however many arrived. A page of the
/// newest alone leaves a quiet tenant's task unseen under a flood that
/// writes more than a page between two reads (at 20:1, two flooding
/// tenants write 27 tasks a second, a page of 20 in 0.7 s), and what the
/// heads never saw they cannot keep: it waited for its expiry.
pub const REACH_BACK: Duration = Duration::from_millis(200);

/// With the fair share on, once a second a read reaches two seconds back
/// ([`LateReach`]): a task that showed up in the index up to a second after
/// the time it was stamped with (the tasks of a create request share the
/// time it began; DynamoDB Local, cold, took 300–1,000 ms to write
/// requests of 5–43 tasks at the tenants mix's start; an index propagates
/// after its table) is seen within about a second, however many newer
/// tasks a flood wrote on top of it. It costs what two seconds of arrivals
/// take to read beyond a page, once a second.
pub const LATE_REACH: LateReach = LateReach {
    every: Duration::from_secs(1),
    reach: Duration::from_secs(2),
};

/// The heads' policy once tasks with a tenant are seen: reads of up to
/// [`PAGE`] entries per shard, and further back to the read before
/// ([`REACH_BACK`]), each tenant's candidates kept from read to read, again
/// after [`MIN_AGE`]. A queue whose tasks have no tenant keeps `base` and
/// pays nothing for the fair share.
pub fn policy(base: HeadsPolicy) -> HeadsPolicy {
    HeadsPolicy {
        page: base.page.max(PAGE),
        keep_per_tenant: PAGE,
        min_age: MIN_AGE,
        reach_back: Some(REACH_BACK),
        late_reach: Some(LATE_REACH),
        ..base
    }
}

/// The heads' policy with the share on before a read has shown a tenant:
/// `base`, each read reaching back to the one before ([`REACH_BACK`]), so
/// that the first read to show tenants has seen everything written since
/// the read before it (a read of a page alone would leave what a burst
/// buried under it unseen, and the share's reads that follow reach back
/// only to it). It costs a page more only when more than a page arrived
/// between two reads.
pub fn untenanted(base: HeadsPolicy) -> HeadsPolicy {
    HeadsPolicy {
        reach_back: Some(REACH_BACK),
        late_reach: Some(LATE_REACH),
        ..base
    }
}

/// Entries per shard of an invocation's first read with the share on:
/// what a backlog holds under another tenant's newer tasks (kept in view
/// by the invocation before, up to [`PAGE`] per tenant, or there before
/// the invocation began) is seen once, then kept from read to read. It
/// costs what it reads: 0.5 read units on a short queue, about 2.5 under
/// a backlog, once per invocation.
pub const FIRST_READ_PAGE: usize = 100;

/// `current`, [`FIRST_READ_PAGE`] deep, for an invocation's first read.
pub fn first_read(current: HeadsPolicy) -> HeadsPolicy {
    HeadsPolicy {
        page: FIRST_READ_PAGE,
        ..current
    }
}

/// What a waiting tenant gives the next slot it gets: the index key the
/// share ranks it by, and, if it keeps up in LIFO order, the task (its
/// oldest of its first's priority); else its first in the claim order (in
/// FIFO order, its oldest already).
struct Gives {
    key: i64,
    id: Option<String>,
}

fn gives(
    heads: &ShardHeads,
    shares: &Shares,
    tenant: &str,
    taken: &HashSet<String>,
) -> Option<Gives> {
    if shares.gives_oldest(tenant) {
        heads.tenant_last(tenant, taken).map(|c| Gives {
            key: c.claimable_at,
            id: Some(c.task_id.clone()),
        })
    } else {
        heads
            .tenant_first(tenant, taken)
            .map(|key| Gives { key, id: None })
    }
}

/// Whether `heads` must be read again before [`take`]: they are older than
/// [`FRESH`] at `now`, and would give a slot to a tenant that is not
/// favoured. Decided on copies: nothing is taken.
pub fn needs_fresh_heads(
    heads: &ShardHeads,
    want: usize,
    exclude: &HashSet<String>,
    ledger: &Ledger,
    now: std::time::Instant,
) -> bool {
    if heads.age(now).is_none_or(|age| age < FRESH) {
        return false;
    }
    let (mut heads, mut ledger) = (heads.clone(), ledger.clone());
    take_marked(&mut heads, want, exclude, &mut ledger).1
}

/// Up to `want` candidates of `heads` by the fair share: each free slot
/// goes to the waiting tenant that [`Shares::pick`] names, and takes that
/// tenant's first candidate in the claim order (its newest; its oldest of
/// that priority if it keeps up). The tenants' candidates are found once;
/// after each slot, only the served tenant's is looked up again.
pub fn take(
    heads: &mut ShardHeads,
    want: usize,
    exclude: &HashSet<String>,
    ledger: &mut Ledger,
) -> Vec<Candidate> {
    take_marked(heads, want, exclude, ledger).0
}

/// As [`take`], and whether a slot went to a tenant that is not favoured.
fn take_marked(
    heads: &mut ShardHeads,
    want: usize,
    exclude: &HashSet<String>,
    ledger: &mut Ledger,
) -> (Vec<Candidate>, bool) {
    let now = super::clock::now_ms();
    let mut to_unfavoured = false;
    let mut taken = exclude.clone();
    let seen = heads.tenant_heads(&taken);
    let waiting: HashMap<String, usize> =
        seen.iter().map(|(t, h)| (t.clone(), h.waiting)).collect();
    let flooding = ledger.flooding(&waiting);
    let quiet_oldest = seen
        .iter()
        .filter(|(t, _)| !flooding.contains(*t))
        .map(|(_, h)| now.saturating_sub(h.oldest_ms))
        .max();
    let keeping = keeping_up(&waiting, &flooding);
    ledger.observe(flooding, quiet_oldest);
    let mut shares = ledger
        .shares(seen.keys().map(String::as_str), now)
        .with_keeping_up(keeping);
    let mut next: HashMap<String, Gives> = seen
        .into_keys()
        .filter_map(|t| Some((t.clone(), gives(heads, &shares, &t, &taken)?)))
        .collect();
    let mut out: Vec<Candidate> = Vec::with_capacity(want);
    while out.len() < want {
        let picked = shares.pick(next.iter().map(|(t, g)| (t.as_str(), g.key)));
        let Some((tenant, id)) = picked.map(|t| (t.to_owned(), next[t].id.clone())) else {
            break;
        };
        let mut got = heads.take_by(1, &taken, |c| match &id {
            Some(id) => c.task_id == *id,
            None => c.tenant_name() == tenant,
        });
        if got.is_empty() && id.is_some() {
            // Its oldest sits behind a cut-short shard's end, which the
            // merge does not pass while that shard's newer candidates are
            // used up: its first, rather than no slot at all.
            got = heads.take_by(1, &taken, |c| c.tenant_name() == tenant);
        }
        match got.into_iter().next() {
            Some(c) => {
                to_unfavoured |= !shares.favoured(&tenant);
                shares.book(&tenant);
                taken.insert(c.task_id.clone());
                out.push(c);
                match gives(heads, &shares, &tenant, &taken) {
                    Some(g) => next.insert(tenant, g),
                    None => next.remove(&tenant),
                };
            }
            // Its candidate sits behind a cut-short shard's end.
            None => {
                next.remove(&tenant);
            }
        }
    }
    (out, to_unfavoured)
}

#[cfg(test)]
mod tests {
    use super::ledger::tests::ran;
    use super::*;
    use lifo_core::Order;
    use lifo_core::now_ms;
    use lifo_core::priority::Priority;
    use std::time::Instant;

    fn entry(id: &str, tenant: &str, at_ms: u64) -> Candidate {
        Candidate {
            tenant: Some(tenant.into()),
            ..Candidate::pending(id, 0, Priority::Normal.key(at_ms))
        }
    }

    fn heads(entries: Vec<Candidate>, read_at: Instant) -> ShardHeads {
        let mut h = ShardHeads::new(Order::Lifo, vec![0], policy(HeadsPolicy::new(1, 5)));
        h.replace(vec![(entries, true)], read_at);
        h
    }

    /// A flood of 20 (newest `now - 50`) in shard 0, cut short or not,
    /// and in `quiet_shard` a quiet tenant's two (`quiet_at`, and 2 s old)
    /// and one of another's: the flood floods, the other two keep up.
    fn flood_and_two_keeping_up(order: Order, quiet_at: u64, cut_short: bool) -> ShardHeads {
        let now = now_ms();
        let sorted = |mut items: Vec<Candidate>| {
            items.sort_by_key(|c| c.claimable_at);
            if order.newest_first() {
                items.reverse();
            }
            items
        };
        let flood: Vec<Candidate> = (0..20)
            .map(|i| entry(&format!("f{i:02}"), "flood", now - 50 - i))
            .collect();
        let quiet = vec![
            entry("q-new", "quiet", quiet_at),
            entry("q-old", "quiet", now - 2_000),
            entry("r", "other", now - 300),
        ];
        let mut h = ShardHeads::new(order, vec![0, 1], policy(HeadsPolicy::new(2, 5)));
        h.replace(
            vec![(sorted(flood), !cut_short), (sorted(quiet), true)],
            Instant::now(),
        );
        h
    }

    #[test]
    fn a_tenant_that_keeps_up_gives_its_oldest_in_either_order() {
        let none = HashSet::new();
        for order in [Order::Lifo, Order::Fifo] {
            let mut h = flood_and_two_keeping_up(order, now_ms() - 100, false);
            let mut ledger = Ledger::new(None).in_order(order);
            let got = take(&mut h, 1, &none, &mut ledger);
            assert_eq!(got[0].task_id, "q-old", "{order:?}");
        }
    }

    #[test]
    fn a_tenant_whose_oldest_is_out_of_reach_gives_its_first() {
        // Shard 0 is cut short: the merge cannot pass its flood to q-old
        // (older than all of it), but q-new (newer) it reaches.
        let mut h = flood_and_two_keeping_up(Order::Lifo, now_ms() - 10, true);
        let got = take(&mut h, 1, &HashSet::new(), &mut Ledger::new(None));
        assert_eq!(got[0].task_id, "q-new");
    }

    #[test]
    fn a_slot_for_the_tenant_at_the_top_waits_for_fresh_heads_a_favoured_one_does_not() {
        let now = now_ms();
        let mut ledger = Ledger::new(None);
        ran(&mut ledger, "flood", 30, now - 2_000);
        ran(&mut ledger, "quiet", 1, now - 2_000);
        let none = HashSet::new();
        let read_at = Instant::now();
        // Only the flood waits: its slot wants heads at most FRESH old.
        let h = heads(vec![entry("f1", "flood", now - 10)], read_at);
        assert!(needs_fresh_heads(&h, 1, &none, &ledger, read_at + FRESH));
        assert!(!needs_fresh_heads(
            &h,
            1,
            &none,
            &ledger,
            read_at + FRESH / 2
        ));
        // A quiet task waits: the slot goes to it from the heads in hand.
        let h = heads(
            vec![
                entry("f1", "flood", now - 10),
                entry("q1", "quiet", now - 500),
            ],
            read_at,
        );
        assert!(!needs_fresh_heads(&h, 1, &none, &ledger, read_at + FRESH));
        // Two slots: the second goes to the flood, so read first.
        assert!(needs_fresh_heads(&h, 2, &none, &ledger, read_at + FRESH));
        // Deciding took nothing.
        let mut h = h;
        let got: Vec<String> = take(&mut h, 2, &none, &mut ledger)
            .into_iter()
            .map(|c| c.task_id)
            .collect();
        assert_eq!(got, ["q1", "f1"]);
    }
}
