//! The claim policy: which claimable tasks fill the claim loop's free
//! slots. The protocol (what a claim writes, and when it may) is
//! `lifo-core`'s; this is the choosing.
//!
//! One trait, [`Select`], is all the claim loop knows. A selection says
//! what it must read before it can pick ([`Select::next_read`]), picks
//! ([`Select::pick`]), and is told what happened ([`Select::tell`]): a
//! read's entries, a start, an end, a pick not started. Time is an
//! argument (epoch ms), never read inside a policy.
//!
//! Orders are the bottom of a stack: [`Heads::lifo`] and [`Heads::fifo`]
//! merge the shards' [`heads`] newest or oldest first. Layers wrap an inner
//! selection, one policy each: [`priorities::Priorities`] (an out-of-order
//! pick never passes a higher priority), [`fair::FairShare`] (a fair share
//! per tenant, with its cap) and [`deadline::DeadlineLane`] (the adaptive
//! order). [`stack`] composes them, once, from the configuration.

pub mod deadline;
pub mod fair;
pub mod heads;
pub mod priorities;
pub mod tuning;

pub use tuning::Tuning;

use heads::{Heads, HeadsPolicy};
use lifo_core::{Candidate, Order};
use std::collections::HashSet;

/// Task ids.
pub type Ids = HashSet<String>;

/// What a refill asks for.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// Free slots to fill.
    pub want: usize,
    /// Ids not to pick: running, or refused in this invocation.
    pub exclude: &'a Ids,
    /// Reads already made for this refill.
    pub reads: usize,
}

impl<'a> Ask<'a> {
    /// `want` candidates, none in `exclude`, before any read.
    pub fn new(want: usize, exclude: &'a Ids) -> Self {
        Self {
            want,
            exclude,
            reads: 0,
        }
    }
}

/// Who asked for a read, and so who takes its entries in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The heads: every shard (`whole`), or the cut-short ones that ran out.
    Heads { whole: bool },
    /// A layer's own read, named: only that layer takes it in.
    Layer(&'static str),
}

/// A read of the claimable index: `page` entries of each of `shards` in
/// `order` (with `since_ms`, on until those since then are all read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub order: Order,
    pub shards: Vec<u32>,
    pub page: usize,
    pub since_ms: Option<u64>,
    pub purpose: Purpose,
}

/// What the claim loop tells a selection.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A read it asked for, sent at `sent_ms`: per shard of `read.shards`,
    /// its entries in order and whether that was all of it.
    Read {
        read: &'a Read,
        sent_ms: u64,
        heads: &'a [(Vec<Candidate>, bool)],
    },
    /// A claim of this candidate was sent.
    Started(&'a Candidate),
    /// The handling of a claimed task ended; `ran`: it ran (not a claim
    /// refused).
    Ended { task_id: &'a str, ran: bool },
    /// Picked, and not started: the rate limit's bucket ran dry.
    NotStarted(&'a Candidate),
}

/// What an invocation's selection reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Claims the deadline lane gave ahead of the order.
    pub deadline_starts: usize,
    /// What the fair share saw, with it on.
    pub fairness: Option<fair::Fairness>,
}

/// What a selection hands to the next invocation of the tail-call loop:
/// each layer's value under its name, opaque to everything else.
pub type Handover = serde_json::Map<String, serde_json::Value>;

/// A claim policy: an order, or a layer around an inner selection.
pub trait Select: Send {
    /// What must be read at `now` before [`Select::pick`] can answer `ask`;
    /// asked again after each read (`ask.reads` counts them) until none.
    fn next_read(&mut self, ask: &Ask<'_>, now: u64) -> Option<Read>;

    /// Up to `ask.want` candidates that `admit` accepts, none in
    /// `ask.exclude`, in this selection's order.
    fn pick(
        &mut self,
        ask: &Ask<'_>,
        admit: &mut dyn FnMut(&Candidate) -> bool,
        now: u64,
    ) -> Vec<Candidate>;

    /// Takes in what happened at `now`.
    fn tell(&mut self, event: Event<'_>, now: u64);

    /// Whether an outer layer may start a candidate ahead of this
    /// selection's order (none in `exclude` counted as waiting).
    fn allows(&self, _exclude: &Ids) -> Box<dyn Fn(&Candidate) -> bool + '_> {
        Box::new(|_| true)
    }

    /// The heads every order reads through.
    fn heads(&self) -> &Heads;
    fn heads_mut(&mut self) -> &mut Heads;

    /// Adds what the next invocation needs to `out` (candidates in
    /// `exclude` are claimed: not handed on).
    fn hand_over(&mut self, _exclude: &Ids, _now: u64, _out: &mut Handover) {}

    /// Adds what this invocation's selection did to `out`.
    fn tally(&self, _out: &mut Tally) {}
}

/// What a stack is built from: the queue's settings and the invocation's
/// share of the runner.
#[derive(Debug, Clone)]
pub struct Setup<'a> {
    pub order: Order,
    pub shards: Vec<u32>,
    /// Slots: tasks at once.
    pub capacity: usize,
    /// Starts a second, if rate limited.
    pub per_second: Option<u32>,
    pub fair_share: bool,
    /// Running tasks per tenant at most (the fair share's cap).
    pub tenant_max_in_flight: Option<usize>,
    /// What the invocation before handed over.
    pub handover: Option<&'a Handover>,
    /// The layers' constants ([`Tuning::default`] but in the lab).
    pub tuning: Tuning,
}

/// The stack for `setup` at `now`: an order, then each layer the settings
/// turn on, innermost first. A new order is a file and a line here.
pub fn stack(setup: &Setup<'_>, now: u64) -> Box<dyn Select> {
    let (shards, policy) = (
        setup.shards.clone(),
        HeadsPolicy::tuned(setup.shards.len(), setup.capacity, &setup.tuning),
    );
    let base = match setup.order {
        Order::Lifo | Order::Adaptive => Heads::lifo(shards, policy),
        Order::Fifo => Heads::fifo(shards, policy),
    };
    let mut s: Box<dyn Select> = Box::new(priorities::Priorities::new(Box::new(base)));
    if setup.fair_share {
        let handed = setup.handover.and_then(fair::Handed::from_handover);
        s = Box::new(fair::FairShare::new(s, setup, handed, now));
    }
    if setup.order == Order::Adaptive {
        s = Box::new(
            deadline::DeadlineLane::new(s, setup.capacity, setup.per_second)
                .with_tuning(setup.tuning),
        );
    }
    s
}
