//! A fair share per tenant, as a layer: when several tenants have work,
//! each free slot goes to one waiting tenant ([`Shares::pick`]), which
//! gives its newest task. A tenant served less in the last [`WINDOW`] than
//! the most served one goes first (the one that waited longest first), so
//! a flooding tenant gets what the others leave and no slot idles; while a
//! tenant floods, one with few waiting keeps up and gives its oldest
//! ([`keeping_up`]); past its share of the rate limit a tenant goes last,
//! and at its cap ([`Cap`]) it gets no slot. Priorities come first. Tasks
//! without a tenant pick as the inner selection does.
//!
//! Once a read shows a tenant, the reads change ([`tenanted`]): pages of
//! [`PAGE`], each reaching back to the read before ([`reach`]), each
//! tenant's candidates carried from read to read ([`tenants::carry`]), and
//! a fresh read before a slot goes to a tenant not favoured ([`FRESH`]).
//! An invocation's first read goes [`FIRST_READ_PAGE`] deep, and service
//! is handed to the next invocation ([`handover`]).

mod handover;
mod ledger;
mod reach;
mod tenants;

pub use handover::{Handed, MAX_BYTES, MAX_IN_VIEW_BYTES, Served};
pub use ledger::{
    Cap, FEW_WAITING, Fairness, Ledger, Shares, WINDOW, flooding, keeping_up, keeping_up_within,
};
pub use reach::{LATE_WINDOW, LateReach, MAX_MARGIN, Reach};
pub use tenants::{TenantHead, any_tenant, tenant_heads, tenant_of};

use super::heads::{Due, Heads, HeadsPolicy};
use super::{Ask, Event, Handover, Ids, Purpose, Read, Select, Setup, Tally, Tuning};
use lifo_core::Candidate;
use std::collections::HashMap;
use std::time::Duration;

/// Entries per shard per read once tenants are seen (20 entries with a
/// tenant name fit in 0.5 read units), and candidates of one tenant
/// carried from read to read at most.
pub const PAGE: usize = 20;

/// Heads that served a claim are read again once this old.
pub const MIN_AGE: Duration = Duration::from_millis(250);

/// Heads older than this are read again before a slot goes to a tenant
/// not favoured: another tenant's newest task is seen first.
pub const FRESH: Duration = Duration::from_millis(50);

/// Each read reaches back to the read before, less this margin.
pub const REACH_BACK: Duration = Duration::from_millis(200);

/// Once a second a read reaches six seconds back, so a task the index shows
/// late is still seen: a create request's chunks share the time it began,
/// and an index propagates after its table (within a second, later under
/// load).
pub const LATE_REACH: LateReach = LateReach {
    every: Duration::from_secs(1),
    reach: Duration::from_secs(6),
};

/// Entries per shard of an invocation's first read.
pub const FIRST_READ_PAGE: usize = 100;

/// The heads' policy once tasks with a tenant are seen.
pub fn tenanted(base: HeadsPolicy) -> HeadsPolicy {
    tenanted_by(base, &Tuning::default())
}

/// [`tenanted`] with `tuning`'s page and age.
fn tenanted_by(base: HeadsPolicy, tuning: &Tuning) -> HeadsPolicy {
    HeadsPolicy {
        page: base.page.max(tuning.page),
        min_age: tuning.min_age,
        ..base
    }
}

/// The fair share around an inner selection.
pub struct FairShare {
    inner: Box<dyn Select>,
    ledger: Ledger,
    /// The heads' policy the stack began with.
    base: HeadsPolicy,
    /// The share's reads are on (a read showed a tenant, or a handover).
    tenanted: bool,
    /// The first read is to come: it goes [`FIRST_READ_PAGE`] deep.
    first_read: bool,
    reach: Reach,
    tuning: Tuning,
}

impl FairShare {
    /// The share for `setup` at `now`, with what the invocation before
    /// handed over.
    pub fn new(
        inner: Box<dyn Select>,
        setup: &Setup<'_>,
        handed: Option<Handed>,
        now: u64,
    ) -> Self {
        let cap = setup
            .tenant_max_in_flight
            .map(|n| Cap::new(n, setup.capacity, setup.per_second));
        let t = setup.tuning;
        let mut share = Self {
            ledger: Ledger::new(setup.per_second)
                .in_order(inner.heads().order())
                .with_cap(cap)
                .with_window(t.window),
            base: inner.heads().policy(),
            tenanted: false,
            first_read: true,
            reach: Reach::new(t.reach_back, t.late_reach).with_limits(t.late_window, t.max_margin),
            inner,
            tuning: t,
        };
        let mut policy = share.base;
        if let Some(h) = handed {
            share.ledger.take_over(&h.served, h.at);
            share.tenanted = true;
            policy = tenanted_by(share.base, &t);
            share.reach.remember(h.in_view.iter(), now);
            share.inner.heads_mut().put_back(h.in_view);
        }
        policy.page = policy.page.max(t.first_read_page);
        share.inner.heads_mut().set_policy(policy);
        share
    }

