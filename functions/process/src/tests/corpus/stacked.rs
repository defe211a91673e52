//! The selection under test: the claim policy's stack, driven through
//! [`crate::reads::refill`] as the claim loop drives it.

use super::driver::Under;
use super::index::Index;
use super::script::{Config, Script};
use crate::select::{self, Event, Handover, Ids, Select, Setup, Tally};
use lifo_core::Candidate;

pub struct Stacked(Box<dyn Select>);

pub fn start(
    config: &Config,
    script: &Script,
    handover: Option<&serde_json::Value>,
    now: u64,
) -> Box<dyn Under> {
    let handover: Option<Handover> = handover.and_then(|v| v.as_object().cloned());
    let setup = Setup {
        order: config.order,
        shards: script.shards.clone(),
        capacity: script.slots,
        per_second: config.rate,
        fair_share: config.share,
        tenant_max_in_flight: config.cap.map(|n| n as usize),
        handover: handover.as_ref(),
        tuning: Default::default(),
    };
    Box::new(Stacked(select::stack(&setup, now)))
}

impl Under for Stacked {
    fn refill(
        &mut self,
        index: &Index,
        want: usize,
        exclude: &Ids,
        horizon: u64,
    ) -> Vec<Candidate> {
        let clock = || index.now();
        let refill = crate::reads::refill(&mut *self.0, index, (want, exclude), horizon, &clock);
        futures::executor::block_on(refill).unwrap_or_default()
    }

    fn put_back(&mut self, back: Vec<Candidate>, now: u64) {
        for c in &back {
            self.0.tell(Event::NotStarted(c), now);
        }
    }

    fn started(&mut self, c: &Candidate, now: u64) {
        self.0.tell(Event::Started(c), now);
    }

    fn ended(&mut self, id: &str, ran: bool, now: u64) {
        self.0.tell(Event::Ended { task_id: id, ran }, now);
    }

    fn handover(&mut self, exclude: &Ids, now: u64) -> Option<serde_json::Value> {
        let mut out = Handover::new();
        self.0.hand_over(exclude, now, &mut out);
        (!out.is_empty()).then_some(serde_json::Value::Object(out))
    }

    fn tally(&self) -> String {
        let mut t = Tally::default();
        self.0.tally(&mut t);
        let lane = t.deadline_starts;
        match t.fairness {
            Some(f) => format!(
                "lane {lane}, share {} starts, {} flooding, quiet oldest {:?}",
                f.starts, f.flooding_starts, f.quiet_oldest_age_ms
            ),
            None => format!("lane {lane}"),
        }
    }
}
