//! `trigger`: turns "something claimable may be waiting" into one wake-up of
//! the processor.
//!
//! It is invoked three ways, and publishes at most one wake-up per
//! invocation to the process topic:
//! - by the table's stream (the event source mapping's filter passes only
//!   inserts of claimable tasks), with partial batch responses: a malformed
//!   record is reported on its own, never panicked on;
//! - by the trigger topic (tail calls from `process`);
//! - by the rest-wake queue (SQS): a rest alarm ([`lifo_lambda::alarm`])
//!   that `process` set when it ended with a task still resting. A message
//!   that came early (SQS delays one by 15 minutes at most) sets the alarm
//!   again for the rest of the rest; any other wakes the processor;
//! - by the safety sweep (EventBridge, every minute): first the reaper
//!   sheds what expired at the oldest end of each shard (so no reader pays
//!   for it again, and `TasksShed` counts it in the minute it happens),
//!   then one COUNT query per shard, and a wake-up only when claimable
//!   tasks exist. This catches tasks pending at deploy, dropped events and
//!   expired leases.
//!
//! A failed publish is an error (after retries), so Lambda retries the batch
//! instead of silently losing the wake-up.

use aws_lambda_events::dynamodb::EventRecord;
use aws_lambda_events::sns::SnsEvent;
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lifo_core::clock::SharedClock;
use lifo_core::expr::attr;
use lifo_core::store::{Queue, QueueOps};
use lifo_core::{Store, StoreError};
use lifo_lambda::alarm::{AlarmError, MAX_REST_SLEEP, RestAlarm};
use lifo_lambda::config::{self, ConfigError, Source};
use lifo_lambda::notify::Fanout;
use lifo_lambda::{Notifier, NotifyError, Wakeup};
use serde_json::Value;
use std::collections::BTreeMap;

