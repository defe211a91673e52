use super::*;
use clap::Parser;

/// `lifo simulate`'s arguments.
#[derive(Parser)]
struct Simulate {
    #[command(flatten)]
    args: SimulateArgs,
}

fn args(argv: &[&str]) -> SimulateArgs {
    let all = [&["simulate"], argv].concat();
    Simulate::try_parse_from(all).unwrap().args
}

/// The index lag and the producer's batch reach the workload; the lag
/// is AWS's unless told otherwise.
#[test]
fn the_index_lag_and_the_create_batch_are_the_workloads() {
    let w = args(&[]).workload(1).unwrap();
    assert_eq!(
        (w.index_lag, w.create_batch),
        (lifo_local::index_lag::IndexLagMode::Aws, 1)
    );
    let w = args(&["--index-lag", "1000", "--create-batch", "1000"])
        .workload(1)
        .unwrap();
    assert_eq!(
        (w.index_lag, w.create_batch),
        (
            lifo_local::index_lag::IndexLagMode::Fixed(Duration::from_secs(1)),
            1000
        )
    );
}

/// The processors reach the workload; the virtual engine takes rates
/// up to DynamoDB's scale, DynamoDB Local's only what it can serve.
#[test]
fn the_processors_and_a_rate_at_scale_are_the_virtual_engines() {
    let a = args(&[
        "--engine",
        "virtual",
        "--rate",
        "10000",
        "--processors",
        "8",
    ]);
    assert!(a.check().is_ok());
    assert_eq!(a.workload(32).unwrap().processors, 8);
    let err = args(&["--rate", "10000"]).check().unwrap_err().to_string();
    assert!(
        err.contains("--rate must be in (0, 500] with --engine local"),
        "{err}"
    );
    assert_eq!(args(&[]).workload(1).unwrap().processors, 1);
}

/// A scheduled downstream and the limit reach the workload; a bad
/// schedule is refused naming the flag and the entry.
#[test]
fn the_downstreams_schedule_and_the_limit_are_the_workloads() {
    let w = args(&[
        "--downstream-capacity",
        "10,4@30s,10@60s",
        "--concurrency",
        "adaptive",
    ])
    .workload(1)
    .unwrap();
    assert_eq!(w.runner_concurrency, process::runner::Concurrency::Adaptive);
    let d = w.downstream.unwrap();
    assert_eq!((d.queue, d.timeout), (10, Duration::from_secs(30)));
    assert_eq!(d.schedule.at(Duration::from_secs(45)), 4);
    let w = args(&[]).workload(1).unwrap();
    assert_eq!(
        (w.runner_concurrency, w.downstream),
        (process::runner::Concurrency::Fixed, None)
    );
    let all = ["simulate", "--downstream-capacity", "10,4@30"];
    let err = Simulate::try_parse_from(all).err().unwrap().to_string();
    assert!(
        err.contains("--downstream-capacity")
            && err.contains(
                "entry 2 (\"4@30\"): the time must be a number with a unit: 30s, 1500ms or 2m"
            ),
        "{err}"
    );
}

/// `--latency-jitter` spreads the runs' latency; a share outside 0..=1
/// is refused naming the flag.
#[test]
fn the_latency_jitter_is_the_workloads() {
    assert_eq!(args(&[]).workload(1).unwrap().latency_jitter, 0.0);
    let w = args(&["--latency-jitter", "0.5"]).workload(1).unwrap();
    assert_eq!(w.latency_jitter, 0.5);
    for bad in ["1.5", "-0.1", "NaN", "wide"] {
        let flag = format!("--latency-jitter={bad}");
        let err = Simulate::try_parse_from(["simulate", flag.as_str()])
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("--latency-jitter") && err.contains("is not a share between 0 and 1"),
            "{bad}: {err}"
        );
    }
}

/// `lifo simulate --template FILE` (issue 51): the run's settings and
/// stack come from the copy, not from the template `lifo` was built
/// beside.
#[test]
fn the_workload_comes_from_the_template_it_is_given() {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../template.yaml");
    let text = std::fs::read_to_string(&workspace).unwrap();
    let default = "  TimeBudgetSeconds:\n    Type: Number\n";
    let at = text.find(default).unwrap();
    let body = &text[at..];
    let line = body.find("    Default: 60\n").unwrap();
    let copy = format!(
        "{}{}    Default: 42\n{}",
        &text[..at],
        &body[..line],
        &body[line + "    Default: 60\n".len()..]
    );
    let file = std::env::temp_dir().join(format!("lifo-simulate-{}.yaml", std::process::id()));
    std::fs::write(&file, copy).unwrap();
    let w = args(&["--template", file.to_str().unwrap()])
        .workload(1)
        .unwrap();
    assert_eq!(w.budget, Duration::from_secs(42));
    let template = w.template.as_deref().unwrap();
    assert_eq!(
        template.parameter_default("TimeBudgetSeconds").unwrap(),
        "42"
    );
    let w = args(&[]).workload(1).unwrap();
    assert_eq!(
        (w.budget, w.template.is_none()),
        (Duration::from_secs(60), true)
    );
    let err = args(&["--template", "/no/such/template.yaml"])
        .workload(1)
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("reading /no/such/template.yaml"),
        "{err:#}"
    );
    let _ = std::fs::remove_file(&file);
}
