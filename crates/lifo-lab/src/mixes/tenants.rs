//! `lifo simulate --mix tenants`: nine tenants and one or more flooding
//! ones, through the local pipeline, judged against the ideal scheduler
//! ([`crate::ideal`]) fed the same arrivals.
//!
//! The nine write together 60% of what the downstream can serve; each
//! flooding tenant writes `--flood-ratio` times what one of the nine does
//! (AWS's own load test of fair queues uses 20:1). The runs
//! (`--runs`):
//! - `absent`: the nine alone, the share on;
//! - `on`: everyone, the share on;
//! - `capped`: the same with the tenant cap (`--tenant-max-in-flight`,
//!   else the runner's concurrency − 1);
//! - `off`: everyone, the share off;
//! - `alone`: one tenant alone at 2× the capacity, share on and off (a
//!   tenant alone must get every start the runner allows);
//! - `backlogged`: ten tenants at 0.3× the capacity each (each tenant's
//!   share of starts must be 1/10).
//!
//! Each seed's arrivals are the same in every run it has (the nine's are
//! the same with the flooders and without). Over `--seeds` seeds it
//! prints each seed's figures and their median and worst ([`report`]),
//! and where the nine's late tasks waited ([`late`]).

mod late;
mod report;

pub use report::{SeedFigures, figures, json, quiet_p95, quiet_shed, summary};

use super::{Plan, merged, plan, spec};
use crate::simulate::Workload;
use lifo_core::Task;
use serde_json::{Value, json};
use std::time::Duration;

/// The tenants mix's options.
#[derive(Debug, Clone, clap::Args)]
pub struct TenantsArgs {
    /// The tenants mix: each flooding tenant's rate, as a multiple of each
    /// other tenant's.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=100))]
    pub flood_ratio: u32,
    /// The tenants mix: flooding tenants, beside the nine others.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=5))]
    pub flooders: usize,
    /// The tenants mix's runs: absent (the nine alone), on, capped (the
    /// share with the tenant cap), off, alone (one tenant at 2× capacity,
    /// share on and off), backlogged (ten tenants at 0.3× capacity each).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "absent,on,capped,off"
    )]
    pub runs: Vec<TenantsRun>,
}

/// One run of the tenants mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TenantsRun {
    Absent,
    On,
    Capped,
    Off,
    Alone,
    Backlogged,
}

/// Which tenants a task's tenant is among.
fn is_flooder(t: &Task) -> bool {
    t.tenant
        .as_deref()
        .is_some_and(|n| n.starts_with("flooder-"))
}

/// The class a task is shown under in `run`.
pub fn class_of(run: &str, t: &Task) -> String {
    if run.starts_with("every tenant") {
        t.tenant.clone().unwrap_or_default()
    } else if is_flooder(t) {
        "flooders".to_owned()
    } else {
        "the other nine".to_owned()
    }
}

/// The cap of the `capped` run: the one asked for, else one slot fewer
/// than the runner has.
pub fn cap_of(base: &Workload) -> u32 {
    base.tenant_max_in_flight
        .map_or((base.concurrency as u32).saturating_sub(1).max(1), |n| {
            n.get()
        })
}

