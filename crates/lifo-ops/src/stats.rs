//! The queue's stats: depth by status and shard, and freshness, from queries of
//! the indexes (COUNTs, and the ends of each shard for the ages; no scan):
//! the claimable index gives pending and running tasks per LIFO shard (its
//! live work: what expired leaves it within a minute), the shed index the
//! tasks shed in the last hour (counted up to a cap), the due-date index the
//! scheduled tasks per day.

use crate::{OpsError, Queue};
use futures::{StreamExt, TryStreamExt};
use lifo_core::model::due_key;
use serde_json::{Value, json};

/// Past due dates `lifo stats` counts too: scheduler-start catches up this
/// many days. The HTTP API counts none unless asked (each day costs one
/// COUNT query per due shard).
pub const PAST_DAYS: u32 = 7;
/// COUNT queries in flight for the due-date index.
const PARALLEL: usize = 16;
/// Shards whose seven queries are in flight at once (28 queries).
const SHARDS_AT_ONCE: usize = 4;
/// Most due dates ahead that can hold a task: create schedules at most
/// this far ([`crate::create::MAX_DUE_IN_DAYS`]).
pub const MAX_DAYS: u32 = crate::create::MAX_DUE_IN_DAYS;
/// Most shed-index entries counted per shard ("1000+" beyond): the
/// count reads at most ≈ 8 read units per shard, however much was shed.
pub const SHED_COUNT_CAP: usize = 1000;

#[derive(Debug, Clone, PartialEq)]
pub struct ShardStats {
    pub shard: u32,
    /// Claimable now (PENDING, or TAKEN with an expired lease).
    pub pending: usize,
    /// TAKEN under a live lease.
    pub running: usize,
    /// PENDING, resting before a retry (not claimable yet).
    pub backing_off: usize,
    /// Shed by expiry in the last hour (counted up to [`SHED_COUNT_CAP`]).
    pub expired_last_hour: usize,
    /// There were more than `expired_last_hour` (the count stopped at the cap).
    pub expired_capped: bool,
    /// Superseded in the last hour (a newer task with the same key was
    /// written first), counted up to [`SHED_COUNT_CAP`].
    pub superseded_last_hour: usize,
    pub superseded_capped: bool,
    pub newest_claimable_at: Option<u64>,
    pub oldest_claimable_at: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Paused or running (the control item).
    pub control: lifo_core::store::QueueControl,
    /// The adaptive limit the last invocation that ran something ended
    /// with (`RunnerConcurrency: adaptive`; none with a fixed limit).
    pub downstream: Option<lifo_core::store::DownstreamLimit>,
    pub shards: Vec<ShardStats>,
    /// (due date, SCHEDULED tasks), dates with at least one.
    pub scheduled: Vec<(String, usize)>,
    /// The due dates counted: from `past_days` ago to `days` ahead.
    pub past_days: u32,
    pub days: u32,
}

/// The queue's stats; scheduled tasks due from `past_days` ago to `days`
/// ahead (one COUNT query per date and due shard, nothing more).
pub async fn collect(q: &Queue, now: u64, past_days: u32, days: u32) -> Result<Stats, OpsError> {
    let (control, downstream, shards, scheduled) = futures::try_join!(
        async { Ok::<_, OpsError>(q.store.control(true).await?) },
        async { Ok::<_, OpsError>(q.store.downstream_limit().await?) },
        shard_stats(q, now),
        scheduled(q, now, past_days, days),
    )?;
    Ok(Stats {
        control,
        downstream,
        shards,
        scheduled,
        past_days,
        days,
    })
}

/// Each LIFO shard's counts and claimable ages: seven queries per shard,
/// [`SHARDS_AT_ONCE`] shards at a time.
pub async fn shard_stats(q: &Queue, now: u64) -> Result<Vec<ShardStats>, OpsError> {
    let store = &q.store;
    let horizon = q.settings.horizon(now);
    let hour_ago = now.saturating_sub(3_600_000);
    futures::stream::iter(0..q.settings.shards.max(1))
        .map(|shard| async move {
            let (pending, running, backing_off, expired, superseded, newest, oldest) = futures::try_join!(
                store.claimable_depth_in(shard, now, horizon),
                store.leased_in(shard, now, horizon),
                store.backing_off_in(shard, now, horizon),
                store.shed_in(shard, hour_ago, now, SHED_COUNT_CAP),
                store.superseded_in(shard, hour_ago, now, SHED_COUNT_CAP),
                store.edge_claimable(shard, now, horizon, false),
                store.edge_claimable(shard, now, horizon, true),
            )?;
            Ok::<_, OpsError>(ShardStats {
                shard,
                pending,
                running,
                backing_off,
                expired_last_hour: expired.0,
                expired_capped: expired.1,
                superseded_last_hour: superseded.0,
                superseded_capped: superseded.1,
                newest_claimable_at: newest,
                oldest_claimable_at: oldest,
            })
        })
        .buffered(SHARDS_AT_ONCE)
        .try_collect()
        .await
}

