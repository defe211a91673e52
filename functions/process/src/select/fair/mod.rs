//! A fair share per tenant, as a layer: when several tenants have work,
//! each free slot goes to one waiting tenant ([`Shares::pick`]), which
//! gives its newest task:
//! - a tenant served less in the last [`WINDOW`] than the most served one
//!   goes before one at the top, the one that has waited longest first:
//!   the tenant that floods gets what the others leave, and no slot idles
//!   while anyone has work;
//! - while a tenant floods ([`flooding`]), one with few waiting keeps up
//!   ([`keeping_up`]): it goes first too, and gives its oldest task;
//! - with a rate limit, a tenant past its share of it goes last; with the
//!   cap ([`Cap`]), a tenant at its cap gets no slot, free or not;
//! - priorities come first; a tenant alone gets everything.
//!
//! A task's `tenant` is projected into the claimable index, so each
//! candidate carries it at no extra read; a queue whose tasks carry none
//! picks as the inner selection does. Once a read shows a tenant, the
//! reads change ([`tenanted`]): pages of [`PAGE`] per shard, each reaching
//! back to the read before ([`reach`]), each tenant's candidates carried
//! from read to read ([`tenants::carry`]), and the heads read again before
//! a slot goes to a tenant that is not favoured once [`FRESH`] old. An
//! invocation's first read goes [`FIRST_READ_PAGE`] deep. Service is
//! counted in starts, and handed to the next invocation ([`handover`]).

mod handover;
mod ledger;
mod reach;
mod tenants;

pub use handover::{Handed, MAX_BYTES, MAX_IN_VIEW_BYTES, Served};
pub use ledger::{Cap, FEW_WAITING, Fairness, Ledger, Shares, WINDOW, flooding, keeping_up};
pub use reach::{LATE_WINDOW, LateReach, MAX_MARGIN, Reach};
pub use tenants::{TenantHead, any_tenant, tenant_heads, tenant_of};

use super::heads::{Due, Heads, HeadsPolicy};
use super::{Ask, Event, Handover, Ids, Purpose, Read, Select, Setup, Tally};
use lifo_core::Candidate;
use std::collections::HashMap;
use std::time::Duration;

/// Entries per shard per read once tenants are seen (an entry with a
/// tenant name is about 170 bytes: 20 fit in 0.5 read units), and the most
/// candidates of one tenant carried from read to read.
pub const PAGE: usize = 20;

/// Heads that served a claim are read again once this old (without the
/// share, 100 ms): a slot for a favoured tenant is served from the heads
/// in hand.
pub const MIN_AGE: Duration = Duration::from_millis(250);

/// Heads older than this are read again before a slot goes to a tenant
/// that is not favoured: a task another tenant wrote a moment ago is seen
/// before the flood gets the slot.
pub const FRESH: Duration = Duration::from_millis(50);

/// Each read reaches back to the read before, less this margin (the read's
/// own flight, and a write's between its stamp and its index entry).
pub const REACH_BACK: Duration = Duration::from_millis(200);

/// Once a second a read reaches two seconds back.
pub const LATE_REACH: LateReach = LateReach {
    every: Duration::from_secs(1),
    reach: Duration::from_secs(2),
};

/// Entries per shard of an invocation's first read: what a backlog holds
/// under another tenant's newer tasks is seen once, then carried.
pub const FIRST_READ_PAGE: usize = 100;

/// The heads' policy once tasks with a tenant are seen.
pub fn tenanted(base: HeadsPolicy) -> HeadsPolicy {
    HeadsPolicy {
        page: base.page.max(PAGE),
        min_age: MIN_AGE,
        ..base
    }
}

/// The fair share around an inner selection.
pub struct FairShare<S> {
    inner: S,
    ledger: Ledger,
    /// The heads' policy the stack began with.
    base: HeadsPolicy,
    /// The share's reads are on: a read showed a tenant, or the invocation
    /// before handed over.
    tenanted: bool,
    /// A read has shown a task with a tenant.
    seen_tenant: bool,
    /// The first read is to come: it goes [`FIRST_READ_PAGE`] deep.
    first_read: bool,
    reach: Reach,
}

