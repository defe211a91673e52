//! Running one operation on a [`Queue`]: the same code for the model and
//! for DynamoDB, answering text that the test compares.

use super::ops::{Kind, Op, ReadKind};
use lifo_core::expr::{Move, Step};
use lifo_core::memory::Entry;
use lifo_core::store::{IndexRead, Item, Queue, QueueOps, RedriveSettings, StoreError};
use lifo_core::{Candidate, Task, TaskStatus};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Instant;

/// The shards of the table (its tasks' `lifoShard`).
pub const SHARDS: [u32; 2] = [0, 1];

/// What an operation answered, as text: the same on both sides.
fn outcome<T: Debug>(r: Result<T, StoreError>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(StoreError::ConditionFailed { current, .. }) => {
            format!("condition failed on {current:?}")
        }
        Err(e) => format!("error {e}"),
    }
}

/// What an operation needs besides itself: the time, and the task it
/// names as the model holds it before the step (both sides hold the same,
/// or the test has failed already).
pub struct Ctx<'a> {
    pub now: u64,
    pub id: &'a str,
    pub task: Option<&'a Task>,
    pub group_token: u64,
}

fn read_of(kind: ReadKind, shard: u32, now_ms: u64) -> IndexRead {
    let horizon_ms = now_ms - 3_600_000;
    match kind {
        ReadKind::ClaimRead => IndexRead::ClaimRead {
            shard,
            now_ms,
            horizon_ms,
        },
        ReadKind::ClaimableNow => IndexRead::ClaimableNow {
            shard,
            now_ms,
            horizon_ms,
        },
        ReadKind::Leased => IndexRead::Leased {
            shard,
            now_ms,
            horizon_ms,
        },
        ReadKind::BackingOff => IndexRead::BackingOff {
            shard,
            now_ms,
            horizon_ms,
        },
        ReadKind::OldEnd(priority) => IndexRead::OldEnd {
            shard,
            priority,
            horizon_ms,
        },
    }
}

/// A worker's move on the task `cx` names.
async fn move_on<Q: Queue>(q: &Q, cx: &Ctx<'_>, op: &Op) -> String {
    let Op::Move {
        kind,
        fit,
        stale,
        read_back,
        lease_ms,
        retry_ms,
        pick,
    } = *op
    else {
        unreachable!()
    };
    let now = cx.now;
    let kind = match cx.task {
        Some(t) if fit => super::ops::fitting(t, now, kind),
        _ => kind,
    };
    let empty = Vec::new();
    let (token, attempts, history) = cx
        .task
        .map_or((0, 0, &empty), |t| (t.token, t.attempts, &t.history));
    let token = if stale { token + 1 } else { token };
    let lease_until = now + lease_ms;
    let retry_at = now + retry_ms;
    let (mv, current, attempts) = match kind {
        Kind::Claim => (
            Move::Claim {
                lease_until,
                claimed_by: "p-1",
            },
            TaskStatus::Pending,
            attempts + 1,
        ),
        Kind::Reclaim => (
            Move::Reclaim {
                lease_until,
                claimed_by: "p-2",
                max_attempts: 2,
            },
            TaskStatus::Taken,
            attempts + 1,
        ),
        Kind::Succeed => (Move::Succeed { history }, TaskStatus::Taken, attempts),
        Kind::Fail => (
            Move::Fail {
                reason: "boom",
                history,
            },
            TaskStatus::Taken,
            attempts,
        ),
        Kind::Abandon => (
            Move::Abandon {
                reason: "lease expired",
            },
            TaskStatus::Taken,
            attempts,
        ),
        Kind::RetryLater => (
            Move::RetryLater {
                reason: "busy",
                history,
                retry_at,
            },
            TaskStatus::Taken,
            attempts.saturating_sub(1),
        ),
        Kind::RetryAfterError => (
            Move::RetryAfterError {
                reason: "HTTP 503",
                history,
                retry_at,
            },
            TaskStatus::Taken,
            attempts,
        ),
        Kind::EndSuperseded => {
            let r = q.end_superseded(cx.id, token, attempts, now).await;
            return outcome(r);
        }
        Kind::Shed => {
            let c = match cx.task.and_then(Entry::of) {
                Some(e) => Candidate {
                    token,
                    ..e.candidate
                },
                None => Candidate {
                    token,
                    ..Candidate::pending(cx.id, 0, 0)
                },
            };
            return outcome(q.shed(&c, now).await);
        }
        Kind::Redrive => {
            let settings = RedriveSettings {
                now_ms: now,
                default_ttl_seconds: 20,
                retention_seconds: if pick % 2 == 0 { 5 } else { 3600 },
                reason: "again",
            };
            return match q.redrive(cx.id, settings).await {
                Ok(t) => format!("ok {t:?}"),
                Err(e) => format!("refused: {e}"),
            };
        }
    };
    let step = Step {
        now_ms: now,
        token,
        attempts,
    };
    if read_back {
        outcome(q.apply(cx.id, &mv, current, &step).await)
    } else {
        outcome(q.record(cx.id, &mv, current, &step).await)
    }
}

