//! `lifo tasks retry`: redrive tasks by id, or every failure of a window
//! (the failed-task index, no scan), paced, with a progress bar; then one
//! nudge so the processor wakes for them.

use crate::tasks::{MAX_BULK, finish_batch};
use crate::{CliError, RetryArgs, Target};
use governor::{Quota, RateLimiter};
use lifo_core::now_ms;
use lifo_core::store::{FailedQuery, OperateError, RedriveSettings};
use serde_json::json;
use std::num::NonZeroU32;

/// Why a redrive is recorded in the task's history.
const DEFAULT_REASON: &str = "retried with lifo tasks retry";

pub async fn run(args: &RetryArgs, target: &Target, as_json: bool) -> Result<String, CliError> {
    let store = &target.store;
    let now = now_ms();
    let ids: Vec<String> = if args.failed {
        let failed = store
            .failed(FailedQuery {
                shard_count: target.shards,
                since_ms: args.since.map_or(0, |s| s.epoch_ms(now)),
                until_ms: now,
                error_prefix: args.error_prefix.as_deref().unwrap_or(""),
                limit: args.limit.min(MAX_BULK),
            })
            .await?;
        failed.into_iter().map(|f| f.task_id).collect()
    } else if args.ids.is_empty() {
        return Err(CliError::Other(
            "give the ids to retry, or --failed (with --since, --error-prefix)".into(),
        ));
    } else {
        args.ids.clone()
    };
    if args.dry_run {
        return Ok(if as_json {
            json!({"dryRun": true, "wouldRetry": ids}).to_string()
        } else {
            format!(
                "would retry {} task(s) (dry run, nothing written){}{}",
                ids.len(),
                if ids.is_empty() { "" } else { ": " },
                ids.join(" ")
            )
        });
    }
    // Paced: a redrive is 3 write units, and the retried tasks wake a
    // processor whose downstream may just have recovered.
    let rate = NonZeroU32::new(args.rate).unwrap_or(NonZeroU32::MIN);
    let pace = RateLimiter::direct(Quota::per_second(rate));
    let bar = if as_json || ids.len() < 2 {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(ids.len() as u64).with_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} retried, {per_sec}, {eta} left",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        )
    };
    let reason = args.reason.as_deref().unwrap_or(DEFAULT_REASON);
    let mut retried = Vec::new();
    let mut refused = Vec::new();
    for id in &ids {
        pace.until_ready().await;
        let settings = RedriveSettings {
            now_ms: now_ms(),
            default_ttl_seconds: target.task_ttl_seconds,
            retention_seconds: target.retention_seconds,
            reason,
        };
        match store.redrive(id, settings).await {
            Ok(t) => retried.push(t.task_id),
            // A failure redriven by someone else meanwhile is not ours to
            // report in a bulk retry; by id, it is.
            Err(OperateError::Changed { .. }) if args.failed => {}
            Err(OperateError::Store(e)) => {
                bar.abandon();
                return Err(CliError::Other(format!(
                    "retried {} of {}, then: {}",
                    retried.len(),
                    ids.len(),
                    lifo_core::error::chain(&e)
                )));
            }
            Err(e) => refused.push((id.clone(), e.to_string())),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut paused = false;
    if !retried.is_empty() {
        // The redrives are MODIFYs, which the stream filter does not pass:
        // one nudge of the control item wakes the processor (unless paused).
        paused = store.nudge(now_ms()).await?.paused;
    }
    let note = if paused {
        " (the queue is paused: they run after `lifo resume`)"
    } else {
        ""
    };
    if args.failed && !as_json {
        return Ok(format!(
            "retried {} failed task(s){}{note}",
            retried.len(),
            if retried.len() <= 20 && !retried.is_empty() {
                format!(": {}", retried.join(" "))
            } else {
                String::new()
            }
        ));
    }
    finish_batch("retried", retried, refused, ids.len(), as_json)
        .map(|out| if as_json { out } else { format!("{out}{note}") })
}