impl<S: Select> FairShare<S> {
    /// The share for `setup` at `now`, with what the invocation before
    /// handed over.
    pub fn new(inner: S, setup: &Setup<'_>, handed: Option<Handed>, now: u64) -> Self {
        let cap = setup
            .tenant_max_in_flight
            .map(|n| Cap::new(n, setup.capacity, setup.per_second));
        let mut share = Self {
            ledger: Ledger::new(setup.per_second)
                .in_order(inner.heads().order())
                .with_cap(cap),
            base: inner.heads().policy(),
            tenanted: false,
            seen_tenant: false,
            first_read: true,
            reach: Reach::new(REACH_BACK, LATE_REACH),
            inner,
        };
        let mut policy = share.base;
        if let Some(h) = handed {
            share.ledger.take_over(&h.served, h.at);
            share.tenanted = true;
            policy = tenanted(share.base);
            share.reach.remember(h.in_view.iter(), now);
            share.inner.heads_mut().put_back(h.in_view);
        }
        policy.page = FIRST_READ_PAGE;
        share.inner.heads_mut().set_policy(policy);
        share
    }

    /// Whether the heads must be read again before a pick for `ask` at
    /// `now`: they are [`FRESH`] old, and a slot would go to a tenant that
    /// is not favoured. Decided on copies.
    fn needs_fresh_heads(&self, ask: &Ask<'_>, now: u64) -> bool {
        let heads = self.inner.heads();
        if heads.age(now).is_none_or(|age| age < FRESH) {
            return false;
        }
        let (mut heads, mut ledger) = (heads.clone(), self.ledger.clone());
        take(&mut heads, ask, &mut |_| true, &mut ledger, now).1
    }

    /// After a read of the heads: the share's reads once a read showed a
    /// tenant; after the first read, pages of the usual depth.
    fn after_read(&mut self) {
        if !self.tenanted && self.seen_tenant {
            self.tenanted = true;
            self.first_read = false;
            self.inner.heads_mut().set_policy(tenanted(self.base));
        } else if self.first_read && self.inner.heads().reads() == 1 {
            self.first_read = false;
            let policy = match self.tenanted {
                true => tenanted(self.base),
                false => self.base,
            };
            self.inner.heads_mut().set_policy(policy);
        }
    }
}

/// What the share takes from: the inner selection, or a copy of its heads.
trait Pool {
    fn view(&self) -> &Heads;
    fn take(
        &mut self,
        want: usize,
        exclude: &Ids,
        admit: &mut dyn FnMut(&Candidate) -> bool,
    ) -> Vec<Candidate>;
}

impl Pool for Heads {
    fn view(&self) -> &Heads {
        self
    }
    fn take(
        &mut self,
        want: usize,
        exclude: &Ids,
        admit: &mut dyn FnMut(&Candidate) -> bool,
    ) -> Vec<Candidate> {
        self.take_by(want, exclude, admit)
    }
}

/// An inner selection picking at a time.
struct Picking<'a, S>(&'a mut S, u64);

impl<S: Select> Pool for Picking<'_, S> {
    fn view(&self) -> &Heads {
        self.0.heads()
    }
    fn take(
        &mut self,
        want: usize,
        exclude: &Ids,
        admit: &mut dyn FnMut(&Candidate) -> bool,
    ) -> Vec<Candidate> {
        let ask = Ask {
            want,
            exclude,
            reads: 0,
        };
        self.0.pick(&ask, admit, self.1)
    }
}

/// What a waiting tenant gives its next slot: the index key it is ranked
/// by, and, if it gives its oldest, that task.
struct Gives {
    key: i64,
    id: Option<String>,
}

fn gives(heads: &Heads, shares: &Shares, tenant: &str, taken: &Ids) -> Option<Gives> {
    if shares.gives_oldest(tenant) {
        tenants::tenant_last(heads, tenant, taken).map(|c| Gives {
            key: c.claimable_at,
            id: Some(c.task_id.clone()),
        })
    } else {
        tenants::tenant_first(heads, tenant, taken).map(|key| Gives { key, id: None })
    }
}

/// Up to `ask.want` candidates of `pool` by the share at `now` (each that
/// `admit` accepts), and whether a slot went to a tenant not favoured.
/// The tenants' candidates are found once; after each slot, only the
/// served tenant's again.
fn take(
    pool: &mut impl Pool,
    ask: &Ask<'_>,
    admit: &mut dyn FnMut(&Candidate) -> bool,
    ledger: &mut Ledger,
    now: u64,
) -> (Vec<Candidate>, bool) {
    let mut to_unfavoured = false;
    let mut taken = ask.exclude.clone();
    let seen = tenant_heads(pool.view(), &taken);
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
        .filter_map(|t| Some((t.clone(), gives(pool.view(), &shares, &t, &taken)?)))
        .collect();
    let mut out: Vec<Candidate> = Vec::with_capacity(ask.want);
    while out.len() < ask.want {
        let picked = shares.pick(next.iter().map(|(t, g)| (t.as_str(), g.key)));
        let Some((tenant, id)) = picked.map(|t| (t.to_owned(), next[t].id.clone())) else {
            break;
        };
        let mut got = pool.take(1, &taken, &mut |c| {
            admit(c)
                && match &id {
                    Some(id) => c.task_id == *id,
                    None => tenant_of(c) == tenant,
                }
        });
        if got.is_empty() && id.is_some() {
            // Its oldest sits past a cut-short shard's end: its first.
            got = pool.take(1, &taken, &mut |c| admit(c) && tenant_of(c) == tenant);
        }
        match got.into_iter().next() {
            Some(c) => {
                to_unfavoured |= !shares.favoured(&tenant);
                shares.book(&tenant);
                taken.insert(c.task_id.clone());
                out.push(c);
                match gives(pool.view(), &shares, &tenant, &taken) {
                    Some(g) => next.insert(tenant, g),
                    None => next.remove(&tenant),
                };
            }
            // Its candidate sits past a cut-short shard's end.
            None => {
                next.remove(&tenant);
            }
        }
    }
    (out, to_unfavoured)
}

