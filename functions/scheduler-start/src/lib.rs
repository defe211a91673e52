//! `scheduler-start`: starts the scheduled tasks that are due.
//!
//! Invoked by EventBridge hourly 00:00–05:00 UTC (the later runs recover
//! whatever an earlier run could not finish) or on demand with
//! `{"date": "YYYY-MM-DD"}` for a backfill. It reads every shard of the
//! due-date index for the run date and the `CATCH_UP_DAYS` before it, moves
//! each task SCHEDULED → PENDING with a conditional update (a task
//! cancelled or started meanwhile is skipped, never resurrected), then
//! wakes the processor once.
//!
//! Memory stays flat: ids are streamed a page at a time and at most
//! `parallelism` updates are in flight. It stops starting before the
//! invocation deadline; what is left stays SCHEDULED for the next run.

use chrono::{Days, NaiveDate};
use futures::{StreamExt, TryStreamExt, stream};
use lifo_core::model::due_key;
use lifo_core::store::Item;
use lifo_core::{Store, StoreError, now_ms};
use lifo_lambda::config::{self, ConfigError, Source};
use lifo_lambda::notify::Fanout;
use lifo_lambda::{Notifier, NotifyError, Wakeup};
use serde::Serialize;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Ids read per due-index page.
const PAGE: i32 = 500;
/// Tries of one start that is throttled.
const START_ATTEMPTS: u32 = 5;

/// Settings of scheduler-start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    pub table_name: String,
    pub process_topic_arn: String,
    pub due_shard_count: u32,
    pub catch_up_days: u32,
    pub parallelism: usize,
    pub default_ttl_seconds: u64,
    pub retention_seconds: u64,
    /// Kept free before the invocation deadline.
    pub deadline_margin: Duration,
    /// Processors (`PROCESSOR_COUNT`): one wake-up per shard group.
    pub processors: u32,
}

impl SchedulerConfig {
    pub fn from_source(src: &impl Source) -> Result<Self, ConfigError> {
        Ok(Self {
            table_name: config::required(src, "TABLE_NAME")?,
            process_topic_arn: config::required(src, "PROCESS_TOPIC_ARN")?,
            due_shard_count: config::due_shard_count(src)?,
            catch_up_days: config::catch_up_days(src)?,
            parallelism: config::parsed(src, "PARALLELISM", 32usize, 1..=256)?,
            default_ttl_seconds: config::task_ttl_seconds(src, config::max_ttl_seconds(src)?)?,
            retention_seconds: config::retention_seconds(src)?,
            deadline_margin: config::millis(src, "DEADLINE_MARGIN_MS", 5_000, 0..=120_000)?,
            processors: config::processor_count(src)?,
        })
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("invalid event: {0}")]
    Invalid(String),
    #[error("reading the due index failed")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Wake(#[from] NotifyError),
}

