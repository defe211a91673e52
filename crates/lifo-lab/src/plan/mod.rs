//! `lifo plan`: from an arrival rate (or bursts), the downstream's
//! concurrency and latency, a TTL and a payload size, in seconds: which
//! order, how many shards and processors, the p95 age at start and the
//! tasks shed to expect, and the cost per million tasks beside SQS's.
//!
//! - [`inputs`]: the flags, checked, and the arrivals they describe;
//! - [`sizing`]: `ShardCount` and `ProcessorCount` from the documented
//!   limits (one function, its formula in its documentation);
//! - [`runs`]: the workload in virtual time ([`crate::virtual_time`]: the
//!   real process handler over the queue's in-memory model) in every order,
//!   for each seed, at the size chosen;
//! - [`choice`]: the order, by the README's rule, from the runs;
//! - [`cost`] and [`prices`]: what a task uses in the runs and what that
//!   costs at AWS's prices (each with its source and date);
//! - [`report`]: the answer, as text or JSON.

pub mod choice;
pub mod cost;
pub mod inputs;
pub mod prices;
pub mod report;
pub mod runs;
pub mod sizing;

pub use inputs::PlanArgs;
pub use runs::{Plan, Row, plan};

use anyhow::Result;

/// `lifo plan --help`'s worked example. The lines it quotes are the
/// command's own output (lifo-cli's tests/plan.rs runs it and checks them).
pub const HELP_EXAMPLE: &str = "\
Example: lifo plan --rate 20 --burst 100@5s --concurrency 4 --latency-ms 250 --ttl 10 --payload-kb 2 --duration 20

Worked through: 20 tasks a second for 20 s and 100 more at once 5 s in, into a downstream that
runs 4 at a time at 250 ms each (15.4 a second: an overload), each task living 10 s, with 2 KB
payloads. It runs that in 3 orders × 3 seeds (9 runs of about 500 tasks) and answers (abridged):

    Order: lifo. Why: adaptive starts more tasks, lifo starts them fresher (started in their TTL: adaptive 372, lifo 335; …); --prefer fresh: a task that waited is worth little.
    Size: ShardCount 1, ProcessorCount 1.
    Predicted (lifo, the median of 3 seed(s)): p95 age at start 0.71 s while tasks arrive (5.96 s over every start, the drain's included); 159 of 501 tasks shed (31.7%).
    | **lifo** (chosen) | 335, 320, 342 | 197, 155, 159 | 0.23 s | 0.71 s | 5.96 s |
    | adaptive | 383, 352, 372 | 149, 123, 129 | 0.25 s | 8.80 s | 9.09 s |
    | **the queue** | | **$5.15** |
    | SQS standard: send, receive, delete | 3.000 requests | $1.20 |

Read it as: newest first (lifo) starts 95% of its tasks within 0.71 s of their arrival while
tasks arrive, and sheds 159 of 501. Adaptive would start 37 more, but with a p95 of 8.80 s:
--prefer started picks it. One shard and one processor carry the load; the downstream
is what binds. The queue's own machinery costs $5.15 per million tasks, SQS's requests $1.20;
the answer lists each price with its date and source. --json gives all of it as JSON.";

/// `lifo plan`: the plan as text, or JSON.
pub fn command(args: &PlanArgs, as_json: bool) -> Result<String> {
    let plan = plan(args)?;
    Ok(if as_json {
        report::json(&plan).to_string()
    } else {
        report::text(&plan)
    })
}

#[cfg(test)]
mod tests;
