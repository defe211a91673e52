//! The reference model against DynamoDB (issue 53, item 1): random
//! sequences of the queue's storage operations ([`differential::ops`]) run
//! on the in-memory model ([`lifo_core::memory::Memory`]) and on the
//! DynamoDB store over DynamoDB Local, through the same code (the
//! [`Queue`] seam), and must give the same results and leave the same items
//! after every step: the items a step changed (in the model) after each
//! step, every item at the end of each sequence.
//!
//! Time is the test's: each operation takes `now` from a virtual clock (an
//! hour ahead of the real one, so that DynamoDB Local's own TTL deletes
//! nothing), and the TTL step deletes what a scan finds past its `ttl` on
//! DynamoDB's side and what the model's TTL deletes on the other. The
//! claimable index is current here (DynamoDB Local's is); the model's lag
//! has tests of its own (lifo-core's `memory`). The count of operations
//! is printed, uncaptured, so `make test` shows it.

mod ops;
mod perform;
mod table;

use lifo_core::memory::{Billing, Lag, Memory};
use lifo_core::store::{CapacityMeter, Op as StoreOp};
use lifo_core::{Payload, Store, Task};
use lifo_tests::Harness;
use ops::{NewTask, Op};
use perform::{Ctx, perform};
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;
use table::{empty, table, ttl_on_dynamodb};

/// Rounds per run (each [`LANES`] sequences), and operations per
/// sequence: at least 10,000 in all.
const CASES: u32 = 5;
const OPS: std::ops::RangeInclusive<usize> = 252..=270;

/// One sequence.
struct Case<'a> {
    ddb: &'a Store,
    model: Memory,
    /// The model's units.
    meter: Arc<CapacityMeter>,
    totals: &'a Totals,
    now: u64,
    known: Vec<String>,
    next_id: usize,
}

impl Case<'_> {
    fn task(&mut self, new: &NewTask, id: String, created: u64) -> Task {
        let payload = Payload::from_json(&format!(r#"{{"n": {}}}"#, self.next_id)).expect("JSON");
        let mut t = Task::new_pending(id.clone(), payload, created, new.ttl_s, 2)
            .with_priority(new.priority);
        if new.short_retention {
            t = t.with_retention(2);
        }
        t.tenant = new.tenant.map(|n| format!("tenant-{n}"));
        if !self.known.contains(&id) {
            self.known.push(id);
        }
        t
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:04}", self.next_id)
    }

    /// The tasks `op` writes.
    fn new_tasks(&mut self, op: &Op) -> Vec<Task> {
        match op {
            Op::PutNew(news) => news
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let id = self.fresh("n");
                    self.task(n, id, self.now + 2 * i as u64)
                })
                .collect(),
            Op::PutIfAbsent(id, n) => vec![self.task(n, format!("p{id:02}"), self.now)],
            Op::PutKeyed {
                key,
                held_back,
                new,
            } => {
                let id = self.fresh("k");
                // Held back: created before the newest write (an odd time:
                // no two keys alike).
                let created = if *held_back { self.now - 301 } else { self.now };
                let mut t = self.task(new, id, created);
                t.supersede_key = Some(format!("key-{key}"));
                vec![t]
            }
            _ => Vec::new(),
        }
    }

    async fn step(&mut self, op: &Op) -> Result<(), String> {
        self.now += 2;
        let new = self.new_tasks(op);
        match op {
            Op::Wait(ms) => self.now += ms,
            Op::PutNew(n) => self.now += 2 * n.len() as u64,
            _ => {}
        }
        let pick = match op {
            // Mostly one of the latest few tasks, so that each goes a long
            // way (claims, leases ending, attempts used up); now and then any.
            Op::Move { pick, .. } if !self.known.is_empty() => {
                let n = self.known.len();
                let at = match *pick as usize {
                    p if p < 192 => n - 1 - p % n.min(4),
                    p => p % n,
                };
                self.known[at].clone()
            }
            _ => "none".to_owned(),
        };
        let group_token = match op {
            Op::ReleaseGroup { group, .. } => self.model.group(*group).map_or(0, |g| g.token),
            _ => 0,
        };
        let named = self.model.task(&pick);
        let cx = Ctx {
            now: self.now,
            id: &pick,
            task: named.as_ref(),
            group_token,
        };
        let (got, want) = if let Op::Ttl = op {
            let mut model = {
                let (tasks, keys) = self.model.expire_ttl(self.now);
                tasks
                    .into_iter()
                    .chain(keys.into_iter().map(|k| format!("#key-{k}")))
                    .collect::<Vec<_>>()
            };
            let mut ddb = ttl_on_dynamodb(self.ddb, self.now).await;
            model.sort();
            ddb.sort();
            (format!("{ddb:?}"), format!("{model:?}"))
        } else {
            (
                perform(self.ddb, &cx, op, &new).await,
                perform(&self.model, &cx, op, &new).await,
            )
        };
        if got != want {
            return Err(format!(
                "{op:?} at {}\nDynamoDB: {got}\nmodel:    {want}",
                self.now
            ));
        }
        // The tasks the step wrote in the model. (One it did not write and
        // DynamoDB did would have answered otherwise: a write that failed
        // its condition on both sides wrote nothing on either.)
        let written = self.model.take_written();
        let touched: Vec<&String> = written.iter().collect();
        let got = table::tasks(self.ddb, &touched).await;
        for id in touched {
            let want = self.model.task(id);
            if got.get(id) != want.as_ref() {
                return Err(format!(
                    "{op:?} at {}: task {id}\nDynamoDB: {:?}\nmodel:    {want:?}",
                    self.now,
                    got.get(id),
                ));
            }
        }
        Ok(())
    }

    /// Every item alike at the end of a sequence.
    async fn finish(&self) -> Result<(), String> {
        units(self.ddb.meter(), &self.meter, self.totals)?;
        let got = table(self.ddb).await;
        let want = self.model.snapshot();
        if got != want {
            return Err(format!(
                "the tables differ at the end\nDynamoDB: {got:#?}\nmodel:    {want:#?}"
            ));
        }
        Ok(())
    }
}

