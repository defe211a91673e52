//! `create`: validates a request and writes new claimable tasks.
//!
//! Two request shapes (invoke from the console or from a producer):
//! - `{"count": N, "ttlSeconds"?: S}`: N demo tasks with generated payloads;
//! - `{"tasks": [{"taskId"?: "...", "payload": {...}, "ttlSeconds"?: S,
//!   "supersedeKey"?: "...", "priority"?: "high" | "normal" | "low",
//!   "tenant"?: "..."}, ...]}` (`tenant` defaults to `userId`).
//!
//! The whole request is validated before anything is written; a bad request
//! gets one error naming the field (`tasks[2].ttlSeconds: ...`). A taskId
//! chosen by the producer is idempotent: the second create of the same id
//! writes nothing and reports the id under `existing`. A task with a
//! `supersedeKey` ends the key's previous task (latest wins, see
//! [`lifo_core::store::supersede`]); tasks of one key in one request are
//! written in request order, so the last one wins.

use futures::{StreamExt, TryStreamExt};
use lifo_core::clock::SharedClock;
use lifo_core::store::Queue;
use lifo_core::{Store, StoreError, Task};
use lifo_lambda::Wakeup;
use lifo_lambda::config::{self, ConfigError, Source};
use lifo_lambda::notify::Fanout;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// Most tasks one request may create.
pub const MAX_TASKS_PER_REQUEST: usize = 1000;
/// Largest create request, as JSON: what a synchronous Lambda invoke
/// carries (6 MB). Lambda refuses a larger one before create runs, so it
/// could never name the field; every path that builds a request (the CLI,
/// a local create) checks this first, the same way.
pub const MAX_REQUEST_BYTES: usize = 6 * 1024 * 1024;

/// Refuses a request of `bytes` over [`MAX_REQUEST_BYTES`].
pub fn check_request_size(bytes: usize) -> Result<(), CreateError> {
    if bytes > MAX_REQUEST_BYTES {
        return Err(invalid(
            "(request)",
            format!(
                "is {bytes} bytes; a create request is at most {MAX_REQUEST_BYTES} \
                 (a synchronous Lambda invoke's 6 MB): send fewer or smaller tasks per call"
            ),
        ));
    }
    Ok(())
}
/// Conditional puts in flight at once for producer-supplied ids.
const PUT_CONCURRENCY: usize = 16;

/// Settings of the create function (from the environment in Lambda).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateConfig {
    pub table_name: String,
    pub shard_count: u32,
    pub default_ttl_seconds: u64,
    pub max_ttl_seconds: u64,
    /// Shards of the due-date index.
    pub due_shard_count: u32,
    /// How long tasks stay readable after they expire.
    pub retention_seconds: u64,
    /// Days after its due date a scheduled task may still be started.
    pub catch_up_days: u32,
}

impl CreateConfig {
    /// The defaults of template.yaml for `table_name`.
    pub fn new(table_name: impl Into<String>) -> Self {
        Self {
            table_name: table_name.into(),
            shard_count: 1,
            default_ttl_seconds: 3600,
            max_ttl_seconds: 604_800,
            due_shard_count: 50,
            retention_seconds: lifo_core::model::DEFAULT_RETENTION_SECONDS,
            catch_up_days: 7,
        }
    }

    pub fn from_source(src: &impl Source) -> Result<Self, ConfigError> {
        let max_ttl_seconds = config::max_ttl_seconds(src)?;
        Ok(Self {
            table_name: config::required(src, "TABLE_NAME")?,
            shard_count: config::shard_count(src)?,
            default_ttl_seconds: config::task_ttl_seconds(src, max_ttl_seconds)?,
            max_ttl_seconds,
            due_shard_count: config::due_shard_count(src)?,
            retention_seconds: config::retention_seconds(src)?,
            catch_up_days: config::catch_up_days(src)?,
        })
    }
}

/// Why a create request did not write.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The request is malformed; nothing was written.
    #[error("invalid request: {field}: {message}")]
    Invalid { field: String, message: String },
    /// Writing failed part-way (see the message for how many were written).
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> CreateError {
    CreateError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// What a create wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateResponse {
    /// Ids of the tasks written by this request, in request order.
    pub created: Vec<String>,
    /// Producer-supplied ids that already existed (nothing written for them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub existing: Vec<String>,
    /// Tasks with the same `supersedeKey` that this request's writes ended
    /// SUPERSEDED (they will never start): earlier ones its tasks
    /// superseded, and its own tasks that arrived after a newer one of
    /// their key (also in `created`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<String>,
}