    /// Whether the heads are [`FRESH`] old at `now` and a slot of `ask`
    /// would go to a tenant not favoured (decided on copies).
    fn needs_fresh_heads(&self, ask: &Ask<'_>, now: u64) -> bool {
        let heads = self.inner.heads();
        if heads.age(now).is_none_or(|age| age < self.tuning.fresh) {
            return false;
        }
        let (mut heads, mut ledger) = (heads.clone(), self.ledger.clone());
        take(
            &mut heads,
            ask,
            &mut |_| true,
            &mut ledger,
            &self.tuning,
            now,
        )
        .1
    }

    /// After a read of the heads: the share's reads once one `showed` a
    /// tenant; after the first, pages of the usual depth.
    fn after_read(&mut self, showed: bool) {
        if !self.tenanted && showed {
            self.tenanted = true;
            self.first_read = false;
            self.inner
                .heads_mut()
                .set_policy(tenanted_by(self.base, &self.tuning));
        } else if self.first_read && self.inner.heads().reads() == 1 {
            self.first_read = false;
            let policy = match self.tenanted {
                true => tenanted_by(self.base, &self.tuning),
                false => self.base,
            };
            self.inner.heads_mut().set_policy(policy);
        }
    }
}

/// What a tenant gives its next slot: the key it ranks by, and its oldest
/// task if it gives that.
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

/// Up to `ask.want` candidates of `pool` (the inner selection, or a copy of
/// its heads) by the share at `now`, and whether a slot went to a tenant
/// not favoured.
fn take(
    pool: &mut dyn Select,
    ask: &Ask<'_>,
    admit: &mut dyn FnMut(&Candidate) -> bool,
    ledger: &mut Ledger,
    tuning: &Tuning,
    now: u64,
) -> (Vec<Candidate>, bool) {
    let mut to_unfavoured = false;
    let mut taken = ask.exclude.clone();
    let seen = tenant_heads(pool.heads(), &taken);
    let waiting: HashMap<String, usize> =
        seen.iter().map(|(t, h)| (t.clone(), h.waiting)).collect();
    let flooding = ledger.flooding(&waiting);
    let quiet_oldest = seen
        .iter()
        .filter(|(t, _)| !flooding.contains(*t))
        .map(|(_, h)| now.saturating_sub(h.oldest_ms))
        .max();
    let keeping = keeping_up_within(&waiting, &flooding, tuning.few_waiting);
    ledger.observe(flooding, quiet_oldest);
    let mut shares = ledger
        .shares(seen.keys().map(String::as_str), now)
        .with_keeping_up(keeping);
    let mut next: HashMap<String, Gives> = seen
        .into_keys()
        .filter_map(|t| Some((t.clone(), gives(pool.heads(), &shares, &t, &taken)?)))
        .collect();
    let mut out: Vec<Candidate> = Vec::with_capacity(ask.want);
    while out.len() < ask.want {
        let picked = shares.pick(next.iter().map(|(t, g)| (t.as_str(), g.key)));
        let Some((tenant, id)) = picked.map(|t| (t.to_owned(), next[t].id.clone())) else {
            break;
        };
        let one = |taken| Ask::new(1, taken);
        let mut got = pool.pick(
            &one(&taken),
            &mut |c| {
                admit(c)
                    && match &id {
                        Some(id) => c.task_id == *id,
                        None => tenant_of(c) == tenant,
                    }
            },
            now,
        );
        if got.is_empty() && id.is_some() {
            // Its oldest sits past a cut-short shard's end: its first.
            let theirs = &mut |c: &Candidate| admit(c) && tenant_of(c) == tenant;
            got = pool.pick(&one(&taken), theirs, now);
        }
        match got.into_iter().next() {
            Some(c) => {
                to_unfavoured |= !shares.favoured(&tenant);
                shares.book(&tenant);
                taken.insert(c.task_id.clone());
                out.push(c);
                match gives(pool.heads(), &shares, &tenant, &taken) {
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

impl Select for FairShare {
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
            &mut *self.inner,
            ask,
            admit,
            &mut self.ledger,
            &self.tuning,
            now,
        )
        .0
    }

    fn tell(&mut self, event: Event<'_>, now: u64) {
        match event {
            Event::Read { read, heads, .. } if matches!(read.purpose, Purpose::Heads { .. }) => {
                let entries = || heads.iter().flat_map(|(items, _)| items);
                let showed = entries().any(|c| c.tenant.is_some());
                if read.purpose == (Purpose::Heads { whole: true }) {
                    self.reach.learn(heads, self.inner.heads().read_at(), now);
                    let before = self.tenanted.then(|| self.inner.heads().each().to_vec());
                    self.inner.tell(event, now);
                    if let Some(before) = before {
                        tenants::carry(self.inner.heads_mut(), before, self.tuning.page, now);
                    }
                    self.reach.read_taken(now);
                } else {
                    self.reach.remember(entries(), now);
                    self.inner.tell(event, now);
                }
                self.after_read(showed);
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
        let in_view = handover::in_view(
            self.inner.heads(),
            exclude,
            &self.ledger,
            self.tuning.page,
            now,
        );
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
