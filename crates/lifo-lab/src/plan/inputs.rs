//! `lifo plan`'s inputs: the flags, checked (each error names its flag),
//! and the arrivals they describe: a Poisson process of `--rate` plus the
//! bursts of `--burst`, each burst's tasks arriving at one instant.

use lifo_lambda::config::bounds;
use std::time::Duration;

/// What a late start is worth to the user: the README's "which order"
/// rule, in its own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Prefer {
    /// A task that waited is worth little: the freshest starts (lifo's
    /// row of the rule).
    Fresh,
    /// A late start is still worth it: the most tasks started within their
    /// TTL (adaptive's row).
    Started,
}

impl Prefer {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fresh => "fresh",
            Self::Started => "started",
        }
    }
}

/// `--burst N@TIME`: `tasks` arriving at once, `at` into the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    pub tasks: usize,
    pub at: Duration,
}

/// `--burst`'s bursts, in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bursts(pub Vec<Burst>);

/// The most tasks one burst may hold.
pub const MAX_BURST: usize = 100_000;

/// The most arrivals one run may expect (rate × duration plus the bursts),
/// so that `lifo plan` answers within a minute or so with a release build
/// (its wall times: docs/operating.md).
pub const MAX_ARRIVALS: f64 = 20_000.0;

/// `--burst`'s list: `N@TIME[,N@TIME…]`, times as 10s, 1500ms or 2m; the
/// error names the entry.
pub fn parse_bursts(text: &str) -> Result<Bursts, String> {
    text.split(',')
        .enumerate()
        .map(|(i, entry)| {
            let entry = entry.trim();
            let at = |why: &str| format!("entry {} ({entry:?}): {why}", i + 1);
            let (n, t) = entry
                .split_once('@')
                .ok_or_else(|| at("expected TASKS@TIME, e.g. 500@10s"))?;
            let tasks: usize = n
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=MAX_BURST).contains(n))
                .ok_or_else(|| {
                    at(&format!(
                        "the tasks must be a whole number from 1 to {MAX_BURST}"
                    ))
                })?;
            let at_time = process::runner::downstream::duration(t.trim())
                .ok_or_else(|| at("the time must be a number with a unit: 10s, 1500ms or 2m"))?;
            Ok(Burst { tasks, at: at_time })
        })
        .collect::<Result<_, _>>()
        .map(Bursts)
}

/// The workload to plan for, as the flags give it.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct PlanArgs {
    /// Mean arrivals per second (a Poisson process); 0 with --burst: the
    /// bursts alone.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Tasks arriving at once on top of the rate, at a time into the run:
    /// `500@10s`, or several, `500@10s,2000@45s` (times as 10s, 1500ms or
    /// 2m, before --duration ends).
    #[arg(long, value_name = "TASKS@TIME", value_parser = parse_bursts)]
    pub burst: Option<Bursts>,
    /// Runs the downstream takes at once (process's RunnerMaxConcurrency).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub concurrency: usize,
    /// The downstream's time per task, milliseconds (the template's
    /// RunnerLatencyMs bounds, 0 to 240000).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(bounds::RUNNER_LATENCY_MS))]
    pub latency_ms: u64,
    /// Each task's time to live, seconds: not started by then, it is shed
    /// (1 to 604800, a create request's ttlSeconds).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub ttl: u64,
    /// Each task's payload as compact JSON, in KB (0 to 64; 0.25 is 256
    /// bytes).
    #[arg(long, default_value_t = 1.0)]
    pub payload_kb: f64,
    /// Seconds during which tasks arrive; then the queue drains.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub duration: u64,
    /// Seeds to run each order with (their median is the prediction).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=10))]
    pub seeds: u64,
    /// The first seed (the arrivals of seed s are the same in every order).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=u64::from(u32::MAX)))]
    pub seed: u64,
    /// What a late start is worth: `fresh` (a task that waited is worth
    /// little) or `started` (a late start is still worth it). It decides
    /// between lifo and adaptive only when one starts more tasks and the
    /// other starts them fresher.
    #[arg(long, value_enum, default_value = "fresh")]
    pub prefer: Prefer,
    /// process's MemorySize in MB (128 to 10240): its CPU share, so the
    /// tasks one processor keeps up with; default: template.yaml's.
    #[arg(long, value_parser = clap::value_parser!(u64).range(128..=10_240))]
    pub memory_mb: Option<u64>,
    /// The SAM template the settings and memory sizes come from; default:
    /// the workspace's template.yaml.
    #[arg(long, value_name = "FILE")]
    pub template: Option<std::path::PathBuf>,
}

