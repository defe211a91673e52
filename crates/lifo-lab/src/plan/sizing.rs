//! How many claimable-index shards (`ShardCount`) and processors
//! (`ProcessorCount`) a workload needs, from the limits docs/design.md
//! ("Throughput and scale") and docs/benchmarks.md ("Ceilings in AWS, on
//! paper") state. One function, [`size`], holds the formula:
//!
//! - the downstream serves `D = concurrency / (latency + 2 × RTT)` tasks a
//!   second (each task's claim and finish are a store round trip each), so
//!   tasks start at `S = min(peak, D)` a second, `peak` being the arrival
//!   rate plus the most burst tasks within a second;
//! - each task writes its shard's index key when it is put (at the peak
//!   rate), claimed and finished (at `S`), and a task never started once
//!   more, when it is shed (the shed takes its entry out: docs/design.md,
//!   "Shedding"). Under a steady overload that is `X = max(0, rate − D)` a
//!   second; a burst's surplus is shed a TTL after the burst, when the
//!   reaper finds it, not in the burst's second. A key takes 1,000 write
//!   units a second; sized at 75% of that,
//!   **`ShardCount = ⌈(peak + 2 × S + X) / 750⌉`** (= rate / 250 when the
//!   downstream keeps up, the docs' figure with headroom);
//! - one processor runs one thread, about 1 ms of CPU per task at
//!   1,769 MB (one vCPU) and proportionally more below it (Lambda's CPU
//!   share follows memory): it keeps up with `C = 1000 × min(M, 1769) /
//!   1769` tasks a second (≈ 145 at the template's 256 MB). At 75% of that,
//!   **`ProcessorCount = ⌈S / (0.75 × C)⌉`**, at most the downstream's
//!   concurrency (each processor runs an even share of its slots, at least
//!   one), and `ShardCount` at least `ProcessorCount` (a processor owns
//!   whole shards: process runs no more processors than shards).
//!
//! More processors do not raise the downstream's ceiling `D`: they split
//! its slots. When the arrivals outrun `D` the queue sheds, whatever the
//! size; the runs in virtual time say how much.

use lifo_lambda::config::bounds;
use std::time::Duration;

/// Write units a second one partition key value takes.
pub const KEY_WRITES_PER_SECOND: f64 = 1_000.0;
/// The share of a limit planned for: room for a Poisson second above the
/// mean and for retries.
pub const HEADROOM: f64 = 0.75;
/// process's CPU per task at one full vCPU (`lifo bench --only process`).
pub const CPU_MS_PER_TASK: f64 = 1.0;
/// Lambda's memory size at which a function has one full vCPU.
pub const FULL_VCPU_MB: u64 = 1_769;

/// What the sizing is computed from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    /// Arrivals per second at the peak, and on average (the rate alone).
    pub peak_per_second: f64,
    pub rate_per_second: f64,
    /// The downstream's runs at once, and its time per run.
    pub concurrency: usize,
    pub latency: Duration,
    /// One store request's round trip.
    pub store_rtt: Duration,
    /// process's MemorySize (MB).
    pub memory_mb: u64,
}

/// The sizes, and the ceilings they come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sizing {
    pub shards: u32,
    pub processors: u32,
    /// `D`: tasks a second the downstream can run.
    pub downstream_per_second: f64,
    /// `S`: tasks a second that start at the peak.
    pub starts_per_second: f64,
    /// `X`: tasks a second shed under a steady overload.
    pub shed_per_second: f64,
    /// Writes a second on the index keys at the peak, all shards together.
    pub index_writes_per_second: f64,
    /// `C`: tasks a second one processor's CPU keeps up with.
    pub processor_per_second: f64,
}

/// Tasks a second one processor's CPU keeps up with at `memory_mb`.
pub fn processor_per_second(memory_mb: u64) -> f64 {
    let share = memory_mb.min(FULL_VCPU_MB) as f64 / FULL_VCPU_MB as f64;
    1_000.0 / CPU_MS_PER_TASK * share
}