/// The model's units (AWS's billing rules over its operations) against
/// DynamoDB Local's ConsumedCapacity for the same sequence: every kind of
/// single-item write alike. Reads, transactions and failed conditions are
/// summed over the run and printed beside DynamoDB Local's (`units`): the
/// store's transactions also write a key item, and the model bills more
/// reads than DynamoDB Local reports (by up to 1.6× in a minimised
/// sequence; a query is billed as AWS documents on both sides, and an
/// entry's size is its projection's, `memory::bill`'s test: the cause is
/// not found yet).
/// `model`, recording the tasks each step writes (for the comparison).
fn recording(model: Memory) -> Memory {
    model.record_writes();
    model
}

fn units(ddb: &CapacityMeter, model: &CapacityMeter, totals: &Totals) -> Result<(), String> {
    for op in StoreOp::ALL {
        let (d, m) = (ddb.spent(op).units, model.spent(op).units);
        match op {
            StoreOp::Read | StoreOp::Supersede | StoreOp::Rejected => totals.add(op, d, m),
            _ if d != m => {
                return Err(format!(
                    "{op:?} units: DynamoDB Local {d:.1}, the model {m:.1}"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Units summed over every sequence, milli-units: DynamoDB Local's and the
/// model's, for reads, transactions and failed conditions.
#[derive(Default)]
struct Totals([(AtomicU64, AtomicU64); 3]);

impl Totals {
    fn slot(op: StoreOp) -> usize {
        match op {
            StoreOp::Read => 0,
            StoreOp::Supersede => 1,
            _ => 2,
        }
    }

    fn add(&self, op: StoreOp, ddb: f64, model: f64) {
        let (d, m) = &self.0[Self::slot(op)];
        d.fetch_add((ddb * 1000.0) as u64, Ordering::Relaxed);
        m.fetch_add((model * 1000.0) as u64, Ordering::Relaxed);
    }

    fn line(&self) -> String {
        [StoreOp::Read, StoreOp::Supersede, StoreOp::Rejected]
            .map(|op| {
                let (d, m) = &self.0[Self::slot(op)];
                let k = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1000.0;
                format!("{op:?} {:.1} / {:.1}", k(d), k(m))
            })
            .join(", ")
    }
}

/// Sequences run at once, each on a table of its own.
const LANES: usize = 8;

#[test]
fn the_model_and_dynamodb_agree_on_every_operation() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let lanes: Vec<Harness> = rt.block_on(futures::future::join_all(
        (0..LANES).map(|_| Harness::start(2)),
    ));
    let indexes = lifo_local::Template::workspace()
        .and_then(|t| t.table(lifo_local::stack::TABLE))
        .expect("template.yaml's table")
        .billed_indexes();
    let started = Instant::now();
    let count = AtomicUsize::new(0);
    let totals = Totals::default();
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        max_shrink_iters: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = proptest::collection::vec(proptest::collection::vec(ops::op(), OPS), LANES);
    let result = runner.run(&strategy, |sequences| {
        let runs = lanes.iter().zip(&sequences).map(|(h, sequence)| {
            let (count, indexes, totals) = (&count, &indexes, &totals);
            async move {
                // A store of its own: its count of tasks shed by reads starts at 0.
                let ddb = h.store.with_fresh_meter();
                empty(&ddb).await;
                let ddb = ddb.with_fresh_meter();
                let meter = Arc::new(CapacityMeter::default());
                let mut case = Case {
                    ddb: &ddb,
                    model: recording(Memory::new(Lag::Off).with_billing(Billing {
                        indexes: indexes.clone(),
                        meter: Arc::clone(&meter),
                    })),
                    meter,
                    totals,
                    // An hour ahead of the real clock, in whole seconds.
                    now: (lifo_core::now_ms() / 1000 + 3600) * 1000,
                    known: Vec::new(),
                    next_id: 0,
                };
                for op in sequence {
                    count.fetch_add(1, Ordering::Relaxed);
                    case.step(op).await?;
                }
                case.finish().await
            }
        });
        let results = rt.block_on(futures::future::join_all(runs));
        results
            .into_iter()
            .collect::<Result<Vec<()>, String>>()
            .map(drop)
            .map_err(TestCaseError::fail)
    });
    let ops = count.load(Ordering::Relaxed);
    let line = format!(
        "differential: {ops} operations in {} sequences, model and DynamoDB Local alike (results, \
         items, write units), {:.1} s; units, DynamoDB Local / model: {}\n",
        CASES as usize * LANES,
        started.elapsed().as_secs_f64(),
        totals.line()
    );
    // Past the test harness's capture: `make test` shows it.
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(ops >= 10_000, "{ops} operations");
}
