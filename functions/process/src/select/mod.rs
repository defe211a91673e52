//! The claim policy: which claimable tasks an invocation takes, and when a
//! task put back may be taken again. The protocol (what a claim writes,
//! and when it may) is `lifo-core`'s; this is the choosing.
//!
//! - [`heads`]: each shard's head of the claimable index kept in memory
//!   between reads, merged into one order across the shards;
//! - [`fair`]: the fair share, when several tenants have work;
//! - [`rest`]: how long a task put back rests before its next claim.

pub mod fair;
pub mod heads;
pub mod rest;