impl From<SchedulerError> for lambda_runtime::Diagnostic {
    fn from(e: SchedulerError) -> Self {
        let error_type = match &e {
            SchedulerError::Invalid(_) => "InvalidEvent",
            SchedulerError::Store(_) => "StoreError",
            SchedulerError::Wake(_) => "PublishFailed",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.into(),
            error_message: lifo_core::error::chain(&e),
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartReport {
    pub run_date: String,
    /// Due dates covered, oldest first.
    pub dates: Vec<String>,
    /// Due-index partitions read (dates × shards).
    pub partitions: usize,
    pub pages: usize,
    pub started: usize,
    /// Cancelled or already started meanwhile: skipped, never resurrected.
    pub skipped: usize,
    /// Starts that failed after retries (left SCHEDULED for the next run).
    pub errors: usize,
    /// Throttled starts that were retried.
    pub throttle_retries: usize,
    /// The deadline came first: the rest stays SCHEDULED for the next run.
    pub stopped_early: bool,
    pub woke_processor: bool,
    /// Wake-ups published: one per shard group (the `WakeupsPublished`
    /// metric).
    pub wakeups: usize,
    pub elapsed_ms: u64,
}

/// The run date an event asks for: the date of an EventBridge event's
/// `time`, or `{"date": "YYYY-MM-DD"}` (also as an EventBridge `detail`).
pub fn run_date(event: &Value) -> Result<NaiveDate, SchedulerError> {
    let explicit = event.get("date").or_else(|| event.pointer("/detail/date"));
    if let Some(d) = explicit {
        let text = d
            .as_str()
            .ok_or_else(|| SchedulerError::Invalid("date must be a string YYYY-MM-DD".into()))?;
        return NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .filter(|_| text.len() == 10)
            .ok_or_else(|| {
                SchedulerError::Invalid(format!(
                    "date {text:?} is not a date of the form YYYY-MM-DD"
                ))
            });
    }
    if event.get("source").and_then(Value::as_str) == Some("aws.events") {
        let time = event
            .get("time")
            .and_then(Value::as_str)
            .ok_or_else(|| SchedulerError::Invalid("an EventBridge event without time".into()))?;
        return chrono::DateTime::parse_from_rfc3339(time)
            .map(|t| t.date_naive())
            .map_err(|e| SchedulerError::Invalid(format!("time {time:?}: {e}")));
    }
    Err(SchedulerError::Invalid(
        "expected an EventBridge scheduled event or {\"date\": \"YYYY-MM-DD\"}".into(),
    ))
}

/// The scheduler-start handler.
#[derive(Debug, Clone)]
pub struct Scheduler {
    store: Store,
    /// The process topic, one wake-up per shard group.
    wake: Fanout,
    config: SchedulerConfig,
}

#[derive(Default)]
struct Counters {
    pages: AtomicUsize,
    started: AtomicUsize,
    skipped: AtomicUsize,
    errors: AtomicUsize,
    throttle_retries: AtomicUsize,
}

impl Scheduler {
    pub fn new(store: Store, wake: Notifier, config: SchedulerConfig) -> Self {
        Self {
            store,
            wake: Fanout::new(wake, config.processors),
            config,
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// [`Scheduler::handle`] for the event as the runtime hands it over.
    pub async fn handle_raw(
        &self,
        event: &serde_json::value::RawValue,
        deadline: SystemTime,
    ) -> Result<StartReport, SchedulerError> {
        let event = lifo_lambda::event::parse(event)
            .map_err(|e| SchedulerError::Invalid(format!("the event is {e}")))?;
        self.handle(event, deadline).await
    }

    /// Runs for the date `event` names, until done or `deadline`.
    pub async fn handle(
        &self,
        event: Value,
        deadline: SystemTime,
    ) -> Result<StartReport, SchedulerError> {
        let date = run_date(&event)?;
        self.run(date, deadline).await
    }

    /// Starts every task due on `date` or up to `catch_up_days` before it.
    pub async fn run(
        &self,
        date: NaiveDate,
        deadline: SystemTime,
    ) -> Result<StartReport, SchedulerError> {
        let began = Instant::now();
        let stop_at = began
            + deadline
                .duration_since(SystemTime::now())
                .unwrap_or_default()
                .saturating_sub(self.config.deadline_margin);
        let dates: Vec<String> = (0..=self.config.catch_up_days)
            .rev()
            .filter_map(|back| date.checked_sub_days(Days::new(u64::from(back))))
            .map(|d| d.format("%Y-%m-%d").to_string())
            .collect();
        let partitions: Vec<String> = dates
            .iter()
            .flat_map(|d| (0..self.config.due_shard_count).map(move |s| due_key(d, s)))
            .collect();
        let counters = Counters::default();
        let parallelism = self.config.parallelism.max(1);

        // Every partition's ids, a page at a time, read lazily: at most
        // `parallelism` partitions are open and one page each is held.
        let ids = stream::iter(partitions.iter().cloned())
            .map(|key| Box::pin(self.partition_ids(key, &counters)))
            .flatten_unordered(parallelism);
        let stopped_early = AtomicBool::new(false);
        ids.take_while(|_| {
            let go = Instant::now() < stop_at;
            if !go {
                stopped_early.store(true, Ordering::Relaxed);
            }
            futures::future::ready(go)
        })
        .map(|id| self.start_one(id, &counters))
        .buffer_unordered(parallelism)
        .try_collect::<()>()
        .await?;

        let started = counters.started.load(Ordering::Relaxed);
        // One wake-up per shard group (the tasks are spread over all).
        let wakeups = if started > 0 {
            let wakeup = Wakeup::new("scheduler-start", "due-tasks", now_ms());
            let every = self.wake.targets(true, &Default::default());
            self.wake.wake_all(&wakeup, &every).await?
        } else {
            0
        };
        let report = StartReport {
            run_date: date.format("%Y-%m-%d").to_string(),
            dates,
            partitions: partitions.len(),
            pages: counters.pages.load(Ordering::Relaxed),
            started,
            skipped: counters.skipped.load(Ordering::Relaxed),
            errors: counters.errors.load(Ordering::Relaxed),
            throttle_retries: counters.throttle_retries.load(Ordering::Relaxed),
            stopped_early: stopped_early.load(Ordering::Relaxed),
            woke_processor: wakeups > 0,
            wakeups,
            elapsed_ms: began.elapsed().as_millis() as u64,
        };
        lifo_lambda::metrics::Metrics::new()
            .cold_start()
            .count("TasksStarted", report.started)
            .count("WakeupsPublished", report.wakeups)
            .emit();
        tracing::info!(event = "scheduler.end", runDate = %report.run_date, started = report.started,
            skipped = report.skipped, errors = report.errors, stoppedEarly = report.stopped_early,
            elapsedMs = report.elapsed_ms);
        Ok(report)
    }

    /// The ids of one due-index partition, page by page. A failed page is
    /// an error item (the whole run fails: the next run retries).
    fn partition_ids<'a>(
        &'a self,
        key: String,
        counters: &'a Counters,
    ) -> impl futures::Stream<Item = Result<String, StoreError>> + 'a {
        // State: the continuation key, or None when the partition is done.
        stream::unfold(Some(None::<Item>), move |state| {
            let key = key.clone();
            async move {
                let start = state?;
                match self.store.due_page(&key, PAGE, start).await {
                    Ok((ids, next)) => {
                        counters.pages.fetch_add(1, Ordering::Relaxed);
                        let next_state = next.map(Some);
                        Some((
                            stream::iter(ids.into_iter().map(Ok)).left_stream(),
                            next_state,
                        ))
                    }
                    Err(e) => Some((stream::iter([Err(e)]).right_stream(), None)),
                }
            }
        })
        .flatten()
    }

    /// Starts one task; cancelled or already started ones are skipped.
    async fn start_one(
        &self,
        id: Result<String, StoreError>,
        counters: &Counters,
    ) -> Result<(), SchedulerError> {
        let id = id?;
        for attempt in 1..=START_ATTEMPTS {
            match self
                .store
                .start(
                    &id,
                    now_ms(),
                    self.config.default_ttl_seconds,
                    self.config.retention_seconds,
                )
                .await
            {
                Ok(_) => {
                    counters.started.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(StoreError::ConditionFailed { current, .. }) => {
                    counters.skipped.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(event = "scheduler.skipped", taskId = %id,
                        status = current.as_ref().map_or("gone", |t| t.task_status.as_str()));
                    return Ok(());
                }
                Err(e) if e.is_throttled() && attempt < START_ATTEMPTS => {
                    counters.throttle_retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(lifo_core::store::resend_wait(attempt)).await;
                }
                Err(e) => {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(event = "scheduler.start_failed", taskId = %id, error = %lifo_core::error::Chain(&e),
                        "left SCHEDULED for the next run");
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