impl PlanArgs {
    /// The bursts given (none without --burst).
    pub fn bursts(&self) -> &[Burst] {
        self.burst.as_ref().map_or(&[], |b| b.0.as_slice())
    }

    /// The payload's size in bytes.
    pub fn payload_bytes(&self) -> usize {
        (self.payload_kb * 1024.0).round() as usize
    }

    /// The tasks a run expects: rate × duration plus every burst.
    pub fn expected_arrivals(&self) -> f64 {
        self.rate * self.duration as f64 + self.bursts().iter().map(|b| b.tasks as f64).sum::<f64>()
    }

    /// Refuses what clap cannot range-check (floats, relations between
    /// flags), naming the flag.
    pub fn check(&self) -> Result<(), String> {
        if !(self.rate.is_finite() && (0.0..=5_000.0).contains(&self.rate)) {
            return Err(format!(
                "--rate must be a number of tasks per second from 0 to 5000, got {}",
                self.rate
            ));
        }
        if self.rate == 0.0 && self.bursts().is_empty() {
            return Err("--rate 0 needs --burst: give an arrival rate, a burst, or both".into());
        }
        let max_kb = lifo_core::model::MAX_PAYLOAD_BYTES as f64 / 1024.0;
        if !(self.payload_kb.is_finite() && (0.0..=max_kb).contains(&self.payload_kb)) {
            return Err(format!(
                "--payload-kb must be from 0 to {max_kb} (a task's payload is at most 64 KB), got {}",
                self.payload_kb
            ));
        }
        let duration = Duration::from_secs(self.duration);
        if let Some((i, b)) = self
            .bursts()
            .iter()
            .enumerate()
            .find(|(_, b)| b.at >= duration)
        {
            return Err(format!(
                "--burst entry {} arrives at {:.1} s, not before --duration's end ({} s)",
                i + 1,
                b.at.as_secs_f64(),
                self.duration
            ));
        }
        let expected = self.expected_arrivals();
        if expected > MAX_ARRIVALS {
            return Err(format!(
                "--rate × --duration plus --burst is {expected:.0} tasks a run; lifo plan runs at most \
                 {MAX_ARRIVALS:.0} (a shorter --duration reaches the same steady state)"
            ));
        }
        Ok(())
    }

    /// The arrivals of `seed`, ascending: the rate's Poisson process (as
    /// `lifo simulate` draws it) with each burst's tasks at its instant.
    pub fn arrivals(&self, seed: u64) -> Vec<Duration> {
        let mut all =
            crate::simulate::Workload::demo(self.rate, Duration::from_secs(self.duration), seed)
                .arrivals();
        for b in self.bursts() {
            all.extend(std::iter::repeat_n(b.at, b.tasks));
        }
        all.sort();
        all
    }

