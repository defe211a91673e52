//! The lab: what the `lifo` command's `simulate` and `bench` run on top of
//! the product, and nothing the product needs. It depends on the product
//! (the functions, the local stack); nothing of the product depends on it.
//!
//! - [`simulate`]: one workload through the local stack and the real
//!   handlers; [`warm_up`]: each run's DynamoDB Local warmed first;
//!   [`report`]: what a run shows; [`phases`]: phase by phase, against a
//!   downstream whose capacity follows a schedule;
//! - [`simulate_command`]: `lifo simulate` (a run, `--compare`, the loads
//!   of [`loads`], the mixes of [`mixes`], plotted by [`plot`]);
//!   [`ideal`]: the ideal scheduler the fair share is judged by;
//!   [`virtual_time`]: the same workloads through the real handlers in
//!   virtual time, over the queue's in-memory model (`--engine virtual`);
//!   [`constants`]: each tuning constant's effect, swept in virtual time
//!   (`--constants`); [`parallel`]: many runs side by side; [`scale`]: a
//!   virtual run's throughput against DynamoDB's partition limits;
//! - [`plan`]: `lifo plan`, which order and size a workload needs and
//!   what it costs, from runs in virtual time;
//! - [`bench`]: `lifo bench`, one file per part ([`latency`]: a delay in
//!   front of DynamoDB Local); `lifo-bench-scheduler` (src/bin) for the
//!   scheduler's shard counts.

pub mod bench;
pub mod chaos;
pub mod constants;
pub mod engine;
pub mod ideal;
pub mod latency;
pub mod loads;
pub mod mixes;
pub mod parallel;
pub mod phases;
pub mod plan;
pub mod plot;
pub mod report;
pub mod scale;
pub mod simulate;
pub mod simulate_command;
pub mod virtual_time;
pub mod warm_up;
