//! `lifo simulate --engine virtual --constants [NAME,…]`: does each tuning
//! constant of the claim policy and the claim loop earn its place? Each
//! one ([`catalogue`]) runs in virtual time on the workloads it was made
//! for ([`Bench`]), for each of `--seeds` seeds, in four variants: as
//! deployed, without it, at half and at double its value. Each workload
//! is judged by its own figures ([`Bench::metrics`]); the table gives the
//! median over the seeds as deployed with its spread, and each variant's
//! median against it. A constant whose every variant stays within 1% on
//! every figure of every workload changes nothing measurable there.
//!
//! Every workload is also judged by the write and read units each success
//! costs (billed by DynamoDB's rules, as the virtual engine bills them):
//! what the heads' and the fair share's pages and ages were made to save.

pub mod catalogue;
mod table;

pub use catalogue::Constant;
pub use table::table;

use crate::loads::Load;
use crate::mixes::{self, Mix, tenants};
use crate::report::percentile;
use crate::simulate::{DownstreamSpec, Engine, Outcome, Workload};
use anyhow::{Context as _, Result};
use lifo_core::Order;
use process::select::Tuning;
use std::time::Duration;

/// The figures every workload is also judged by.
const WU: &str = "write units/success";
const RU: &str = "read units/success";

/// A workload a constant is judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bench {
    /// The demo at 2× the downstream's capacity for 40 s, newest first.
    LifoOverload,
    /// The demo at 1.2× for 40 s, newest first.
    LifoMild,
    /// The demo at 2× for 40 s, newest first, over 8 shards (the heads'
    /// reads are spread: a read of every shard serves 15 claims first).
    LifoShards,
    /// The demo at 2× for 40 s, adaptive.
    AdaptiveOverload,
    /// The demo at 1.2× for 40 s, adaptive.
    AdaptiveMild,
    /// The demo at 2× for 40 s, adaptive, each run taking its latency
    /// ± 50% and each invocation 10 s (so the lane starts afresh, its
    /// holds unknown, four times during the load).
    AdaptiveOverloadJitter,
    /// The same at 1.2×.
    AdaptiveMildJitter,
    /// The demo's downstream, adaptive, a batch of 40 tasks every 2 s
    /// for 40 s (2×): arrivals stop between batches.
    AdaptiveBatches,
    /// The tenants mix, share on: one flooder at 10× each of nine others.
    Tenants10To1,
    /// The tenants mix, share on: two flooders at 20× each.
    Tenants20To1Two,
    /// The same with 10 s invocations: each tail call's first read comes
    /// under the flood.
    Tenants20To1TwoShort,
    /// One task a second for 60 s into a downstream that runs one at once
    /// and answers "busy" past it: tasks rest, and arrive while others
    /// rest.
    Rests,
    /// The same with the claimable index showing each write at once: a
    /// resting task's stale entry is then never claimed (which, with the
    /// index's lag, ends the invocation's wait for its rest).
    RestsNoLag,
}