/// The runs of the mix over `w` (60 s, the runs' jitter set).
pub(super) fn plans(w: &Workload, args: &TenantsArgs) -> Vec<Plan> {
    let cap = w.capacity_per_second();
    let ttl = w.ttl_seconds;
    // The nine at 60% of the capacity together; the flooders at `ratio`×
    // each of them. Sources 1..=9 are the nine, 0 and 10.. the flooders,
    // so the nine's arrivals do not depend on how many flood.
    let r = 0.6 * cap / 9.0;
    let flood = f64::from(args.flood_ratio) * r;
    let flooder_sources: Vec<usize> = (0..args.flooders)
        .map(|i| if i == 0 { 0 } else { 9 + i })
        .collect();
    let mut rates = vec![0.0; 10 + args.flooders.saturating_sub(1)];
    rates[1..=9].fill(r);
    for s in &flooder_sources {
        rates[*s] = flood;
    }
    let name = |source: usize| match flooder_sources.iter().position(|s| *s == source) {
        Some(i) => format!("flooder-{}", i + 1),
        None => format!("tenant-{source}"),
    };
    let all = merged(w, &rates);
    let tagged = |with_flooders: bool| -> Vec<(Duration, Value)> {
        all.iter()
            .enumerate()
            .filter(|(_, (_, s))| with_flooders || !flooder_sources.contains(s))
            .map(|(n, (at, s))| (*at, spec(n, ttl, json!({"tenant": name(*s)}))))
            .collect()
    };
    let with = |fair: bool, cap: Option<u32>| Workload {
        fair_share: fair,
        tenant_max_in_flight: cap.and_then(std::num::NonZeroU32::new),
        ..w.clone()
    };
    let mut out = Vec::new();
    for run in &args.runs {
        match run {
            TenantsRun::Absent => {
                out.push(plan("flooders absent", &with(true, None), tagged(false)));
            }
            TenantsRun::On => out.push(plan("share on", &with(true, None), tagged(true))),
            TenantsRun::Capped => {
                let n = cap_of(w);
                let label = format!("share on, cap {n}");
                out.push(plan(&label, &with(true, Some(n)), tagged(true)));
            }
            TenantsRun::Off => out.push(plan("share off", &with(false, None), tagged(true))),
            TenantsRun::Alone => {
                let one = merged(w, &[2.0 * cap]);
                let tasks: Vec<(Duration, Value)> = one
                    .iter()
                    .enumerate()
                    .map(|(n, (at, _))| (*at, spec(n, ttl, json!({"tenant": "flooder-1"}))))
                    .collect();
                out.push(plan(
                    "one tenant alone, share on",
                    &with(true, None),
                    tasks.clone(),
                ));
                out.push(plan(
                    "one tenant alone, share off",
                    &with(false, None),
                    tasks,
                ));
            }
            TenantsRun::Backlogged => {
                let ten = merged(w, &[0.3 * cap; 10]);
                let tasks: Vec<(Duration, Value)> = ten
                    .iter()
                    .enumerate()
                    .map(|(n, (at, s))| {
                        (*at, spec(n, ttl, json!({"tenant": format!("tenant-{s}")})))
                    })
                    .collect();
                out.push(plan("every tenant backlogged", &with(true, None), tasks));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nine_arrive_alike_with_one_flooder_or_two_and_without() {
        let w = Workload {
            latency_jitter: 0.5,
            ..Workload::demo(0.0, Duration::from_secs(60), 3)
        };
        let args = |flooders| TenantsArgs {
            flood_ratio: 20,
            flooders,
            runs: vec![TenantsRun::Absent, TenantsRun::On],
        };
        let nine = |p: &Plan| -> Vec<(Duration, String)> {
            p.arrivals
                .iter()
                .zip(&p.specs)
                .filter(|(_, s)| {
                    s["tenant"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("tenant-"))
                })
                .map(|(a, s)| (*a, s["tenant"].as_str().unwrap_or_default().to_owned()))
                .collect()
        };
        let one = plans(&w, &args(1));
        let two = plans(&w, &args(2));
        assert_eq!(nine(&one[0]), nine(&one[1]));
        assert_eq!(nine(&one[1]), nine(&two[1]));
        let flooders = |p: &Plan| {
            p.specs
                .iter()
                .filter_map(|s| s["tenant"].as_str())
                .filter(|t| t.starts_with("flooder-"))
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        };
        assert_eq!(
            (flooders(&one[0]), flooders(&one[1]), flooders(&two[1])),
            (0, 1, 2)
        );
        // Each flooder at 20× one of the nine.
        let count = |p: &Plan, t: &str| p.specs.iter().filter(|s| s["tenant"] == t).count() as f64;
        let nine_mean = (1..=9)
            .map(|i| count(&two[1], &format!("tenant-{i}")))
            .sum::<f64>()
            / 9.0;
        let f2 = count(&two[1], "flooder-2") / nine_mean;
        assert!((15.0..25.0).contains(&f2), "{f2}");
    }
}