/// Runs `op` on `q`: what it answered.
pub async fn perform<Q: Queue>(q: &Q, cx: &Ctx<'_>, op: &Op, new: &[Task]) -> String {
    let now = cx.now;
    match op {
        Op::Wait(_) | Op::Ttl => String::new(),
        Op::PutNew(_) => outcome(q.put_new(new).await),
        Op::PutIfAbsent(..) => outcome(q.put_if_absent(&new[0]).await),
        Op::PutKeyed { .. } => outcome(q.put_keyed_at(&new[0], now).await),
        Op::Move { .. } => move_on(q, cx, op).await,
        Op::Heads {
            order,
            page,
            since_back,
            horizon_back,
        } => {
            let since = since_back.map(|b| now - b);
            let r = q
                .claimable_heads_since(*order, &SHARDS, *page, now, now - horizon_back, since)
                .await;
            format!("{} shed {}", outcome(r), q.shed_by_reads())
        }
        Op::Pages {
            read,
            shard,
            forward,
            limit,
        } => {
            let read = read_of(*read, *shard, now);
            let mut pages = Vec::new();
            let mut start: Option<Item> = None;
            for _ in 0..8 {
                match q
                    .index_page(read, *forward, Some(*limit), start.take())
                    .await
                {
                    Ok(p) => {
                        pages.push(format!(
                            "{:?} next {:?}",
                            p.entries,
                            p.next.as_ref().map(sorted)
                        ));
                        start = p.next;
                    }
                    Err(e) => pages.push(format!("error {e}")),
                }
                if start.is_none() {
                    break;
                }
            }
            pages.join("\n")
        }
        Op::Count { read, shard } => outcome(q.index_count(read_of(*read, *shard, now)).await),
        Op::Edge { shard, oldest } => outcome(
            q.edge_claimable(*shard, now, now - 3_600_000, *oldest)
                .await,
        ),
        Op::Reap => {
            let until = Instant::now() + std::time::Duration::from_secs(600);
            outcome(q.reap(&SHARDS, now, now - 3_600_000, until).await)
        }
        Op::Pause(paused) => outcome(q.set_paused(*paused, "test", now).await),
        Op::Nudge => outcome(q.nudge(now).await),
        Op::Control => outcome(q.control(true).await),
        Op::TakeGroup { group, lease_ms } => {
            outcome(q.take_group(*group, now + lease_ms, now, "p-1").await)
        }
        Op::ReleaseGroup { group, stale } => {
            let token = cx.group_token + u64::from(*stale);
            outcome(q.release_group(*group, token).await)
        }
    }
}

/// A key as text, its attributes in order.
fn sorted(item: &Item) -> BTreeMap<String, String> {
    item.iter()
        .map(|(k, v)| (k.clone(), format!("{v:?}")))
        .collect()
}
