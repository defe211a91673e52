//! `process`: claims the newest claimable tasks, runs them, records outcomes,
//! and tail-calls itself through the trigger topic while work remains.
//!
//! It runs with reserved concurrency `ProcessorCount` (1 by default). One
//! invocation ([`Processor::handle`], in [`processor`]) loops until its time
//! budget (never past the invocation deadline minus a margin and the
//! longest run) or until no claimable task is left ([`claim_loop`]). It
//! claims only as many tasks as the runner has free slots, so it never
//! claims a task just to bounce it, and claims them in parallel, each
//! handled on its own ([`handle`]: claim, run, finish). Which tasks it
//! takes is the claim policy's ([`select`]). With more than one processor,
//! each invocation first takes a shard group's lease
//! ([`lifo_core::groups`]) and claims from its shards only, with its share
//! of the runner's concurrency and rate.

mod claim_loop;
mod config;
mod error;
mod finish;
mod halt;
mod handle;
mod processor;
mod rate_limit;
mod reads;
mod report;
pub mod rest;
pub mod runner;
pub mod select;
mod serve;
mod wakeups;

pub use config::{Clamp, ProcessConfig, RateLimit};
pub use error::ProcessError;
pub use halt::Halt;
pub use processor::Processor;
pub use report::{ProcessReport, StopReason};
pub use serve::{serve, serve_with};
pub use wakeups::{Handover, Wakeups};

#[cfg(test)]
mod tests;