/// Why an invocation failed.
#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    #[error("unrecognised event: {0}")]
    Unrecognised(String),
    #[error("malformed {source_name} event: {message}")]
    Malformed {
        source_name: &'static str,
        message: String,
    },
    #[error(transparent)]
    Publish(#[from] NotifyError),
    #[error("sweep query failed")]
    Sweep(#[from] StoreError),
    #[error(transparent)]
    Alarm(#[from] AlarmError),
}

impl From<TriggerError> for lambda_runtime::Diagnostic {
    fn from(e: TriggerError) -> Self {
        let error_type = match &e {
            TriggerError::Unrecognised(_) | TriggerError::Malformed { .. } => "MalformedEvent",
            TriggerError::Publish(_) => "PublishFailed",
            TriggerError::Sweep(_) => "SweepFailed",
            TriggerError::Alarm(_) => "AlarmFailed",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.into(),
            error_message: lifo_core::error::chain(&e),
        }
    }
}

/// What one invocation saw and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TriggerOutcome {
    /// Records that announced claimable work (stream inserts, tail calls,
    /// or claimable tasks found by the sweep).
    pub signals: usize,
    /// Records ignored (not an insert of a claimable task).
    pub ignored: usize,
    /// Records reported as failed, to be delivered again: stream records
    /// by sequence number (malformed, or not acknowledged because the
    /// publish failed), rest alarms by message id.
    pub failed_items: Vec<String>,
    /// Rest alarms that could not be set again (the `RestAlarmsFailed`
    /// metric).
    pub alarms_failed: usize,
    /// Wakeups-ups published: one, or one per shard group with work when more
    /// than one processor claims (the `WakeupsPublished` metric).
    pub wakeups: usize,
    /// Tasks shed by expiry: by the sweep's reaper, or (a task no reader
    /// shed) seen deleted by TTL without having started.
    pub shed: usize,
    /// The sweep's count of claimable tasks (the queue depth).
    pub depth: Option<usize>,
    /// The sweep's reading of the control item: the queue is paused.
    pub paused: Option<bool>,
}

/// What the sweep reads.
#[derive(Debug, Clone)]
pub struct Sweep<Q = Store> {
    pub store: Q,
    pub shard_count: u32,
    pub max_ttl_seconds: u64,
}

/// How long the reaper may start new pages in one sweep (the function's
/// Timeout is 30 s): what is left waits for the next minute's run.
pub const REAP_BUDGET: std::time::Duration = std::time::Duration::from_secs(20);

impl<Q> Sweep<Q> {
    /// `SHARD_COUNT`, `MAX_TTL_SECONDS` (the table comes from `TABLE_NAME`).
    pub fn from_source(store: Q, src: &impl Source) -> Result<Self, ConfigError> {
        Ok(Self {
            store,
            shard_count: config::shard_count(src)?,
            max_ttl_seconds: config::max_ttl_seconds(src)?,
        })
    }
}

/// The trigger function's handler.
///
/// Its sweep reads the queue's storage `Q`: the DynamoDB [`Store`] as
/// deployed, or the in-memory model in a simulation.
#[derive(Debug, Clone)]
pub struct Trigger<Q = Store> {
    /// The process topic, one wake-up per shard group with work.
    fanout: Fanout,
    sweep: Option<Sweep<Q>>,
    /// Sets a long rest's alarm again (`REST_WAKE_QUEUE_URL`).
    alarm: Option<RestAlarm>,
    /// Where it reads the time ([`lifo_core::clock`]).
    clock: SharedClock,
}

/// Which shard groups a wake-up is for.
#[derive(Debug, Clone, Default)]
struct Groups {
    /// Every group (a resume, a nudge, an unnamed tail call).
    all: bool,
    named: std::collections::BTreeSet<u32>,
    /// The trace of the process invocation that tail-called.
    previous_trace: Option<String>,
    /// Rest alarms: the latest rest end they named.
    wake_at: Option<u64>,
    /// Tail calls: what each handed over, by the group it named, forwarded
    /// as it came to that group's processor.
    handovers: std::collections::BTreeMap<Option<u32>, serde_json::Value>,
}

/// What invoked the trigger: the table stream, an SNS tail call, or the
/// EventBridge sweep rule.
enum Invocation {
    Stream(Vec<Value>),
    Sns(SnsEvent),
    /// The rest-wake queue's messages.
    Sqs(Vec<Value>),
    Schedule,
}

fn classify(event: Value) -> Result<Invocation, TriggerError> {
    if event.get("source").and_then(Value::as_str) == Some("aws.events") {
        return Ok(Invocation::Schedule);
    }
    let first = event
        .get("Records")
        .and_then(|r| r.get(0))
        .cloned()
        .unwrap_or(Value::Null);
    let source = first
        .get("eventSource")
        .or_else(|| first.get("EventSource"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    match source.as_deref() {
        Some("aws:dynamodb") => match event.get("Records") {
            Some(Value::Array(records)) => Ok(Invocation::Stream(records.clone())),
            _ => Err(TriggerError::Malformed { source_name: "DynamoDB stream", message: "Records is not an array".into() }),
        },
        Some("aws:sqs") => match event.get("Records") {
            Some(Value::Array(records)) => Ok(Invocation::Sqs(records.clone())),
            _ => Err(TriggerError::Malformed { source_name: "SQS", message: "Records is not an array".into() }),
        },
        Some("aws:sns") => serde_json::from_value(event)
            .map(Invocation::Sns)
            .map_err(|e| TriggerError::Malformed { source_name: "SNS", message: e.to_string() }),
        Some(other) => Err(TriggerError::Unrecognised(format!(
            "Records[0] has event source {other:?}; expected aws:dynamodb, aws:sns or aws:sqs"
        ))),
        None => Err(TriggerError::Unrecognised(
            "expected a Records array whose first record has eventSource aws:dynamodb or aws:sqs or EventSource aws:sns, \
             or an EventBridge event with source aws.events"
                .into(),
        )),
    }
}

/// A deletion by DynamoDB's TTL process (principal dynamodb.amazonaws.com)
/// of a task that was never started: it was shed by expiry.
fn is_unrun_ttl_deletion(r: &EventRecord) -> bool {
    let by_ttl = r
        .user_identity
        .as_ref()
        .is_some_and(|u| u.principal_id == "dynamodb.amazonaws.com");
    let old = &r.change.old_image;
    let status = match old.get(attr::STATUS) {
        Some(serde_dynamo::AttributeValue::S(s)) => s.as_str(),
        _ => "",
    };
    r.event_name == "REMOVE"
        && by_ttl
        && old.get(attr::STARTED_AT).is_none()
        && matches!(status, "PENDING" | "SCHEDULED")
}

fn failure(sequence_number: String) -> DynamoDbBatchItemFailure {
    let mut f = DynamoDbBatchItemFailure::default();
    f.item_identifier = Some(sequence_number);
    f
}

impl Trigger<Store> {
    pub fn new(notifier: Notifier) -> Self {
        Trigger::over(Fanout::new(notifier, 1))
    }
}

impl<Q: Queue> Trigger<Q> {
    /// Waking the processor through `fanout` (a simulation's own delivery
    /// of wake-ups; [`Trigger::new`] is the deployed one).
    pub fn over(fanout: Fanout) -> Self {
        Self {
            fanout,
            sweep: None,
            alarm: None,
            clock: lifo_core::clock::system(),
        }
    }

    /// Reading the time from `clock` (a simulation's virtual time).
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Sets again the alarm of a rest longer than SQS's 15-minute delay.
    pub fn with_rest_alarm(mut self, alarm: RestAlarm) -> Self {
        self.alarm = Some(alarm);
        self
    }

    /// With `processors` processors (each wake-up then names a group).
    pub fn with_processors(mut self, processors: u32) -> Self {
        self.fanout = Fanout::over(std::sync::Arc::clone(&self.fanout.notifier), processors);
        self
    }

    /// Enables the safety sweep (scheduled events).
    pub fn with_sweep<S: Queue>(self, sweep: Sweep<S>) -> Trigger<S> {
        Trigger {
            fanout: self.fanout,
            sweep: Some(sweep),
            alarm: self.alarm,
            clock: self.clock,
        }
    }

    /// [`Trigger::handle`] for the event as the runtime hands it over.
    pub async fn handle_raw(
        &self,
        event: &serde_json::value::RawValue,
    ) -> Result<DynamoDbEventResponse, TriggerError> {
        let event = lifo_lambda::event::parse(event).map_err(|e| TriggerError::Malformed {
            source_name: "invocation",
            message: format!("the event is {e}"),
        })?;
        self.handle(event).await
    }

    /// Handles a raw invocation event; the response is the stream's partial
    /// batch response (ignored by SNS and EventBridge).
    pub async fn handle(&self, event: Value) -> Result<DynamoDbEventResponse, TriggerError> {
        let outcome = self.measured(event).await?;
        let mut response = DynamoDbEventResponse::default();
        response.batch_item_failures = outcome.failed_items.into_iter().map(failure).collect();
        Ok(response)
    }

    /// As [`Trigger::handle`], returning what was done.
    pub async fn handle_outcome(&self, event: Value) -> Result<TriggerOutcome, TriggerError> {
        match classify(event)? {
            Invocation::Stream(records) => self.stream(records).await,
            Invocation::Sns(e) => {
                let mut outcome = TriggerOutcome {
                    signals: e.records.len(),
                    ..TriggerOutcome::default()
                };
                // A tail call carries its group on: the processor of that
                // group goes on.
                let mut groups = Groups::default();
                for r in &e.records {
                    let w = serde_json::from_str::<Wakeup>(&r.sns.message).ok();
                    // The tail call's trace: the process invocation it
                    // wakes names it (each starts a trace of its own).
                    if groups.previous_trace.is_none() {
                        groups.previous_trace = w.as_ref().and_then(|w| w.previous_trace.clone());
                    }
                    if let Some(w) = &w
                        && let Some(h) = &w.handover
                    {
                        groups.handovers.entry(w.group).or_insert_with(|| h.clone());
                    }
                    match w.and_then(|w| w.group) {
                        Some(g) => {
                            groups.named.insert(g);
                        }
                        None => groups.all = true,
                    }
                }
                if outcome.signals > 0 {
                    outcome.wakeups = self.publish("tail-call", &groups).await?;
                }
                Ok(outcome)
            }
            Invocation::Sqs(records) => self.rest_alarms(records).await,
            Invocation::Schedule => self.sweep().await,
        }
    }

    /// Rest alarms that went off: a wake-up for each group whose rest has
    /// ended (or ends within [`MAX_REST_SLEEP`], which the processor waits
    /// out); the alarm set again for a rest that ends later. A message that
    /// is not a wake-up is logged and dropped (it would not read better
    /// later). Failures are per message (`ReportBatchItemFailures` on the
    /// mapping): an alarm that could not be set again, or a due one whose
    /// wake-up could not be published, comes back after the visibility
    /// timeout, and the others of the batch are done with.
    async fn rest_alarms(&self, records: Vec<Value>) -> Result<TriggerOutcome, TriggerError> {
        let mut outcome = TriggerOutcome::default();
        let now = self.clock.now_ms();
        let soon = now + MAX_REST_SLEEP.as_millis() as u64;
        // The due alarms: their message ids, wake-up and group.
        let mut due: Vec<(String, Wakeup)> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let message_id = r
                .get("messageId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let wakeup = r
                .get("body")
                .and_then(Value::as_str)
                .and_then(|b| serde_json::from_str::<Wakeup>(b).ok());
            let Some(wakeup) = wakeup else {
                tracing::warn!(event = "rest_alarm.malformed", record = i, messageId = %message_id);
                outcome.ignored += 1;
                continue;
            };
            match (&self.alarm, wakeup.wake_at) {
                (Some(alarm), Some(at)) if at > soon => {
                    outcome.ignored += 1;
                    match alarm.set(&wakeup, now).await {
                        Ok(delay) => tracing::info!(
                            event = "rest_alarm.set_again",
                            wakeAt = at,
                            delayS = delay.as_secs()
                        ),
                        Err(e) => {
                            tracing::warn!(event = "rest_alarm.set_again_failed", messageId = %message_id, wakeAt = at, error = %lifo_core::error::Chain(&e));
                            outcome.alarms_failed += 1;
                            outcome.failed_items.push(message_id);
                        }
                    }
                }
                _ => due.push((message_id, wakeup)),
            }
        }
        outcome.signals = due.len();
        // One wake-up per group (every group for an alarm naming none),
        // each naming the latest rest end of its alarms.
        let mut groups: BTreeMap<Option<u32>, Groups> = BTreeMap::new();
        for (_, w) in &due {
            let g = groups.entry(w.group).or_default();
            match w.group {
                Some(n) => {
                    g.named.insert(n);
                }
                None => g.all = true,
            }
            g.wake_at = g.wake_at.max(w.wake_at);
            if g.previous_trace.is_none() {
                g.previous_trace = w.previous_trace.clone();
            }
        }
        for (group, targets) in &groups {
            match self.publish("rest-end", targets).await {
                Ok(n) => outcome.wakeups += n,
                Err(e) => {
                    tracing::warn!(event = "rest_alarm.wake_failed", group, error = %lifo_core::error::Chain(&e));
                    outcome.failed_items.extend(
                        due.iter()
                            .filter(|(_, w)| w.group == *group)
                            .map(|(id, _)| id.clone()),
                    );
                }
            }
        }
        Ok(outcome)
    }

    async fn stream(&self, records: Vec<Value>) -> Result<TriggerOutcome, TriggerError> {
        let mut outcome = TriggerOutcome::default();
        let mut signal_sequence_numbers = Vec::new();
        let mut groups = Groups::default();
        for (i, raw) in records.into_iter().enumerate() {
            let sequence_number = raw
                .pointer("/dynamodb/SequenceNumber")
                .and_then(Value::as_str)
                .map(str::to_owned);
            // The control item: resume and an operator's nudge wake the
            // processor; a pause wakes nobody.
            if raw
                .pointer("/dynamodb/Keys/taskId/S")
                .and_then(Value::as_str)
                == Some(lifo_core::store::CONTROL_ID)
            {
                let paused =
                    raw.pointer("/dynamodb/NewImage/paused/BOOL") == Some(&Value::Bool(true));
                if paused {
                    tracing::info!(event = "queue.paused", reason = ?raw.pointer("/dynamodb/NewImage/reason/S"), "the queue is paused; no wake-up");
                    outcome.ignored += 1;
                } else {
                    tracing::info!(event = "queue.resumed", reason = ?raw.pointer("/dynamodb/NewImage/reason/S"), "the queue runs: waking the processor");
                    outcome.signals += 1;
                    groups.all = true;
                    signal_sequence_numbers.extend(sequence_number);
                }
                continue;
            }
            match serde_json::from_value::<EventRecord>(raw) {
                // The event source mapping's filter already drops everything
                // else; checking again keeps the function correct without it.
                Ok(r)
                    if r.event_name == "INSERT"
                        && r.change.new_image.get(attr::CLAIMABLE_AT).is_some() =>
                {
                    outcome.signals += 1;
                    match r.change.new_image.get(attr::SHARD) {
                        Some(serde_dynamo::AttributeValue::N(n)) => match n.parse::<u32>() {
                            Ok(shard) => {
                                groups.named.insert(lifo_core::groups::group_of(
                                    shard,
                                    self.fanout.processors,
                                ));
                            }
                            Err(_) => groups.all = true,
                        },
                        _ => groups.all = true,
                    }
                    signal_sequence_numbers.extend(r.change.sequence_number);
                }
                Ok(r) if is_unrun_ttl_deletion(&r) => {
                    outcome.shed += 1;
                    tracing::info!(event = "task.shed", by = "ttl", taskId = ?r.change.keys.get(attr::TASK_ID), "deleted by DynamoDB's TTL, never started nor shed before");
                }
                Ok(_) => outcome.ignored += 1,
                Err(e) => {
                    let Some(seq) = sequence_number else {
                        return Err(TriggerError::Malformed {
                            source_name: "DynamoDB stream",
                            message: format!(
                                "Records[{i}]: {e} (and no SequenceNumber to report it by)"
                            ),
                        });
                    };
                    tracing::warn!(event = "stream.record_malformed", sequenceNumber = %seq, error = %e);
                    outcome.failed_items.push(seq);
                }
            }
        }
        if outcome.signals > 0 {
            match self.publish("stream-insert", &groups).await {
                Ok(n) => outcome.wakeups = n,
                // Not acknowledged: Lambda retries from the first of them.
                Err(e) if !signal_sequence_numbers.is_empty() => {
                    tracing::error!(event = "wakeup.publish_failed", error = %lifo_core::error::Chain(&e), "reporting the batch's signals as failed so Lambda retries them");
                    outcome.failed_items.extend(signal_sequence_numbers);
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            tracing::info!(
                event = "wakeup.skipped",
                ignored = outcome.ignored,
                "no claimable work in this batch"
            );
        }
        Ok(outcome)
    }

    async fn sweep(&self) -> Result<TriggerOutcome, TriggerError> {
        let Some(sweep) = &self.sweep else {
            return Err(TriggerError::Unrecognised(
                "a scheduled event, but the sweep is not configured".into(),
            ));
        };
        let now = self.clock.now_ms();
        let horizon = now.saturating_sub(sweep.max_ttl_seconds * 1000);
        // One COUNT query per shard answers both "does anything wait?" and
        // "how deep is the queue?"; the control item says whether to wake.
        let paused = sweep.store.control(false).await?.paused;
        let shards: Vec<u32> = (0..sweep.shard_count.max(1)).collect();
        // The reaper reads each band from its very oldest end, not from the
        // horizon: a task that may wait as long as the largest TTL is past
        // the horizon as it expires, and one claimed just before its expiry
        // by the time its lease lapses; no reader would shed either. Below
        // the horizon every task has expired, so the read there costs only
        // what is still to shed.
        let reaped = sweep
            .store
            .reap(
                &shards,
                now,
                0,
                self.clock.instant().into_std() + REAP_BUDGET,
            )
            .await?;
        tracing::info!(
            event = "sweep.reaped",
            shed = reaped.shed,
            read = reaped.read,
            lost = reaped.lost,
            cutShort = reaped.cut_short
        );
        let per_shard = futures::future::try_join_all(
            (0..sweep.shard_count.max(1))
                .map(|shard| sweep.store.claimable_depth_in(shard, now, horizon)),
        )
        .await?;
        let depth: usize = per_shard.iter().sum();
        let groups = Groups {
            all: false,
            named: per_shard
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(shard, _)| lifo_core::groups::group_of(shard as u32, self.fanout.processors))
                .collect(),
            ..Groups::default()
        };
        let mut outcome = TriggerOutcome {
            signals: usize::from(depth > 0),
            depth: Some(depth),
            paused: Some(paused),
            shed: reaped.shed,
            ..TriggerOutcome::default()
        };
        if depth > 0 && !paused {
            outcome.wakeups = self.publish("sweep", &groups).await?;
        }
        tracing::info!(
            event = "sweep.end",
            depth = outcome.depth,
            paused,
            wakeups = outcome.wakeups
        );
        Ok(outcome)
    }

    /// Runs [`Trigger::handle_outcome`] and emits the invocation's metrics
    /// (what [`Trigger::handle`] does, returning what was done).
    pub async fn measured(&self, event: Value) -> Result<TriggerOutcome, TriggerError> {
        let outcome = self.handle_outcome(event).await?;
        let metrics = lifo_lambda::metrics::Metrics::new()
            .cold_start()
            .count("WakeupsPublished", outcome.wakeups)
            .count("TasksShed", outcome.shed)
            .count("RestAlarmsFailed", outcome.alarms_failed)
            // The old name, for one release (dashboards and alarms built on it).
            .count("TasksExpired", outcome.shed);
        let metrics = match outcome.depth {
            Some(depth) => metrics.count("QueueDepth", depth),
            None => metrics,
        };
        let metrics = match outcome.paused {
            Some(paused) => metrics.count("QueuePaused", usize::from(paused)),
            None => metrics,
        };
        metrics.emit();
        Ok(outcome)
    }

    /// One wake-up, or with more than one processor one per group named
    /// (every group for `all`); how many were published.
    async fn publish(&self, reason: &'static str, groups: &Groups) -> Result<usize, NotifyError> {
        let at = self.clock.now_ms();
        let wakeup = Wakeup {
            previous_trace: groups.previous_trace.clone(),
            wake_at: groups.wake_at,
            ..Wakeup::new("trigger", reason, at)
        };
        let targets = self.fanout.targets(groups.all, &groups.named);
        if groups.handovers.is_empty() {
            return self.fanout.wake_all(&wakeup, &targets).await;
        }
        // Each group's processor gets what its tail call handed over.
        for group in &targets {
            let wakeup = Wakeup {
                handover: groups.handovers.get(group).cloned(),
                ..wakeup.clone()
            };
            self.fanout.wake(&wakeup, *group).await?;
        }
        Ok(targets.len())
    }
}

#[cfg(test)]
mod tests;