/// How long after a wake-up for a group this instance publishes no other
/// for it: the processor that wake-up starts (or the one already running,
/// which it finds busy) keeps looking for at least process's `LINGER_MS`
/// (1 s) after its last work, so it sees a task created meanwhile; and if
/// that processor ends first, the throttled wake-up's retry (about 1 s
/// later) starts the next. Under load this turns one publish per create
/// call into one per second per instance.
pub const WAKE_DEBOUNCE: std::time::Duration = std::time::Duration::from_millis(900);

/// The create function's handler.
#[derive(Debug, Clone)]
pub struct Creator<Q = Store> {
    store: Q,
    config: CreateConfig,
    /// Where create announces new claimable tasks: the process topic, one
    /// wake-up per shard group that got some.
    wakeups: Option<Fanout>,
    /// When this instance last published a wake-up, per group.
    woken: std::sync::Arc<
        std::sync::Mutex<std::collections::HashMap<Option<u32>, lifo_core::clock::Instant>>,
    >,
    /// Where it reads the time ([`lifo_core::clock`]).
    clock: SharedClock,
}

impl<Q: Queue> Creator<Q> {
    /// Writing to `store`: the DynamoDB [`Store`] as deployed, or the
    /// in-memory model in a simulation.
    pub fn new(store: Q, config: CreateConfig) -> Self {
        Self {
            store,
            config,
            wakeups: None,
            woken: Default::default(),
            clock: lifo_core::clock::system(),
        }
    }