impl<S: Select> Select for FairShare<S> {
    fn next_read(&mut self, ask: &Ask<'_>, now: u64) -> Option<Read> {
        let mut read = self.inner.next_read(ask, now);
        if read.is_none()
            && ask.reads == 0
            && any_tenant(self.inner.heads())
            && self.needs_fresh_heads(ask, now)
        {
            read = self.inner.heads().read_of(Due::All);
        }
        if let Some(r) = &mut read
            && matches!(r.purpose, Purpose::Heads { .. })
        {
            r.since_ms = self.reach.since(self.inner.heads().read_at(), now);
        }
        read
    }

    fn pick(
        &mut self,
        ask: &Ask<'_>,
        admit: &mut dyn FnMut(&Candidate) -> bool,
        now: u64,
    ) -> Vec<Candidate> {
        if !any_tenant(self.inner.heads()) {
            return self.inner.pick(ask, admit, now);
        }
        take(
            &mut Picking(&mut self.inner, now),
            ask,
            admit,
            &mut self.ledger,
            now,
        )
        .0
    }

    fn tell(&mut self, event: Event<'_>, now: u64) {
        match event {
            Event::Read { read, heads, .. } if matches!(read.purpose, Purpose::Heads { .. }) => {
                let entries = || heads.iter().flat_map(|(items, _)| items);
                self.seen_tenant |= entries().any(|c| c.tenant.is_some());
                if read.purpose == (Purpose::Heads { whole: true }) {
                    self.reach.learn(heads, self.inner.heads().read_at(), now);
                    let before = self.tenanted.then(|| self.inner.heads().each().to_vec());
                    self.inner.tell(event, now);
                    if let Some(before) = before {
                        tenants::carry(self.inner.heads_mut(), before, PAGE, now);
                    }
                    self.reach.read_taken(now);
                } else {
                    self.reach.remember(entries(), now);
                    self.inner.tell(event, now);
                }
                self.after_read();
            }
            Event::Started(c) => {
                self.ledger.start(&c.task_id, tenant_of(c), now);
                self.inner.tell(event, now);
            }
            Event::Ended { task_id, .. } => {
                self.ledger.end(task_id);
                self.inner.tell(event, now);
            }
            _ => self.inner.tell(event, now),
        }
    }

    /// Not a flooding tenant's candidate.
    fn allows(&self, exclude: &Ids) -> Box<dyn Fn(&Candidate) -> bool + '_> {
        let inner = self.inner.allows(exclude);
        let heads = self.inner.heads();
        // Found only once asked: most refills start nothing out of order.
        let flooding = std::cell::OnceCell::new();
        let exclude = exclude.clone();
        Box::new(move |c| {
            inner(c)
                && !flooding
                    .get_or_init(|| match any_tenant(heads) {
                        true => {
                            let seen = tenant_heads(heads, &exclude);
                            let waiting = seen.into_iter().map(|(t, h)| (t, h.waiting)).collect();
                            self.ledger.flooding(&waiting)
                        }
                        false => Default::default(),
                    })
                    .contains(tenant_of(c))
        })
    }

    fn heads(&self) -> &Heads {
        self.inner.heads()
    }

    fn heads_mut(&mut self) -> &mut Heads {
        self.inner.heads_mut()
    }

    fn hand_over(&mut self, exclude: &Ids, now: u64, out: &mut Handover) {
        let in_view = handover::in_view(self.inner.heads(), exclude, &self.ledger, now);
        let served = self.ledger.served(now);
        Handed {
            at: now,
            served,
            in_view,
        }
        .into_handover(out);
        self.inner.hand_over(exclude, now, out);
    }

    fn tally(&self, out: &mut Tally) {
        out.fairness = Some(self.ledger.fairness());
        self.inner.tally(out);
    }
}

#[cfg(test)]
mod tests;
