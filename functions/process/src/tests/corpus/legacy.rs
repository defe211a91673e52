//! The selection as it was before the seam: `select::refill` with the
//! heads, the fair share's ledger and the deadline lane threaded through,
//! set up and switched as `claim_loop.rs` did. It recorded the corpus.

use super::driver::Under;
use super::index::Index;
use super::script::{Config, Script};
use crate::select::deadline::Deadlines;
use crate::select::fair::{self, Ledger};
use crate::select::heads::{HeadsPolicy, ShardHeads};
use lifo_core::Candidate;
use lifo_lambda::notify::Served;
use std::collections::HashSet;

pub struct Legacy {
    order: lifo_core::Order,
    heads: ShardHeads,
    base: HeadsPolicy,
    fair: Option<Ledger>,
    lane: Option<Deadlines>,
    share: bool,
    tenanted: bool,
}

pub fn start(
    config: &Config,
    script: &Script,
    handover: Option<&serde_json::Value>,
    _now: u64,
) -> Box<dyn Under> {
    let capacity = script.slots;
    let base = HeadsPolicy::new(script.shards.len(), capacity);
    let mut heads = ShardHeads::new(config.order, script.shards.clone(), base);
    let mut tenanted = false;
    let mut fair_ledger = None;
    if config.share {
        let per_second = config.rate;
        let cap = config
            .cap
            .map(|n| fair::Cap::new(n as usize, capacity, per_second));
        let mut ledger = Ledger::new(per_second).in_order(config.order).with_cap(cap);
        if let Some(h) = handover {
            let at = h["at"].as_u64().unwrap_or(0);
            let served: Served = serde_json::from_value(h["served"].clone()).unwrap_or_default();
            let kept: Vec<Candidate> =
                serde_json::from_value(h["kept"].clone()).unwrap_or_default();
            ledger.take_over(&served, at);
            tenanted = true;
            heads.set_policy(fair::policy(base));
            heads.seed(kept);
        } else {
            heads.set_policy(fair::untenanted(base));
        }
        fair_ledger = Some(ledger);
        heads.set_policy(fair::first_read(heads.policy()));
    }
    let lane =
        (config.order == lifo_core::Order::Adaptive).then(|| Deadlines::new(capacity, config.rate));
    Box::new(Legacy {
        order: config.order,
        heads,
        base,
        fair: fair_ledger,
        lane,
        share: config.share,
        tenanted,
    })
}

impl Under for Legacy {
    fn refill(
        &mut self,
        index: &Index,
        want: usize,
        exclude: &HashSet<String>,
        horizon: u64,
    ) -> Vec<Candidate> {
        let picks = futures::executor::block_on(crate::select::refill(
            index,
            &mut self.heads,
            self.order,
            horizon,
            want,
            exclude,
            self.fair.as_mut(),
            self.lane.as_mut(),
        ))
        .unwrap_or_default();
        if self.share && !self.tenanted && self.heads.seen_tenant() {
            self.tenanted = true;
            self.heads.set_policy(fair::policy(self.base));
        } else if self.heads.reads() == 1 && self.heads.policy().page == fair::FIRST_READ_PAGE {
            self.heads.set_policy(match self.tenanted {
                true => fair::policy(self.base),
                false => fair::untenanted(self.base),
            });
        }
        picks
    }

    fn put_back(&mut self, back: Vec<Candidate>, _now: u64) {
        let mut to_heads = Vec::new();
        for c in back {
            match &mut self.lane {
                Some(lane) if lane.gave(&c.task_id) => lane.not_started(&c.task_id),
                _ => to_heads.push(c),
            }
        }
        self.heads.put_back(to_heads);
    }

    fn started(&mut self, c: &Candidate, now: u64) {
        if let Some(fair) = &mut self.fair {
            fair.start(&c.task_id, c.tenant_name(), now);
        }
        if let Some(lane) = &mut self.lane {
            lane.started(&c.task_id);
        }
    }

    fn ended(&mut self, id: &str, ran: bool, _now: u64) {
        if let Some(fair) = &mut self.fair {
            fair.end(id);
        }
        if let Some(lane) = &mut self.lane {
            lane.ended(id, ran);
        }
    }

    fn handover(&mut self, exclude: &HashSet<String>, now: u64) -> Option<serde_json::Value> {
        let ledger = self.fair.as_mut()?;
        let kept = fair::kept(&self.heads, exclude, ledger, now);
        let served = ledger.handover(now);
        (!served.is_empty() || !kept.is_empty())
            .then(|| serde_json::json!({"at": now, "served": served, "kept": kept}))
    }

    fn tally(&self) -> String {
        let lane = self.lane.as_ref().map_or(0, |l| l.starts);
        let fair = self.fair.as_ref().map(|l| l.fairness());
        match fair {
            Some(f) => format!(
                "lane {lane}, share {} starts, {} flooding, quiet oldest {:?}",
                f.starts, f.flooding_starts, f.quiet_oldest_age_ms
            ),
            None => format!("lane {lane}"),
        }
    }
}