    /// The highest arrival rate to size for: the mean rate, plus the most
    /// burst tasks arriving within any one second.
    pub fn peak_per_second(&self) -> f64 {
        let bursts = self.bursts();
        let within_a_second_of = |first: &Burst| {
            bursts
                .iter()
                .filter(|b| b.at >= first.at && b.at < first.at + Duration::from_secs(1))
                .map(|b| b.tasks)
                .sum::<usize>()
        };
        self.rate + bursts.iter().map(within_a_second_of).max().unwrap_or(0) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Plan {
        #[command(flatten)]
        args: PlanArgs,
    }

    fn args(argv: &[&str]) -> Result<PlanArgs, String> {
        let base = [
            "plan",
            "--concurrency",
            "20",
            "--latency-ms",
            "300",
            "--ttl",
            "60",
        ];
        let all = [&base[..], argv].concat();
        Plan::try_parse_from(all)
            .map(|p| p.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn bursts_parse_and_a_bad_entry_is_named() {
        assert_eq!(
            parse_bursts("500@10s, 20@1500ms").unwrap().0,
            [
                Burst {
                    tasks: 500,
                    at: Duration::from_secs(10)
                },
                Burst {
                    tasks: 20,
                    at: Duration::from_millis(1500)
                }
            ]
        );
        for (text, why) in [
            (
                "500",
                "entry 1 (\"500\"): expected TASKS@TIME, e.g. 500@10s",
            ),
            (
                "5@1s,0@2s",
                "entry 2 (\"0@2s\"): the tasks must be a whole number from 1 to 100000",
            ),
            (
                "5@10",
                "entry 1 (\"5@10\"): the time must be a number with a unit: 10s, 1500ms or 2m",
            ),
        ] {
            assert_eq!(parse_bursts(text).unwrap_err(), why);
        }
        let err = args(&["--burst", "5@x"]).unwrap_err();
        assert!(err.contains("--burst <TASKS@TIME>"), "{err}");
    }

    #[test]
    fn each_bad_input_is_refused_naming_its_flag() {
        for (argv, says) in [
            (
                &["--rate", "NaN"][..],
                "--rate must be a number of tasks per second from 0 to 5000, got NaN",
            ),
            (
                &["--rate=-1"],
                "--rate must be a number of tasks per second from 0 to 5000, got -1",
            ),
            (&[], "--rate 0 needs --burst"),
            (
                &["--rate", "1", "--payload-kb", "65"],
                "--payload-kb must be from 0 to 64",
            ),
            (
                &["--rate", "1", "--burst", "5@60s"],
                "--burst entry 1 arrives at 60.0 s, not before --duration's end (60 s)",
            ),
            (
                &["--rate", "2000"],
                "--rate × --duration plus --burst is 120000 tasks a run",
            ),
        ] {
            let err = args(argv).unwrap().check().unwrap_err();
            assert!(err.contains(says), "{argv:?}: {err}");
        }
        assert!(args(&["--rate", "50"]).unwrap().check().is_ok());
        assert!(args(&["--burst", "500@10s"]).unwrap().check().is_ok());
        // clap's ranges, each naming its flag.
        for (argv, flag) in [
            (
                &["--rate", "1", "--concurrency", "0"][..],
                "--concurrency <CONCURRENCY>",
            ),
            (&["--rate", "1", "--ttl", "0"], "--ttl <TTL>"),
            (
                &["--rate", "1", "--memory-mb", "64"],
                "--memory-mb <MEMORY_MB>",
            ),
        ] {
            let err = args(argv).unwrap_err();
            assert!(err.contains(flag), "{argv:?}: {err}");
        }
    }

    #[test]
    fn the_arrivals_are_the_rates_poisson_process_plus_each_burst_at_its_instant() {
        let a = args(&["--rate", "50", "--burst", "500@10s,20@30s"]).unwrap();
        let all = a.arrivals(7);
        let poisson = crate::simulate::Workload::demo(50.0, Duration::from_secs(60), 7).arrivals();
        assert_eq!(all.len(), poisson.len() + 520);
        assert!(all.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(
            all.iter()
                .filter(|t| **t == Duration::from_secs(10))
                .count(),
            500
        );
        assert_eq!(a.arrivals(7), all, "the same seed, the same arrivals");
        assert_eq!(a.peak_per_second(), 550.0);
        // Bursts within a second of each other count together.
        let a = args(&["--rate", "50", "--burst", "500@10s,300@10900ms,200@11s"]).unwrap();
        assert_eq!(a.peak_per_second(), 850.0);
        assert_eq!(a.payload_bytes(), 1024);
    }
}