/// The shards and processors `demand` needs (the formula in the module's
/// documentation); an error naming the flags when it needs more than the
/// template allows.
pub fn size(demand: &Demand) -> Result<Sizing, String> {
    let per_run = demand.latency + 2 * demand.store_rtt;
    let downstream_per_second = demand.concurrency as f64 / per_run.as_secs_f64().max(1e-3);
    let starts_per_second = demand.peak_per_second.min(downstream_per_second);
    let shed_per_second = (demand.rate_per_second - downstream_per_second).max(0.0);
    // The put, the claim and the finish, and a shed.
    let index_writes_per_second =
        demand.peak_per_second + 2.0 * starts_per_second + shed_per_second;
    let shards = (index_writes_per_second / (KEY_WRITES_PER_SECOND * HEADROOM)).ceil();
    let processor_per_second = processor_per_second(demand.memory_mb);
    let processors = (starts_per_second / (processor_per_second * HEADROOM))
        .ceil()
        .clamp(1.0, demand.concurrency.max(1) as f64);
    let shards = shards.max(processors).max(1.0);
    let (max_shards, max_processors) = (*bounds::SHARD_COUNT.end(), *bounds::PROCESSOR_COUNT.end());
    if shards > f64::from(max_shards) {
        return Err(format!(
            "--rate and --burst need {shards} shards ({index_writes_per_second:.0} index writes a second), \
             more than ShardCount's {max_shards}"
        ));
    }
    if processors > f64::from(max_processors) {
        return Err(format!(
            "{starts_per_second:.0} starts a second need {processors} processors at {} MB, more than \
             ProcessorCount's {max_processors}: raise --memory-mb",
            demand.memory_mb
        ));
    }
    Ok(Sizing {
        shards: shards as u32,
        processors: processors as u32,
        downstream_per_second,
        starts_per_second,
        shed_per_second,
        index_writes_per_second,
        processor_per_second,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(rate: f64, peak: f64, concurrency: usize, latency_ms: u64, memory_mb: u64) -> Demand {
        Demand {
            peak_per_second: peak,
            rate_per_second: rate,
            concurrency,
            latency: Duration::from_millis(latency_ms),
            store_rtt: Duration::from_millis(5),
            memory_mb,
        }
    }

    /// The docs' figures: a shard per 250 tasks a second when the
    /// downstream keeps up (1,000 tasks/s: 4 shards; 5,000: 20).
    #[test]
    fn a_shard_per_250_tasks_a_second_when_the_downstream_keeps_up() {
        for (rate, shards) in [
            (1.0, 1),
            (250.0, 1),
            (251.0, 2),
            (1_000.0, 4),
            (5_000.0, 20),
        ] {
            let s = size(&demand(rate, rate, 1000, 0, 1769)).unwrap();
            assert_eq!(s.shards, shards.max(s.processors), "{rate}/s");
            assert_eq!(s.index_writes_per_second, 3.0 * rate);
            assert_eq!(s.shed_per_second, 0.0);
        }
    }

    /// Past the downstream, claims and finishes go at its pace, and every
    /// task it cannot start is put, then shed: two writes each.
    #[test]
    fn a_steady_overload_writes_a_put_and_a_shed_for_each_task_it_cannot_start() {
        // 20 slots of 300 ms + two 5 ms round trips: 64.5 tasks/s.
        let s = size(&demand(50.0, 50.0, 20, 300, 256)).unwrap();
        assert!((s.downstream_per_second - 20.0 / 0.31).abs() < 1e-9);
        assert_eq!((s.shards, s.processors), (1, 1));
        assert_eq!((s.starts_per_second, s.shed_per_second), (50.0, 0.0));
        // 2,000 a second: 64.5 start (3 writes each), 1,935.5 are shed
        // (2 each): 4,064.5 over 750 a key.
        let s = size(&demand(2_000.0, 2_000.0, 20, 300, 256)).unwrap();
        assert!((s.starts_per_second - 64.516).abs() < 1e-3);
        assert!((s.shed_per_second - 1_935.484).abs() < 1e-3);
        assert!((s.index_writes_per_second - 4_064.516).abs() < 1e-3);
        assert_eq!(s.shards, 6);
    }

    /// A burst on top of a rate the downstream serves: its puts land in
    /// one second, its sheds a TTL later (not counted with them).
    #[test]
    fn a_bursts_puts_land_in_its_second() {
        // 50 a second and 2,000 at once: 2,050 puts and 2 × 64.5 claims
        // and finishes in that second.
        let s = size(&demand(50.0, 2_050.0, 20, 300, 256)).unwrap();
        assert_eq!(s.shed_per_second, 0.0);
        assert!((s.index_writes_per_second - 2_179.032).abs() < 1e-3);
        assert_eq!(s.shards, 3);
    }

    /// One processor: 1 ms of CPU a task at 1,769 MB, 6.9 ms at 256 MB.
    #[test]
    fn processors_follow_the_cpu_share_of_their_memory() {
        assert_eq!(processor_per_second(1769), 1000.0);
        assert_eq!(
            processor_per_second(3538),
            1000.0,
            "one thread: no more past one vCPU"
        );
        assert!((processor_per_second(256) - 144.7).abs() < 0.1);
        // 500 starts a second: 5 processors at 256 MB (0.75 × 144.7 each),
        // 1 at 1,769 MB; the shards at least the processors.
        let s = size(&demand(500.0, 500.0, 1000, 0, 256)).unwrap();
        assert_eq!((s.processors, s.shards), (5, 5));
        let s = size(&demand(500.0, 500.0, 1000, 0, 1769)).unwrap();
        assert_eq!((s.processors, s.shards), (1, 2));
        let s = size(&demand(120.0, 120.0, 1000, 0, 256)).unwrap();
        assert_eq!((s.processors, s.shards), (2, 2));
        // No more processors than the downstream has slots.
        let s = size(&demand(5_000.0, 5_000.0, 3, 0, 128)).unwrap();
        assert_eq!(s.processors, 3);
    }

    #[test]
    fn past_the_templates_bounds_it_says_which_flag() {
        let err = size(&demand(80_000.0, 80_000.0, 1000, 0, 1769)).unwrap_err();
        assert!(
            err.starts_with("--rate and --burst need 320 shards"),
            "{err}"
        );
        let err = size(&demand(4_000.0, 4_000.0, 1000, 0, 128)).unwrap_err();
        assert!(err.contains("raise --memory-mb"), "{err}");
    }
}
