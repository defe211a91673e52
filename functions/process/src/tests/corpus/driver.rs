//! The claim loop's side of a scripted run: free slots, a refill, the
//! rate limit's starts, the claims, the ends and the tail calls, with the
//! selection under test doing the choosing ([`Under`]). What it picks and
//! reads is written down, one line per refill that read or picked.

use super::index::{Index, T0, rel};
use super::script::{Config, Op, Outcome, Script};
use lifo_core::Candidate;
use std::collections::{BTreeMap, HashSet};

/// A selection under test, as the claim loop drives it.
pub trait Under {
    /// Reads (through `index`) and picks up to `want`, none in `exclude`.
    fn refill(
        &mut self,
        index: &Index,
        want: usize,
        exclude: &HashSet<String>,
        horizon: u64,
    ) -> Vec<Candidate>;
    /// Picked, not started: the rate limit's bucket ran dry.
    fn put_back(&mut self, back: Vec<Candidate>, now: u64);
    fn started(&mut self, c: &Candidate, now: u64);
    fn ended(&mut self, id: &str, ran: bool, now: u64);
    /// What the next invocation is handed (none in `exclude`).
    fn handover(&mut self, exclude: &HashSet<String>, now: u64) -> Option<serde_json::Value>;
    /// What the invocation reports of its selection.
    fn tally(&self) -> String;
}

/// Starts a selection for `config` at `now`, with what the invocation
/// before handed over.
pub type Start = fn(&Config, &Script, Option<&serde_json::Value>, u64) -> Box<dyn Under>;

/// The largest TTL the queue allows (the reads' horizon).
const MAX_TTL_MS: u64 = 3_600_000;

struct Loop {
    under: Box<dyn Under>,
    /// Running: id → (start order, candidate).
    running: BTreeMap<String, (u64, Candidate)>,
    skip: HashSet<String>,
    in_flight: HashSet<String>,
    /// Ran and ended (what the report's claim list holds).
    ran: HashSet<String>,
    /// Claims refused, booked at the next refill (as the loop finds them).
    refused: Vec<String>,
    /// Each start: when it ends and how.
    ends: Vec<(u64, u64, String, Outcome)>,
    starts: u64,
}

/// Runs `script` under `config`: the transcript.
pub fn run(script: &Script, config: &Config, start: Start) -> Vec<String> {
    let mut index = Index::new(script.read_ms);
    index.advance_to(T0);
    let mut out = Vec::new();
    let mut l = Loop {
        under: start(config, script, None, T0),
        running: BTreeMap::new(),
        skip: HashSet::new(),
        in_flight: HashSet::new(),
        ran: HashSet::new(),
        refused: Vec::new(),
        ends: Vec::new(),
        starts: 0,
    };
    for event in &script.events {
        let at = T0 + event.at;
        l.ends_until(&mut index, at);
        index.advance_to(at);
        let now = index.now();
        match &event.op {
            Op::Put(specs) => {
                for s in specs {
                    index.put(s);
                }
            }
            Op::Remove(ids) => {
                for id in ids {
                    index.remove(id);
                }
            }
            Op::End { id, outcome } => {
                l.ends.retain(|e| e.2 != *id);
                l.end(&mut index, id, *outcome, now);
            }
            Op::Fill { tokens } => {
                if let Some(line) = l.fill(&mut index, script, *tokens) {
                    out.push(line);
                }
            }
            Op::Tail { hop } => {
                l.absorb_refused(now);
                let exclude: HashSet<String> = l
                    .skip
                    .iter()
                    .chain(&l.in_flight)
                    .chain(&l.ran)
                    .cloned()
                    .collect();
                let handover = l.under.handover(&exclude, now);
                let running: Vec<String> = l.running.keys().cloned().collect();
                for id in running {
                    l.end(&mut index, &id, Outcome::Ok, now);
                }
                l.ends.clear();
                out.push(format!("@{} tail: {}", rel(now), l.under.tally()));
                index.advance_to(now + hop);
                l.under = start(config, script, handover.as_ref(), index.now());
                l.skip.clear();
                l.in_flight.clear();
                l.ran.clear();
            }
        }
    }
    out.push(format!("end: {}", l.under.tally()));
    out
}

impl Loop {
    /// The runs that end by `at`, in time order.
    fn ends_until(&mut self, index: &mut Index, at: u64) {
        loop {
            self.ends.sort_by_key(|e| (e.0, e.1));
            let Some(first) = self.ends.first().filter(|e| e.0 <= at).cloned() else {
                return;
            };
            self.ends.remove(0);
            index.advance_to(first.0);
            self.end(index, &first.2, first.3, index.now());
        }
    }

    fn end(&mut self, index: &mut Index, id: &str, outcome: Outcome, now: u64) {
        if self.running.remove(id).is_none() {
            return;
        }
        index.end(id, outcome, now);
        self.in_flight.remove(id);
        self.ran.insert(id.to_owned());
        self.under.ended(id, true, now);
    }

    fn absorb_refused(&mut self, now: u64) {
        for id in std::mem::take(&mut self.refused) {
            self.in_flight.remove(&id);
            self.skip.insert(id.clone());
            self.under.ended(&id, false, now);
        }
    }

    fn fill(
        &mut self,
        index: &mut Index,
        script: &Script,
        tokens: Option<usize>,
    ) -> Option<String> {
        let at = index.now();
        self.absorb_refused(at);
        let free = script.slots - self.running.len().min(script.slots);
        if free == 0 {
            return None;
        }
        let exclude: HashSet<String> = self.skip.union(&self.in_flight).cloned().collect();
        let horizon = at.saturating_sub(MAX_TTL_MS);
        let mut picks = self.under.refill(index, free, &exclude, horizon);
        let reads = index.take_log();
        let granted = tokens.map_or(picks.len(), |t| t.min(picks.len()));
        let back = picks.split_off(granted);
        let now = index.now();
        let back_ids: Vec<String> = back.iter().map(|c| c.task_id.clone()).collect();
        self.under.put_back(back, now);
        let mut picked = Vec::new();
        for c in picks {
            self.under.started(&c, now);
            self.in_flight.insert(c.task_id.clone());
            picked.push(c.task_id.clone());
            match index.claim(&c, now) {
                Ok(()) => {
                    self.starts += 1;
                    let outcome = match (script.busy_every, script.fail_every) {
                        (Some((n, rest)), _) if self.starts.is_multiple_of(n) => {
                            Outcome::Busy(rest)
                        }
                        (_, Some((n, rest))) if self.starts.is_multiple_of(n) => {
                            Outcome::Fail(rest)
                        }
                        _ => Outcome::Ok,
                    };
                    self.ends
                        .push((now + script.run_ms, self.starts, c.task_id.clone(), outcome));
                    self.running.insert(c.task_id.clone(), (self.starts, c));
                }
                Err(why) => {
                    if let Some(p) = picked.last_mut() {
                        p.push_str(&format!("({why:?})"));
                    }
                    self.refused.push(c.task_id);
                }
            }
        }
        if reads.is_empty() && picked.is_empty() {
            return None;
        }
        let mut line = format!("@{} fill {free}:", rel(at));
        for r in reads {
            line.push_str(&format!(" {r} |"));
        }
        line.push_str(&format!(" picks {}", picked.join(" ")));
        if !back_ids.is_empty() {
            line.push_str(&format!(" | back {}", back_ids.join(" ")));
        }
        Some(line)
    }
}