/// SCHEDULED tasks per due date, from `past_days` ago to `days` ahead: one
/// COUNT query per date and due shard.
pub async fn scheduled(
    q: &Queue,
    now: u64,
    past_days: u32,
    days: u32,
) -> Result<Vec<(String, usize)>, OpsError> {
    if days > MAX_DAYS {
        return Err(OpsError::invalid(
            "days",
            format!("must be 0 to {MAX_DAYS} (no task is due later), got {days}"),
        ));
    }
    let most_past = *lifo_lambda::config::bounds::CATCH_UP_DAYS.end();
    if past_days > most_past {
        return Err(OpsError::invalid(
            "past days",
            format!("must be 0 to {most_past} (CatchUpDays' largest), got {past_days}"),
        ));
    }
    let store = &q.store;
    let today = chrono::DateTime::from_timestamp_millis(now as i64)
        .unwrap_or_default()
        .date_naive();
    let dates: Vec<String> = (-i64::from(past_days)..=i64::from(days))
        .filter_map(|d| today.checked_add_signed(chrono::Duration::days(d)))
        .map(|d| d.format("%Y-%m-%d").to_string())
        .collect();
    let keys: Vec<(usize, String)> = dates
        .iter()
        .enumerate()
        .flat_map(|(i, d)| (0..q.settings.due_shards.max(1)).map(move |s| (i, due_key(d, s))))
        .collect();
    let counts: Vec<(usize, usize)> = futures::stream::iter(keys)
        .map(|(i, key)| async move { store.due_count(&key).await.map(|n| (i, n)) })
        .buffer_unordered(PARALLEL)
        .try_collect()
        .await?;
    let mut per_date = vec![0usize; dates.len()];
    for (i, n) in counts {
        per_date[i] += n;
    }
    Ok(dates
        .into_iter()
        .zip(per_date)
        .filter(|(_, n)| *n > 0)
        .collect())
}

/// A shard's shed count as shown: `1000+` when the count stopped at the cap.
pub fn shed_shown(s: &ShardStats) -> String {
    capped_shown(s.expired_last_hour, s.expired_capped)
}

/// A shard's superseded count as shown, like [`shed_shown`].
pub fn superseded_shown(s: &ShardStats) -> String {
    capped_shown(s.superseded_last_hour, s.superseded_capped)
}

fn capped_shown(n: usize, capped: bool) -> String {
    if capped {
        format!("{n}+")
    } else {
        n.to_string()
    }
}

pub fn age_ms(at: Option<u64>, now: u64) -> Option<u64> {
    at.map(|c| now.saturating_sub(c))
}

impl Stats {
    pub fn total(&self, f: impl Fn(&ShardStats) -> usize) -> usize {
        self.shards.iter().map(f).sum()
    }

    pub fn json(&self, now: u64) -> Value {
        json!({
            "paused": self.control.paused,
            "pausedReason": self.control.reason.as_deref().filter(|_| self.control.paused),
            "downstreamLimit": self.downstream.map(|d| json!({
                "limit": d.limit,
                "ceiling": d.ceiling,
                "unloadedMs": d.unloaded_ms,
                "group": d.group,
                "ageMs": now.saturating_sub(d.at),
            })),
            "shards": self.shards.iter().map(|s| json!({
                "shard": s.shard,
                "pending": s.pending,
                "running": s.running,
                "backingOff": s.backing_off,
                "expiredLastHour": s.expired_last_hour,
                "expiredCapped": s.expired_capped,
                "supersededLastHour": s.superseded_last_hour,
                "supersededCapped": s.superseded_capped,
                "newestAgeMs": age_ms(s.newest_claimable_at, now),
                "oldestAgeMs": age_ms(s.oldest_claimable_at, now),
            })).collect::<Vec<_>>(),
            "scheduled": self.scheduled.iter().map(|(d, n)| json!({"dueDate": d, "count": n})).collect::<Vec<_>>(),
            "totals": {
                "pending": self.total(|s| s.pending),
                "running": self.total(|s| s.running),
                "backingOff": self.total(|s| s.backing_off),
                "expiredLastHour": self.total(|s| s.expired_last_hour),
                "supersededLastHour": self.total(|s| s.superseded_last_hour),
                "scheduled": self.scheduled.iter().map(|(_, n)| n).sum::<usize>(),
            },
        })
    }
}