impl Bench {
    pub fn name(self) -> &'static str {
        match self {
            Self::LifoOverload => "demo 2×, LIFO",
            Self::LifoMild => "demo 1.2×, LIFO",
            Self::LifoShards => "demo 2×, LIFO, 8 shards",
            Self::AdaptiveOverload => "demo 2×, adaptive",
            Self::AdaptiveMild => "demo 1.2×, adaptive",
            Self::AdaptiveOverloadJitter => "demo 2×, adaptive, runs ±50%, 10 s invocations",
            Self::AdaptiveMildJitter => "demo 1.2×, adaptive, runs ±50%, 10 s invocations",
            Self::AdaptiveBatches => "demo 2×, adaptive, 40 tasks every 2 s",
            Self::Tenants10To1 => "tenants 10:1, 1 flooder",
            Self::Tenants20To1Two => "tenants 20:1, 2 flooders",
            Self::Tenants20To1TwoShort => "tenants 20:1, 2 flooders, 10 s invocations",
            Self::Rests => "rests (1/s, busy past 1 run)",
            Self::RestsNoLag => "rests, no index lag",
        }
    }

    /// The figures it is judged by, in the order [`Bench::measure`] gives
    /// them.
    pub fn metrics(self) -> &'static [&'static str] {
        match self {
            Self::LifoOverload | Self::LifoMild | Self::LifoShards => {
                &["p95 age at start", "started", WU, RU]
            }
            Self::AdaptiveOverload
            | Self::AdaptiveMild
            | Self::AdaptiveOverloadJitter
            | Self::AdaptiveMildJitter
            | Self::AdaptiveBatches => &["p95 age at start", "started", "started vs FIFO", WU, RU],
            Self::Tenants10To1 | Self::Tenants20To1Two | Self::Tenants20To1TwoShort => {
                &["quiet p95 age", "quiet shed", "started", WU, RU]
            }
            Self::Rests | Self::RestsNoLag => &["p95 age, every start", "started", WU, RU],
        }
    }

    fn order(self) -> Order {
        match self {
            Self::AdaptiveOverload
            | Self::AdaptiveMild
            | Self::AdaptiveOverloadJitter
            | Self::AdaptiveMildJitter
            | Self::AdaptiveBatches => Order::Adaptive,
            _ => Order::Lifo,
        }
    }

    /// Whether its figures compare with a FIFO run of the same arrivals.
    fn against_fifo(self) -> bool {
        self.order() == Order::Adaptive
    }

    /// The workload of `seed` over `base`'s downstream: the workload, its
    /// arrivals and their create requests when not the demo's.
    fn plan(
        self,
        base: &Workload,
        seed: u64,
    ) -> (Workload, Vec<Duration>, Option<Vec<serde_json::Value>>) {
        let seeded = Workload {
            seed,
            ..base.clone()
        };
        let tenants = |flood_ratio, flooders, budget| {
            let args = tenants::TenantsArgs {
                flood_ratio,
                flooders,
                runs: vec![tenants::TenantsRun::On],
            };
            let w = Workload {
                budget,
                ..seeded.clone()
            };
            let mut plans = mixes::plans(Mix::Tenants, &w, &args);
            let p = plans.remove(0);
            (p.workload, p.arrivals, Some(p.specs))
        };
        match self {
            Self::LifoOverload | Self::AdaptiveOverload => {
                let (w, a) = Load::Overload.arrivals(&seeded, 0);
                (w, a, None)
            }
            Self::LifoShards => {
                let sharded = Workload {
                    shards: 8,
                    ..seeded
                };
                let (w, a) = Load::Overload.arrivals(&sharded, 0);
                (w, a, None)
            }
            Self::AdaptiveBatches => {
                let (w, _) = Load::Overload.arrivals(&seeded, 0);
                let per_batch = (2.0 * w.rate).round() as usize;
                let a = (0..w.duration.as_secs() / 2)
                    .flat_map(|b| std::iter::repeat_n(Duration::from_secs(2 * b), per_batch))
                    .collect();
                (w, a, None)
            }
            Self::LifoMild | Self::AdaptiveMild => {
                let (w, a) = Load::Mild.arrivals(&seeded, 0);
                (w, a, None)
            }
            Self::AdaptiveOverloadJitter | Self::AdaptiveMildJitter => {
                let load = match self {
                    Self::AdaptiveOverloadJitter => Load::Overload,
                    _ => Load::Mild,
                };
                let jittery = Workload {
                    latency_jitter: mixes::JITTER,
                    budget: Duration::from_secs(10),
                    ..seeded
                };
                let (w, a) = load.arrivals(&jittery, 0);
                (w, a, None)
            }
            Self::Tenants10To1 => tenants(10, 1, seeded.budget),
            Self::Tenants20To1Two => tenants(20, 2, seeded.budget),
            Self::Tenants20To1TwoShort => tenants(20, 2, Duration::from_secs(10)),
            Self::Rests | Self::RestsNoLag => {
                let w = Workload {
                    rate: 1.0,
                    index_lag: match self {
                        Self::RestsNoLag => lifo_local::index_lag::IndexLagMode::Off,
                        _ => seeded.index_lag,
                    },
                    duration: Duration::from_secs(60),
                    downstream: Some(DownstreamSpec {
                        schedule: process::runner::downstream::Schedule::parse("1")
                            .unwrap_or_else(|_| unreachable!("a fixed schedule")),
                        queue: 0,
                        timeout: Duration::from_secs(30),
                    }),
                    ..seeded
                };
                let a = w.arrivals();
                (w, a, None)
            }
        }
    }

    /// Its figures of `o`; against FIFO, 0 until [`sweep`] sets it from a
    /// FIFO run of the same arrivals.
    fn measure(self, o: &Outcome) -> Vec<f64> {
        let started = o.starts.len() as f64;
        let mut figures = match self {
            Self::LifoOverload | Self::LifoMild | Self::LifoShards => {
                vec![o.age_under_load_ms[1] as f64, started]
            }
            Self::AdaptiveOverload
            | Self::AdaptiveMild
            | Self::AdaptiveOverloadJitter
            | Self::AdaptiveMildJitter
            | Self::AdaptiveBatches => vec![o.age_under_load_ms[1] as f64, started, 0.0],
            Self::Tenants10To1 | Self::Tenants20To1Two | Self::Tenants20To1TwoShort => vec![
                tenants::quiet_p95(o) as f64,
                tenants::quiet_shed(o) as f64,
                started,
            ],
            Self::Rests | Self::RestsNoLag => {
                let mut ages: Vec<u64> = o.starts.iter().map(|s| s.age_ms).collect();
                ages.sort_unstable();
                vec![percentile(&ages, 95.0) as f64, started]
            }
        };
        figures.extend([o.write_units_per_success, o.read_units_per_success]);
        figures
    }
}

