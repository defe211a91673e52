use super::*;

#[test]
fn constants_are_named_as_in_the_code_and_an_unknown_one_is_refused() {
    let picked = catalogue::select(&["JITTER_DEVIATIONS".to_owned(), "FRESH".to_owned()]).unwrap();
    let names: Vec<&str> = picked.iter().map(|c| c.name).collect();
    assert_eq!(names, ["JITTER_DEVIATIONS", "FRESH"]);
    assert_eq!(
        catalogue::select(&[]).unwrap().len(),
        catalogue::all().len()
    );
    let err = catalogue::select(&["MARGN".to_owned()])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("\"MARGN\"") && err.contains("OVERLOAD_RATIO"),
        "{err}"
    );
}

/// Every variant of every constant changes the tuning, and only the
/// default leaves it as deployed.
#[test]
fn each_variant_changes_its_constant_and_the_default_nothing() {
    for c in catalogue::all() {
        assert_eq!(Variant::Default.tuning(&c), Some(Tuning::default()));
        for v in [Variant::Without, Variant::Half, Variant::Double] {
            match v.tuning(&c) {
                Some(t) => assert_ne!(t, Tuning::default(), "{} {}", c.name, v.name()),
                None => assert!(v == Variant::Without && c.without.is_none(), "{}", c.name),
            }
        }
        let (half, double) = (Variant::Half.tuning(&c), Variant::Double.tuning(&c));
        assert_ne!(half, double, "{}", c.name);
    }
}

fn figures(per_seed: &[f64]) -> Figures {
    Figures {
        per_seed: per_seed.iter().map(|v| vec![*v, 10.0]).collect(),
    }
}

#[test]
fn a_constant_within_one_percent_everywhere_is_found_idle() {
    let swept = |double: &[f64]| Swept {
        constant: catalogue::select(&["REST_WAIT_STEP".to_owned()])
            .unwrap()
            .remove(0),
        results: vec![(
            Bench::Rests,
            vec![
                (Variant::Default, figures(&[1000.0, 2000.0, 3000.0])),
                (Variant::Without, figures(&[1000.0, 2005.0, 9000.0])),
                (Variant::Half, figures(&[2000.0, 1990.0, 100.0])),
                (Variant::Double, figures(double)),
            ],
        )],
    };
    // Medians: 2000 as deployed, 2005 without, 1990 at half.
    let idle = swept(&[2010.0, 2010.0, 2010.0]);
    assert_eq!(idle.change(Bench::Rests, Variant::Without, 0), Some(0.0025));
    assert_eq!(idle.change(Bench::Rests, Variant::Half, 1), Some(0.0));
    assert!(idle.within(0.01));
    assert!(!swept(&[2030.0, 2030.0, 2030.0]).within(0.01));
    assert_eq!(figures(&[3.0, 1.0, 2.0]).spread(0), (1.0, 3.0));
}

/// A sweep in virtual time: each variant on each seed of the constant's
/// workloads, the same seed giving the same figures. Without its step, an
/// invocation waiting for a rest sleeps through the tasks that arrive
/// meanwhile (once the index shows the resting task's put-back at once).
#[test]
fn a_sweep_runs_every_variant_on_every_seed() {
    let base = Workload {
        engine: Engine::Virtual,
        rest: process::rest::RestPolicy {
            base: Duration::from_secs(10),
        },
        ..Workload::demo(1.0, Duration::from_secs(60), 1)
    };
    let step = || catalogue::select(&["REST_WAIT_STEP".to_owned()]).unwrap();
    let swept = sweep(&base, step(), 1..2, 2).unwrap();
    let [s] = swept.as_slice() else { panic!() };
    let benches: Vec<Bench> = s.results.iter().map(|(b, _)| *b).collect();
    assert_eq!(benches, [Bench::Rests, Bench::RestsNoLag]);
    for (_, runs) in &s.results {
        assert_eq!(runs.len(), 4);
        for (_, f) in runs {
            assert_eq!(f.per_seed.len(), 1);
            // p95 age, starts, then write and read units per success.
            assert!(f.per_seed.iter().all(|s| s.len() == 4 && s[1] > 0.0));
            assert!(f.per_seed.iter().all(|s| s[2] >= 6.0 && s[3] > 0.0));
        }
    }
    let slept = s.change(Bench::RestsNoLag, Variant::Without, 0).unwrap();
    assert!(slept > 0.2, "p95 age without the step: {slept:+}");
    let again = sweep(&base, step(), 1..2, 1).unwrap();
    assert_eq!(again[0].results, s.results);
    let text = table(&swept);
    assert!(text.contains("| `REST_WAIT_STEP` | rests"), "{text}");
}

/// The workloads added for what the read-sparing constants were made for:
/// shards, batches with gaps between them, short invocations.
#[test]
fn the_added_workloads_are_what_they_say() {
    let base = Workload::demo(1.0, Duration::from_secs(60), 1);
    let (w, a, _) = Bench::LifoShards.plan(&base, 3);
    assert_eq!((w.shards, w.seed), (8, 3));
    assert!(a.len() > 700, "2× the demo's 10/s for 40 s: {}", a.len());
    let (w, a, _) = Bench::AdaptiveBatches.plan(&base, 3);
    assert_eq!(w.rate, 20.0);
    assert_eq!(a.len(), 20 * 40, "a batch of 40 every 2 s for 40 s");
    assert!(
        a.chunks(40)
            .enumerate()
            .all(|(b, c)| c.iter().all(|t| *t == Duration::from_secs(2 * b as u64)))
    );
    let (w, _, specs) = Bench::Tenants20To1TwoShort.plan(&base, 3);
    assert_eq!(w.budget, Duration::from_secs(10));
    assert!(specs.is_some_and(|s| !s.is_empty()));
    let (w, _, _) = Bench::Tenants20To1Two.plan(&base, 3);
    assert_eq!(w.budget, base.budget);
}
