//! The queue an operation acts on: its table, its settings and how tasks
//! are created on it.

use crate::OpsError;
use crate::create::CreateResponse;
use lifo_core::Store;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The stack's settings that the operations need (the template's
/// parameters of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// `ShardCount`: claimable index shards.
    pub shards: u32,
    /// `DueShardCount`: due-date index shards.
    pub due_shards: u32,
    /// `MaxTaskTtlSeconds`: bounds what `stats` reads of the index.
    pub max_ttl_seconds: u64,
    /// `TaskTtlSeconds`: the TTL of a created or retried task that gives none.
    pub task_ttl_seconds: u64,
    /// `RetentionSeconds`: how long tasks stay readable after they expire.
    pub retention_seconds: u64,
}

impl Default for Settings {
    /// The template's defaults.
    fn default() -> Self {
        Self {
            shards: 1,
            due_shards: 50,
            max_ttl_seconds: 604_800,
            task_ttl_seconds: 3600,
            retention_seconds: 604_800,
        }
    }
}

impl Settings {
    /// The oldest claimable index entry a read of the queue at `now` (epoch
    /// ms) may need: `MaxTaskTtlSeconds` back. Checked: a setting too large
    /// for milliseconds reaches back to 1970, never wraps to the future.
    pub fn horizon(&self, now: u64) -> u64 {
        self.max_ttl_seconds
            .checked_mul(1000)
            .map_or(0, |ttl_ms| now.saturating_sub(ttl_ms))
    }
}

/// A boxed future (what [`Produce`] returns, so it can be a trait object).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Writes a create request, given as its JSON text (a payload's numbers
/// keep every digit only as text): create's own code in this process, or a
/// deployed CreateFunction invoked by the `lifo` command.
pub trait Produce: std::fmt::Debug + Send + Sync {
    fn create(&self, request: String) -> BoxFuture<'_, Result<CreateResponse, OpsError>>;
}

/// Create's own code against the table (validation, limits, wake-ups).
impl Produce for crate::create::Creator {
    fn create(&self, request: String) -> BoxFuture<'_, Result<CreateResponse, OpsError>> {
        Box::pin(async move { Ok(self.handle_text(&request).await?) })
    }
}

/// The queue: its table, settings and producer.
#[derive(Debug, Clone)]
pub struct Queue {
    pub store: Store,
    pub settings: Settings,
    pub producer: Arc<dyn Produce>,
}

impl Queue {
    /// A queue whose tasks are created by create's own code on `store`
    /// with `settings` (no wake-ups: the stream wakes the processor).
    pub fn new(store: Store, settings: Settings) -> Self {
        let creator = crate::create::Creator::new(store.clone(), create_config(&store, &settings));
        Self {
            store,
            settings,
            producer: Arc::new(creator),
        }
    }

    /// Writes `request` through the queue's producer, whole or not at all
    /// (create's rules). Its size is checked where its bytes are: by the
    /// API on the body's length, by the CLI on the file's, and by create
    /// itself (in process, or in the function a stack's producer invokes);
    /// not here again.
    pub async fn create(&self, request: Value) -> Result<CreateResponse, OpsError> {
        self.producer.create(request.to_string()).await
    }

    /// [`Queue::create`] of a request's JSON text, its payloads' numbers
    /// kept as written.
    pub async fn create_json(&self, request: String) -> Result<CreateResponse, OpsError> {
        self.producer.create(request).await
    }

    /// The same queue with another producer.
    pub fn with_producer(mut self, producer: Arc<dyn Produce>) -> Self {
        self.producer = producer;
        self
    }
}

/// Create's configuration for `settings`.
pub fn create_config(store: &Store, s: &Settings) -> crate::create::CreateConfig {
    crate::create::CreateConfig {
        shard_count: s.shards,
        due_shard_count: s.due_shards,
        max_ttl_seconds: s.max_ttl_seconds,
        default_ttl_seconds: s.task_ttl_seconds.min(s.max_ttl_seconds),
        retention_seconds: s.retention_seconds,
        ..crate::create::CreateConfig::new(store.table())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lifo --max-ttl-seconds 18446744073709551615 stats` once panicked
    /// here ("attempt to multiply with overflow") in a debug build, and in a
    /// release build wrapped into a horizon in the future (reading nothing).
    #[test]
    fn the_horizon_is_checked_not_wrapped() {
        let at = |max_ttl_seconds| {
            Settings {
                max_ttl_seconds,
                ..Settings::default()
            }
            .horizon(1_764_547_200_000)
        };
        assert_eq!(at(3600), 1_764_547_200_000 - 3_600_000);
        assert_eq!(at(u64::MAX), 0);
        assert_eq!(at(u64::MAX / 1000 + 1), 0);
        assert_eq!(at(u64::MAX / 1000), 0, "further back than 1970");
    }
}