/// A variant of a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Default,
    Without,
    Half,
    Double,
}

impl Variant {
    pub const ALL: [Variant; 4] = [Self::Default, Self::Without, Self::Half, Self::Double];

    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Without => "without",
            Self::Half => "half",
            Self::Double => "double",
        }
    }

    /// The tuning of this variant of `c` (`None`: `c` has no "without").
    pub fn tuning(self, c: &Constant) -> Option<Tuning> {
        let mut t = Tuning::default();
        match self {
            Self::Default => {}
            Self::Without => {
                c.without?;
                (c.apply)(&mut t, None)
            }
            Self::Half => (c.apply)(&mut t, Some(0.5)),
            Self::Double => (c.apply)(&mut t, Some(2.0)),
        }
        Some(t)
    }
}

/// One workload's figures for one variant: per figure, each seed's value.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub per_seed: Vec<Vec<f64>>,
}

impl Figures {
    /// The median over the seeds of figure `i` (the lower middle one).
    pub fn median(&self, i: usize) -> f64 {
        let mut v: Vec<f64> = self
            .per_seed
            .iter()
            .filter_map(|s| s.get(i).copied())
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0.0)
    }

    /// The least and the greatest over the seeds of figure `i`.
    pub fn spread(&self, i: usize) -> (f64, f64) {
        let v = self.per_seed.iter().filter_map(|s| s.get(i).copied());
        v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        })
    }
}

/// One constant's results: per workload, per variant, its figures.
pub struct Swept {
    pub constant: Constant,
    pub results: Vec<(Bench, Vec<(Variant, Figures)>)>,
}

impl Swept {
    /// How far the variant's median strays from the default's on figure
    /// `i` of `bench`, as a fraction (`None`: no such run).
    pub fn change(&self, bench: Bench, variant: Variant, i: usize) -> Option<f64> {
        let (_, runs) = self.results.iter().find(|(b, _)| *b == bench)?;
        let of = |v: Variant| runs.iter().find(|(x, _)| *x == v).map(|(_, f)| f.median(i));
        let (d, x) = (of(Variant::Default)?, of(variant)?);
        Some(match (d, x) {
            _ if d == x => 0.0,
            (0.0, _) => x,
            _ => (x - d) / d.abs(),
        })
    }

    /// Whether every variant stays within `tolerance` (a fraction) of the
    /// default on every figure of every workload.
    pub fn within(&self, tolerance: f64) -> bool {
        self.results.iter().all(|(bench, _)| {
            (0..bench.metrics().len()).all(|i| {
                [Variant::Without, Variant::Half, Variant::Double]
                    .iter()
                    .all(|v| {
                        self.change(*bench, *v, i)
                            .is_none_or(|c| c.abs() <= tolerance)
                    })
            })
        })
    }
}

/// One run to make.
#[derive(Debug, Clone, Copy)]
struct Job {
    bench: Bench,
    tuning: Tuning,
    order: Order,
    seed: u64,
}

/// What a run leaves: its starts, and its bench's figures (against FIFO
/// still to be set).
#[derive(Debug, Clone)]
struct Done {
    starts: usize,
    figures: Vec<f64>,
}