    /// Reading the time from `clock` (a simulation's virtual time).
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Wakes the processor itself once its tasks are written (and marks
    /// them `announced`, so the stream does not wake it again): the first
    /// task into an idle queue starts without waiting for the stream's
    /// batching window. Without this, only the stream (and the sweep)
    /// wakes the processor.
    pub fn with_wakeups(mut self, wakeups: Fanout) -> Self {
        self.wakeups = Some(wakeups);
        self
    }

    pub fn store(&self) -> &Q {
        &self.store
    }

    /// [`Creator::handle`] for the event as the runtime hands it over: an
    /// event nested too deeply for the JSON parser is an invalid request too.
    pub async fn handle_raw(&self, event: &RawValue) -> Result<CreateResponse, CreateError> {
        self.handle_text(event.get()).await
    }

    /// [`Creator::handle_text`] of a request as serde_json values (their
    /// numbers are what `Value` holds: a `u64`, `i64` or `f64`).
    pub async fn handle(&self, event: Value) -> Result<CreateResponse, CreateError> {
        self.handle_text(&event.to_string()).await
    }

    /// Validates the request `text` completely, then writes it, then wakes
    /// the processor for the new claimable tasks (see
    /// [`Creator::with_wakeups`]). Payloads are kept as written: their
    /// numbers keep every digit, or are refused when DynamoDB would not.
    pub async fn handle_text(&self, text: &str) -> Result<CreateResponse, CreateError> {
        check_request_size(text.len())?;
        let mut planned = self.validate_text(text, self.clock.now_ms())?;
        if let Some(trace) = lifo_lambda::xray::current() {
            for p in &mut planned {
                p.task.created_trace = Some(trace.root.to_string());
            }
        }
        if self.wakeups.is_some() {
            for p in &mut planned {
                p.task.announced = p.task.claimable_at.is_some();
            }
        }
        let groups = self.groups_of(&planned);
        let response = self.write(planned).await?;
        let published = if response.created.is_empty() {
            0
        } else {
            self.wake(&groups).await
        };
        lifo_lambda::metrics::Metrics::new()
            .cold_start()
            .count("TasksCreated", response.created.len())
            .count("TasksSuperseded", response.superseded.len())
            .count("WakeupsPublished", published)
            .emit();
        Ok(response)
    }

    /// The shard groups of the claimable tasks in `planned`.
    fn groups_of(&self, planned: &[Planned]) -> std::collections::BTreeSet<u32> {
        let processors = self.wakeups.as_ref().map_or(1, |w| w.processors.max(1));
        planned
            .iter()
            .filter(|p| p.task.claimable_at.is_some())
            .map(|p| lifo_core::groups::group_of(p.task.lifo_shard, processors))
            .collect()
    }

    /// One wake-up per group (one naming none with a single processor).
    /// A failed publish is logged, not returned: the tasks are written, and
    /// the sweep finds them within a minute. How many were published.
    async fn wake(&self, groups: &std::collections::BTreeSet<u32>) -> usize {
        let Some(w) = &self.wakeups else { return 0 };
        let wakeup = Wakeup::new("create", "created", self.clock.now_ms());
        let now = self.clock.instant();
        let mut published = 0;
        for group in w.targets(false, groups) {
            let recent = self.woken.lock().ok().is_some_and(|w| {
                w.get(&group)
                    .is_some_and(|at| now.saturating_duration_since(*at) < WAKE_DEBOUNCE)
            });
            if recent {
                continue;
            }
            match w.wake(&wakeup, group).await {
                Ok(_) => {
                    published += 1;
                    if let Ok(mut w) = self.woken.lock() {
                        w.insert(group, now);
                    }
                }
                Err(e) => tracing::error!(event = "wakeup.publish_failed", group,
                    error = %lifo_core::error::Chain(&e),
                    "the tasks are written; the sweep wakes the processor within a minute"),
            }
        }
        published
    }

    async fn write(&self, planned: Vec<Planned>) -> Result<CreateResponse, CreateError> {
        let (keyed, planned): (Vec<Planned>, Vec<Planned>) = planned
            .into_iter()
            .partition(|p| p.task.supersede_key.is_some());
        let (supplied, generated): (Vec<Planned>, Vec<Planned>) =
            planned.into_iter().partition(|p| p.supplied_id);
        let generated: Vec<Task> = generated.into_iter().map(|p| p.task).collect();
        self.store.put_new(&generated).await?;
        let outcomes: Vec<(String, bool)> =
            futures::stream::iter(supplied.into_iter().map(|p| async move {
                let created = self.store.put_if_absent(&p.task).await?;
                Ok::<_, StoreError>((p.task.task_id, created))
            }))
            .buffered(PUT_CONCURRENCY)
            .try_collect()
            .await?;
        let mut response = CreateResponse {
            created: generated.into_iter().map(|t| t.task_id).collect(),
            ..CreateResponse::default()
        };
        for (id, created) in outcomes {
            if created {
                response.created.push(id)
            } else {
                response.existing.push(id)
            }
        }
        self.write_keyed(keyed, &mut response).await?;
        tracing::info!(
            created = response.created.len(),
            existing = response.existing.len(),
            "tasks created"
        );
        Ok(response)
    }

    /// Writes the keyed tasks: one key's tasks one after another, in
    /// request order (the last one wins), several keys at once.
    async fn write_keyed(
        &self,
        keyed: Vec<Planned>,
        response: &mut CreateResponse,
    ) -> Result<(), CreateError> {
        let mut by_key: Vec<(String, Vec<Planned>)> = Vec::new();
        for p in keyed {
            let key = p.task.supersede_key.clone().unwrap_or_default();
            match by_key.iter_mut().find(|(k, _)| *k == key) {
                Some((_, list)) => list.push(p),
                None => by_key.push((key, vec![p])),
            }
        }
        let results: Vec<Vec<(Planned, lifo_core::store::Keyed)>> =
            futures::stream::iter(by_key.into_iter().map(|(_, list)| async move {
                let mut done = Vec::with_capacity(list.len());
                for p in list {
                    let keyed = self
                        .store
                        .put_keyed_at(&p.task, self.clock.now_ms())
                        .await?;
                    done.push((p, keyed));
                }
                Ok::<_, StoreError>(done)
            }))
            .buffered(PUT_CONCURRENCY)
            .try_collect()
            .await?;
        for (p, keyed) in results.into_iter().flatten() {
            let id = p.task.task_id;
            if keyed.created {
                response.created.push(id.clone());
            } else {
                response.existing.push(id.clone());
            }
            if let Some(old) = keyed.superseded {
                tracing::info!(event = "task.superseded", taskId = %old, supersededBy = %id,
                    key = p.task.supersede_key.as_deref().unwrap_or(""));
                response.superseded.push(old);
            }
            if let Some(newer) = keyed.arrived_superseded_by {
                tracing::info!(event = "task.superseded_on_arrival", taskId = %id, supersededBy = %newer,
                    key = p.task.supersede_key.as_deref().unwrap_or(""),
                    "a newer task of its key was written first; this one never starts");
                response.superseded.push(id.clone());
            }
            if let Some(old) = keyed.marked {
                tracing::info!(event = "task.marked_superseded", taskId = %old, supersededBy = %id,
                    "it runs now; it will not start again");
            }
        }
        Ok(())
    }
}

mod checks;
mod plan;

pub use checks::{MAX_PAYLOAD_DEPTH, check_id, check_key};
pub use plan::MAX_DUE_IN_DAYS;
use plan::Planned;

#[cfg(test)]
mod tests;

/// A refused create, as the operations report it.
impl From<CreateError> for crate::OpsError {
    fn from(e: CreateError) -> Self {
        match e {
            CreateError::Invalid { field, message } => Self::Invalid { field, message },
            CreateError::Store(e) => Self::Store(e),
        }
    }
}
