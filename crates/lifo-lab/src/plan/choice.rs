//! Which order to run, by the README's rule ("Which order"): `lifo` when
//! a task that waited is worth little, `adaptive` when a late start is
//! still worth it, `fifo` only to compare. From the runs: what each order
//! started within its TTL and how fresh, over the seeds.
//!
//! - Adaptive starts more tasks in their TTL than LIFO, as fresh: adaptive
//!   (it loses nothing).
//! - It starts more, but staler (the overload LIFO sheds from is one a
//!   late start catches up with): `--prefer` decides, `fresh` → lifo,
//!   `started` → adaptive.
//! - About as many either way: the fresher, lifo (the default) when they
//!   are as fresh.
//!
//! "More" is past 2% and at least one task (the noise between seeds: the
//! bar docs/benchmarks.md holds adaptive to is 0.98); "as fresh" is a p95
//! age at start, while tasks arrive, within 10% and 100 ms.

use super::inputs::Prefer;
use crate::report::{percentile, secs};
use crate::simulate::Outcome;
use lifo_core::Order;

/// One run's figures, or their medians over the seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    pub created: usize,
    /// Tasks started (a claim past a task's deadline is refused: every
    /// start is within its TTL).
    pub started: usize,
    pub shed: usize,
    /// Age at start of the tasks that started while tasks kept arriving.
    pub p50_arriving_ms: u64,
    pub p95_arriving_ms: u64,
    /// Over every start, the drain's included.
    pub p95_every_ms: u64,
}

impl Figures {
    pub fn of(o: &Outcome) -> Self {
        let mut every: Vec<u64> = o.starts.iter().map(|s| s.age_ms).collect();
        every.sort_unstable();
        Self {
            created: o.created,
            started: o.starts.len(),
            shed: o.shed,
            p50_arriving_ms: o.age_under_load_ms[0],
            p95_arriving_ms: o.age_under_load_ms[1],
            p95_every_ms: percentile(&every, 95.0),
        }
    }

    /// Each figure's median over `runs` (the lower middle one).
    pub fn median(runs: &[Figures]) -> Self {
        fn m<T: Copy + PartialOrd + Default>(runs: &[Figures], f: fn(&Figures) -> T) -> T {
            crate::loads::median(runs.iter().map(f).collect()).unwrap_or_default()
        }
        Self {
            created: m(runs, |r| r.created),
            started: m(runs, |r| r.started),
            shed: m(runs, |r| r.shed),
            p50_arriving_ms: m(runs, |r| r.p50_arriving_ms),
            p95_arriving_ms: m(runs, |r| r.p95_arriving_ms),
            p95_every_ms: m(runs, |r| r.p95_every_ms),
        }
    }
}

/// The order chosen, and why, in a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub order: Order,
    pub why: String,
}

/// `a` starts more tasks than `b`, past the noise.
fn starts_more(a: usize, b: usize) -> bool {
    a > b && a as f64 > b as f64 * 1.02
}

/// A p95 age at start of `a` ms is as fresh as `b` ms.
fn as_fresh(a: u64, b: u64) -> bool {
    a as f64 <= b as f64 * 1.1 + 100.0
}

/// The README's rule over LIFO's and adaptive's figures.
pub fn choose(lifo: &Figures, adaptive: &Figures, prefer: Prefer) -> Choice {
    let (l, a) = (lifo, adaptive);
    let figures = format!(
        "started in their TTL: adaptive {}, lifo {}; p95 age at start while tasks arrive: adaptive {}, lifo {}",
        a.started,
        l.started,
        secs(a.p95_arriving_ms),
        secs(l.p95_arriving_ms)
    );
    let (order, why) = if starts_more(a.started, l.started) {
        if as_fresh(a.p95_arriving_ms, l.p95_arriving_ms) {
            (
                Order::Adaptive,
                format!("adaptive starts more tasks than lifo, as fresh ({figures})"),
            )
        } else {
            let rule = match prefer {
                Prefer::Fresh => (
                    Order::Lifo,
                    "--prefer fresh: a task that waited is worth little",
                ),
                Prefer::Started => (
                    Order::Adaptive,
                    "--prefer started: a late start is still worth it",
                ),
            };
            (
                rule.0,
                format!(
                    "adaptive starts more tasks, lifo starts them fresher ({figures}); {}",
                    rule.1
                ),
            )
        }
    } else if starts_more(l.started, a.started) || as_fresh(l.p95_arriving_ms, a.p95_arriving_ms) {
        (
            Order::Lifo,
            format!(
                "lifo starts as many tasks as adaptive or more, as fresh or fresher ({figures}): \
                 lifo, the default"
            ),
        )
    } else {
        (
            Order::Adaptive,
            format!("adaptive starts as many tasks, fresher ({figures})"),
        )
    };
    Choice { order, why }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(started: usize, p95_ms: u64) -> Figures {
        Figures {
            started,
            p95_arriving_ms: p95_ms,
            ..Figures::default()
        }
    }

    /// The README's rows: under 2× load adaptive is as fresh as LIFO and
    /// starts more; under 1.2× it starts more but half its starts are old;
    /// at half load every order starts everything.
    #[test]
    fn the_readmes_rule() {
        let overload = choose(&f(460, 400), &f(542, 390), Prefer::Fresh);
        assert_eq!(overload.order, Order::Adaptive, "{}", overload.why);
        assert_eq!(
            overload.why,
            "adaptive starts more tasks than lifo, as fresh (started in their TTL: adaptive 542, lifo 460; \
         p95 age at start while tasks arrive: adaptive 0.39 s, lifo 0.40 s)"
        );
        let mild = |p| choose(&f(410, 1_030), &f(518, 18_910), p);
        assert_eq!(mild(Prefer::Fresh).order, Order::Lifo);
        assert!(
            mild(Prefer::Fresh)
                .why
                .ends_with("--prefer fresh: a task that waited is worth little")
        );
        assert_eq!(mild(Prefer::Started).order, Order::Adaptive);
        let steady = choose(&f(643, 360), &f(643, 450), Prefer::Started);
        assert_eq!(steady.order, Order::Lifo, "{}", steady.why);
    }

    /// Within the noise (2%, 10% + 100 ms) nothing is "more" or "fresher".
    #[test]
    fn the_noise_decides_nothing() {
        assert_eq!(
            choose(&f(500, 400), &f(510, 400), Prefer::Started).order,
            Order::Lifo
        );
        assert_eq!(
            choose(&f(500, 400), &f(511, 400), Prefer::Started).order,
            Order::Adaptive
        );
        assert_eq!(
            choose(&f(0, 0), &f(1, 0), Prefer::Fresh).order,
            Order::Adaptive,
            "0 → 1 is more"
        );
        // LIFO 10% + 100 ms staler is as fresh; past that adaptive wins.
        assert_eq!(
            choose(&f(500, 1_200), &f(500, 1_000), Prefer::Fresh).order,
            Order::Lifo
        );
        assert_eq!(
            choose(&f(500, 1_201), &f(500, 1_000), Prefer::Fresh).order,
            Order::Adaptive
        );
    }

    #[test]
    fn figures_take_each_medians_own() {
        let m = Figures::median(&[f(3, 900), f(1, 100), f(2, 500), f(9, 50)]);
        // The lower middle of four.
        assert_eq!((m.started, m.p95_arriving_ms), (2, 100));
    }
}