/// Runs `job` in virtual time: what it leaves (the outcome itself is
/// dropped at once: thousands of them do not fit in memory).
fn run_job(base: &Workload, job: &Job) -> Result<Done> {
    let (mut w, arrivals, specs) = job.bench.plan(base, job.seed);
    w.tuning = job.tuning;
    w.engine = Engine::Virtual;
    let run = crate::virtual_time::run(&w, job.order, &arrivals, specs.as_deref())
        .with_context(|| format!("{} ({}), seed {}", job.bench.name(), job.order, job.seed))?;
    Ok(Done {
        starts: run.outcome.starts.len(),
        figures: job.bench.measure(&run.outcome),
    })
}

/// Runs every job on `threads` threads; each job's outcome in order.
fn run_jobs(base: &Workload, jobs: &[Job], threads: usize) -> Result<Vec<Done>> {
    crate::parallel::map(
        jobs,
        threads,
        |job| run_job(base, job),
        |n| {
            if n.is_multiple_of(50) || n == jobs.len() {
                eprintln!("constants: {n}/{} runs", jobs.len());
            }
        },
    )
}

/// Sweeps `constants` over `seeds` on `base`'s downstream, on `threads`
/// threads. Each workload's default runs (and FIFO runs) are shared by the
/// constants judged on it.
pub fn sweep(
    base: &Workload,
    constants: Vec<Constant>,
    seeds: std::ops::Range<u64>,
    threads: usize,
) -> Result<Vec<Swept>> {
    let mut jobs: Vec<Job> = Vec::new();
    let add = |jobs: &mut Vec<Job>, bench: Bench, tuning: Tuning, order: Order, seed: u64| {
        let same =
            |j: &Job| j.bench == bench && j.tuning == tuning && j.order == order && j.seed == seed;
        jobs.iter().position(same).unwrap_or_else(|| {
            jobs.push(Job {
                bench,
                tuning,
                order,
                seed,
            });
            jobs.len() - 1
        })
    };
    // (constant, bench, variant, seed) → (job, FIFO job)
    let mut plan = Vec::new();
    for (ci, c) in constants.iter().enumerate() {
        for bench in c.benches {
            for variant in Variant::ALL {
                let Some(tuning) = variant.tuning(c) else {
                    continue;
                };
                for seed in seeds.clone() {
                    let job = add(&mut jobs, *bench, tuning, bench.order(), seed);
                    let fifo = bench
                        .against_fifo()
                        .then(|| add(&mut jobs, *bench, Tuning::default(), Order::Fifo, seed));
                    plan.push((ci, *bench, variant, job, fifo));
                }
            }
        }
    }
    eprintln!(
        "constants: {} constants, {} runs over {} seeds",
        constants.len(),
        jobs.len(),
        seeds.clone().count()
    );
    let done = run_jobs(base, &jobs, threads)?;
    let mut swept: Vec<Swept> = constants
        .into_iter()
        .map(|constant| Swept {
            results: constant.benches.iter().map(|b| (*b, Vec::new())).collect(),
            constant,
        })
        .collect();
    for (ci, bench, variant, job, fifo) in plan {
        let mut figures = done[job].figures.clone();
        if let (Some(f), Some(vs)) = (fifo, figures.get_mut(2)) {
            *vs = done[job].starts as f64 / done[f].starts.max(1) as f64;
        }
        let runs = &mut swept[ci]
            .results
            .iter_mut()
            .find(|(b, _)| *b == bench)
            .unwrap_or_else(|| unreachable!("every bench of the constant has its entry"))
            .1;
        match runs.iter_mut().find(|(v, _)| *v == variant) {
            Some((_, f)) => f.per_seed.push(figures),
            None => runs.push((
                variant,
                Figures {
                    per_seed: vec![figures],
                },
            )),
        }
    }
    Ok(swept)
}

/// `lifo simulate --engine virtual --constants [NAME,…]`: the sweep of
/// `base` over `seeds`, and its table.
pub fn command(base: &Workload, names: &[String], seeds: std::ops::Range<u64>) -> Result<String> {
    if base.engine != Engine::Virtual {
        anyhow::bail!("--constants runs in virtual time only: add --engine virtual");
    }
    let constants = catalogue::select(names)?;
    let wall = std::time::Instant::now();
    let threads = crate::parallel::threads();
    let (first, count) = (seeds.start, seeds.end - seeds.start);
    let swept = sweep(base, constants, seeds, threads)?;
    let mut out = table(&swept);
    out.push_str(&format!(
        "\n{count} seeds from {first}, {:.0} s of wall time on {threads} thread(s).\n",
        wall.elapsed().as_secs_f64()
    ));
    Ok(out)
}

#[cfg(test)]
mod tests;
