//! A small async API over the queue table.
//!
//! Every request asks for `ReturnConsumedCapacity = INDEXES` and adds what it
//! spent to a [`CapacityMeter`], so the cost per task is measured, not guessed.

use crate::expr::Step;
use crate::expr::{self, LIFO_INDEX};
use crate::lifo::{Candidate, Order, merge};
use crate::model::{Task, TaskStatus};
use crate::state::{self, IllegalTransition, Transition};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeValue, ConsumedCapacity, PutRequest, ReturnConsumedCapacity, ReturnValue,
    ReturnValuesOnConditionCheckFailure, WriteRequest,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Largest batch BatchWriteItem accepts.
pub const BATCH_WRITE_MAX: usize = 25;
/// How often unprocessed batch items are retried before giving up.
const UNPROCESSED_RETRIES: u32 = 8;

/// A DynamoDB item (also a continuation key).
pub type Item = HashMap<String, AttributeValue>;

/// What went wrong talking to the table.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The condition did not hold: another worker moved the task first, or
    /// the id already exists. `current` is the item as DynamoDB saw it.
    #[error("condition failed for task {task_id} (current status: {})",
        current.as_ref().map_or("unknown", |t| t.task_status.as_str()))]
    ConditionFailed {
        task_id: String,
        current: Option<Box<Task>>,
    },
    /// DynamoDB throttled the request even after the SDK's retries.
    #[error("{operation} throttled: {message}")]
    Throttled {
        operation: &'static str,
        message: String,
    },
    /// The state machine refused the move; nothing was sent.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    /// An item that does not parse as a task.
    #[error("task {task_id} is malformed: {reason}")]
    Malformed { task_id: String, reason: String },
    /// Anything else (network, permissions, validation).
    #[error("{operation} failed: {message}")]
    Other {
        operation: &'static str,
        message: String,
    },
}

/// Why a cancel was refused.
#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    #[error("no task {task_id}")]
    NotFound { task_id: String },
    #[error("task {task_id} is {status}; only SCHEDULED tasks can be cancelled")]
    NotScheduled { task_id: String, status: TaskStatus },
    #[error(transparent)]
    Store(StoreError),
}

impl StoreError {
    pub fn is_condition_failed(&self) -> bool {
        matches!(self, Self::ConditionFailed { .. })
    }
}

const THROTTLE_CODES: [&str; 4] = [
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    "ThrottlingError",
];

fn classify<E, R>(operation: &'static str, err: &SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let message = DisplayErrorContext(err).to_string();
    match err.code() {
        Some(code) if THROTTLE_CODES.contains(&code) => {
            StoreError::Throttled { operation, message }
        }
        _ => StoreError::Other { operation, message },
    }
}

fn parse_task(item: Item) -> Result<Task, StoreError> {
    let task_id = match item.get(expr::attr::TASK_ID) {
        Some(AttributeValue::S(id)) => id.clone(),
        _ => "<no taskId>".to_owned(),
    };
    serde_dynamo::from_item(item).map_err(|e| StoreError::Malformed {
        task_id,
        reason: e.to_string(),
    })
}

/// What a kind of request has spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub requests: u64,
    /// Capacity units (write units for writes, read units for reads), table
    /// and indexes together.
    pub units: f64,
}

/// The kinds of request the meter tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Put,
    Claim,
    Finish,
    Requeue,
    Read,
    /// SCHEDULED → PENDING (scheduler-start).
    Start,
    /// Conditional writes whose condition failed. DynamoDB still charges
    /// them (1 write unit for an item under 1 KB) but returns no
    /// ConsumedCapacity with the error, so the meter books 1 unit each.
    Rejected,
}

/// What a write whose condition failed costs (an item under 1 KB).
const REJECTED_WRITE_UNITS: f64 = 1.0;

impl Op {
    pub const ALL: [Op; 7] = [
        Op::Put,
        Op::Claim,
        Op::Finish,
        Op::Requeue,
        Op::Read,
        Op::Start,
        Op::Rejected,
    ];
    fn index(self) -> usize {
        self as usize
    }
    fn of(t: Transition) -> Self {
        match t {
            Transition::Claim | Transition::Reclaim => Op::Claim,
            Transition::Succeed | Transition::Fail | Transition::Abandon | Transition::Cancel => {
                Op::Finish
            }
            Transition::Start => Op::Start,
            Transition::RetryLater | Transition::RetryAfterError => Op::Requeue,
        }
    }
}

/// Capacity consumed, by kind of request. Shared by clones of a [`Store`].
#[derive(Debug, Default)]
pub struct CapacityMeter {
    requests: [AtomicU64; 7],
    milli_units: [AtomicU64; 7],
}

impl CapacityMeter {
    fn record<'a>(&self, op: Op, consumed: impl IntoIterator<Item = &'a ConsumedCapacity>) {
        let units: f64 = consumed
            .into_iter()
            .filter_map(|c| c.capacity_units())
            .sum();
        self.requests[op.index()].fetch_add(1, Ordering::Relaxed);
        self.milli_units[op.index()].fetch_add((units * 1000.0).round() as u64, Ordering::Relaxed);
    }

    fn record_rejected(&self) {
        let i = Op::Rejected.index();
        self.requests[i].fetch_add(1, Ordering::Relaxed);
        self.milli_units[i].fetch_add((REJECTED_WRITE_UNITS * 1000.0) as u64, Ordering::Relaxed);
    }

    pub fn spent(&self, op: Op) -> Spent {
        Spent {
            requests: self.requests[op.index()].load(Ordering::Relaxed),
            units: self.milli_units[op.index()].load(Ordering::Relaxed) as f64 / 1000.0,
        }
    }

    /// Write units of every kind of write.
    pub fn write_units(&self) -> f64 {
        [
            Op::Put,
            Op::Claim,
            Op::Finish,
            Op::Requeue,
            Op::Start,
            Op::Rejected,
        ]
        .into_iter()
        .map(|op| self.spent(op).units)
        .sum()
    }
}

/// The queue table.
#[derive(Debug, Clone)]
pub struct Store {
    client: Client,
    table: String,
    meter: Arc<CapacityMeter>,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            meter: Arc::default(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn meter(&self) -> &CapacityMeter {
        &self.meter
    }

    /// Writes new tasks whose ids are fresh (generated here), 25 per
    /// BatchWriteItem; unprocessed items are retried with exponential backoff.
    /// Returns how many were written; on error, tasks before the failing
    /// batch are written and the error says how many.
    pub async fn put_new(&self, tasks: &[Task]) -> Result<usize, StoreError> {
        let mut written = 0;
        for chunk in tasks.chunks(BATCH_WRITE_MAX) {
            let mut requests = Vec::with_capacity(chunk.len());
            for task in chunk {
                let item: Item =
                    serde_dynamo::to_item(task).map_err(|e| StoreError::Malformed {
                        task_id: task.task_id.clone(),
                        reason: e.to_string(),
                    })?;
                let put = PutRequest::builder()
                    .set_item(Some(item))
                    .build()
                    .map_err(|e| StoreError::Other {
                        operation: "BatchWriteItem",
                        message: e.to_string(),
                    })?;
                requests.push(WriteRequest::builder().put_request(put).build());
            }
            self.batch_write(requests).await.map_err(|e| match e {
                StoreError::Throttled { operation, message } => StoreError::Throttled {
                    operation,
                    message: format!("{message} ({written} tasks were written before)"),
                },
                StoreError::Other { operation, message } => StoreError::Other {
                    operation,
                    message: format!("{message} ({written} tasks were written before)"),
                },
                other => other,
            })?;
            written += chunk.len();
        }
        Ok(written)
    }

    async fn batch_write(&self, mut requests: Vec<WriteRequest>) -> Result<(), StoreError> {
        let mut attempt = 0;
        loop {
            let out = self
                .client
                .batch_write_item()
                .request_items(self.table.clone(), requests)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await
                .map_err(|e| classify("BatchWriteItem", &e))?;
            self.meter.record(Op::Put, out.consumed_capacity());
            requests = out
                .unprocessed_items
                .and_then(|mut m| m.remove(&self.table))
                .unwrap_or_default();
            if requests.is_empty() {
                return Ok(());
            }
            attempt += 1;
            if attempt > UNPROCESSED_RETRIES {
                return Err(StoreError::Throttled {
                    operation: "BatchWriteItem",
                    message: format!(
                        "{} items still unprocessed after {UNPROCESSED_RETRIES} retries",
                        requests.len()
                    ),
                });
            }
            tokio::time::sleep(backoff(attempt)).await;
        }
    }

    /// Writes a task whose id the producer chose, only if no task has that id
    /// yet. Returns `false` when it already existed (nothing written).
    pub async fn put_if_absent(&self, task: &Task) -> Result<bool, StoreError> {
        let item: Item = serde_dynamo::to_item(task).map_err(|e| StoreError::Malformed {
            task_id: task.task_id.clone(),
            reason: e.to_string(),
        })?;
        let cond = expr::put_if_absent();
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(&cond.condition)
            .set_expression_attribute_names(Some(cond.names_map()))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.meter.record(Op::Put, out.consumed_capacity());
                Ok(true)
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                self.meter.record_rejected();
                Ok(false)
            }
            Err(e) => Err(classify("PutItem", &e)),
        }
    }

    /// The first `want` claimable, unexpired tasks across shards
    /// `0..shard_count` in `order`: newest first for [`Order::Lifo`]. Each
    /// shard is queried in that order in parallel and the answers are merged
    /// (k-way), so the order holds across shards. `horizon_ms`: nothing that
    /// became claimable at or before it can still be alive (see
    /// [`expr::claimable`]).
    pub async fn claimable(
        &self,
        order: Order,
        shard_count: u32,
        want: usize,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<Vec<Candidate>, StoreError> {
        if want == 0 {
            return Ok(Vec::new());
        }
        let per_shard = futures::future::try_join_all(
            (0..shard_count.max(1))
                .map(|shard| self.first_in_shard(order, shard, want, now_ms, horizon_ms)),
        )
        .await?;
        Ok(merge(per_shard, want, order))
    }

    /// A query of one shard of the LIFO index with its key condition and
    /// filter ([`expr::claimable`]), asking for ConsumedCapacity.
    fn claimable_query(
        &self,
        q: &expr::Expr,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.index_query(LIFO_INDEX, q)
    }

    /// A query of `index` with `q`'s key condition (and filter, if any),
    /// asking for ConsumedCapacity.
    fn index_query(
        &self,
        index: &str,
        q: &expr::Expr,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(index)
            .key_condition_expression(&q.main)
            .set_expression_attribute_names(Some(q.names_map()))
            .set_expression_attribute_values(q.values_map())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        if q.condition.is_empty() {
            query
        } else {
            query.filter_expression(&q.condition)
        }
    }

    /// One page of task ids from a keys-only index.
    async fn index_ids(
        &self,
        query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
        start: Option<Item>,
    ) -> Result<(Vec<String>, Option<Item>), StoreError> {
        let out = query
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| classify("Query", &e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        let ids = out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|mut item| match item.remove(expr::attr::TASK_ID) {
                Some(AttributeValue::S(id)) => Some(id),
                _ => None,
            })
            .collect();
        Ok((ids, out.last_evaluated_key))
    }

    /// How many tasks are claimable now, across shards (the queue depth).
    /// A COUNT query per shard over the same key condition and filter as
    /// [`Store::claimable`]: it reads the whole claimable index, so
    /// it is meant for the once-a-minute sweep, not the claim loop.
    pub async fn claimable_depth(
        &self,
        shard_count: u32,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<usize, StoreError> {
        let counts = futures::future::try_join_all(
            (0..shard_count.max(1)).map(|shard| self.claimable_depth_in(shard, now_ms, horizon_ms)),
        )
        .await?;
        Ok(counts.into_iter().sum())
    }

    /// Claimable tasks in one shard (a COUNT query, paged).
    pub async fn claimable_depth_in(
        &self,
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<usize, StoreError> {
        self.count(LIFO_INDEX, &expr::claimable(shard, now_ms, horizon_ms))
            .await
    }

    /// Tasks of one shard running under a live lease ([`expr::leased`]).
    pub async fn leased_in(
        &self,
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<usize, StoreError> {
        self.count(LIFO_INDEX, &expr::leased(shard, now_ms, horizon_ms))
            .await
    }

    /// Tasks of one shard shed by expiry since `since_ms`
    /// ([`expr::expired_since`]); `max_ttl_ms` bounds what is read.
    pub async fn expired_in(
        &self,
        shard: u32,
        since_ms: u64,
        now_ms: u64,
        max_ttl_ms: u64,
    ) -> Result<usize, StoreError> {
        let horizon = since_ms.saturating_sub(max_ttl_ms);
        self.count(
            LIFO_INDEX,
            &expr::expired_since(shard, since_ms, now_ms, horizon),
        )
        .await
    }

    /// SCHEDULED tasks waiting in one due-index partition (`<date>#<shard>`).
    pub async fn due_count(&self, due_key: &str) -> Result<usize, StoreError> {
        self.count(expr::DUE_INDEX, &expr::due_partition(due_key))
            .await
    }

    /// Items of `index` that `q` matches (a COUNT query, paged).
    async fn count(&self, index: &str, q: &expr::Expr) -> Result<usize, StoreError> {
        let mut total = 0usize;
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .index_query(index, q)
                .select(aws_sdk_dynamodb::types::Select::Count)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| classify("Query", &e))?;
            self.meter.record(Op::Read, out.consumed_capacity());
            total += usize::try_from(out.count).unwrap_or(0);
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(total);
            }
        }
    }

    /// `claimableAt` of the newest (or, with `oldest`, the oldest) claimable
    /// task in one shard, if any.
    pub async fn edge_claimable(
        &self,
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
        oldest: bool,
    ) -> Result<Option<u64>, StoreError> {
        let q = expr::claimable(shard, now_ms, horizon_ms);
        let mut start: Option<Item> = None;
        loop {
            // Newest first, the first few entries are claimable. Oldest
            // first, the shed backlog comes first and is filtered out: read
            // it in whole (1 MB) pages.
            let query = self.claimable_query(&q).scan_index_forward(oldest);
            let out = if oldest { query } else { query.limit(25) }
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| classify("Query", &e))?;
            self.meter.record(Op::Read, out.consumed_capacity());
            if let Some(c) = out
                .items
                .unwrap_or_default()
                .into_iter()
                .find_map(|item| serde_dynamo::from_item::<_, Candidate>(item).ok())
            {
                return Ok(Some(c.claimable_at));
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(None);
            }
        }
    }

    async fn first_in_shard(
        &self,
        order: Order,
        shard: u32,
        want: usize,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<Vec<Candidate>, StoreError> {
        let q = expr::claimable(shard, now_ms, horizon_ms);
        let mut found = Vec::with_capacity(want);
        let mut start: Option<Item> = None;
        // Index items are tiny (keys + ttl): read a few more than needed so
        // that expired leftovers filtered out rarely cost a second page.
        let page = i32::try_from(want + 8).unwrap_or(i32::MAX);
        loop {
            let out = self
                .claimable_query(&q)
                .scan_index_forward(order.scan_index_forward())
                .limit(page)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| classify("Query", &e))?;
            self.meter.record(Op::Read, out.consumed_capacity());
            for item in out.items.unwrap_or_default() {
                match serde_dynamo::from_item::<_, Candidate>(item) {
                    Ok(c) => found.push(c),
                    Err(e) => tracing::warn!(shard, error = %e, "skipping malformed index entry"),
                }
            }
            start = out.last_evaluated_key;
            if found.len() >= want || start.is_none() {
                found.truncate(want);
                return Ok(found);
            }
        }
    }

    /// Applies `t` to a task whose status the caller believes is `current`,
    /// with one conditional UpdateItem, and returns the task as it is
    /// afterwards. An illegal move is refused before any request is sent; a
    /// failed condition returns the item as DynamoDB saw it.
    pub async fn apply(
        &self,
        task_id: &str,
        t: Transition,
        current: TaskStatus,
        step: &Step<'_>,
    ) -> Result<Task, StoreError> {
        let item = self
            .update(task_id, t, current, step, ReturnValue::AllNew)
            .await?;
        parse_task(item)
    }

    /// [`Store::apply`] for a caller that does not need the item back (a
    /// finish): DynamoDB returns nothing, so nothing is sent or parsed.
    pub async fn record(
        &self,
        task_id: &str,
        t: Transition,
        current: TaskStatus,
        step: &Step<'_>,
    ) -> Result<(), StoreError> {
        self.update(task_id, t, current, step, ReturnValue::None)
            .await
            .map(drop)
    }

    async fn update(
        &self,
        task_id: &str,
        t: Transition,
        current: TaskStatus,
        step: &Step<'_>,
        returns: ReturnValue,
    ) -> Result<Item, StoreError> {
        state::check(t, current)?;
        let e = expr::transition(t, step);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(task_id.to_owned()))
            .update_expression(&e.main)
            .condition_expression(&e.condition)
            .set_expression_attribute_names(Some(e.names_map()))
            .set_expression_attribute_values(e.values_map())
            .return_values(returns)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.meter.record(Op::of(t), out.consumed_capacity());
                Ok(out.attributes.unwrap_or_default())
            }
            Err(err) => {
                use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
                if let Some(UpdateItemError::ConditionalCheckFailedException(ex)) =
                    err.as_service_error()
                {
                    self.meter.record_rejected();
                    let current = ex
                        .item()
                        .and_then(|item| parse_task(item.clone()).ok())
                        .map(Box::new);
                    return Err(StoreError::ConditionFailed {
                        task_id: task_id.to_owned(),
                        current,
                    });
                }
                Err(classify("UpdateItem", &err))
            }
        }
    }

    /// Starts a scheduled task: SCHEDULED → PENDING, claimable from now,
    /// expiring `ttlSeconds` (or `default_ttl_seconds`) from now.
    pub async fn start(
        &self,
        task_id: &str,
        now_ms: u64,
        default_ttl_seconds: u64,
        retention_seconds: u64,
    ) -> Result<Task, StoreError> {
        let step = Step {
            now_ms,
            ttl_seconds: default_ttl_seconds,
            retention_seconds,
            ..Step::default()
        };
        self.apply(task_id, Transition::Start, TaskStatus::Scheduled, &step)
            .await
    }

    /// Cancels a task, only while it is SCHEDULED.
    pub async fn cancel(&self, task_id: &str, now_ms: u64) -> Result<Task, CancelError> {
        let step = Step {
            now_ms,
            reason: "cancelled",
            ..Step::default()
        };
        match self
            .apply(task_id, Transition::Cancel, TaskStatus::Scheduled, &step)
            .await
        {
            Ok(t) => Ok(t),
            Err(StoreError::ConditionFailed {
                current: Some(t), ..
            }) => Err(CancelError::NotScheduled {
                task_id: task_id.to_owned(),
                status: t.task_status,
            }),
            Err(StoreError::ConditionFailed { current: None, .. }) => Err(CancelError::NotFound {
                task_id: task_id.to_owned(),
            }),
            Err(e) => Err(CancelError::Store(e)),
        }
    }

    /// One page (up to `limit` ids) of a due index partition; `start` is
    /// the previous page's continuation.
    pub async fn due_page(
        &self,
        due_key: &str,
        limit: i32,
        start: Option<Item>,
    ) -> Result<(Vec<String>, Option<Item>), StoreError> {
        let q = expr::due_partition(due_key);
        self.index_ids(self.index_query(expr::DUE_INDEX, &q).limit(limit), start)
            .await
    }

    /// A user's tasks, newest first, `limit` at a time (all statuses:
    /// scheduled, running, finished, expired, cancelled). `start` continues
    /// from the previous page.
    pub async fn user_tasks(
        &self,
        user_id: &str,
        limit: i32,
        start: Option<Item>,
    ) -> Result<(Vec<Task>, Option<Item>), StoreError> {
        let q = expr::user_history(user_id);
        let query = self
            .index_query(expr::USER_INDEX, &q)
            .scan_index_forward(false)
            .limit(limit.clamp(1, 100));
        let (ids, next) = self.index_ids(query, start).await?;
        let mut found = self.get_many(&ids).await?;
        // BatchGetItem answers in any order: restore the index's order.
        let tasks = ids.iter().filter_map(|id| found.remove(id)).collect();
        Ok((tasks, next))
    }

    /// Up to 100 tasks by id (BatchGetItem, unprocessed keys retried).
    async fn get_many(&self, ids: &[String]) -> Result<HashMap<String, Task>, StoreError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let mut found = HashMap::new();
        if ids.is_empty() {
            return Ok(found);
        }
        let keys: Vec<Item> = ids
            .iter()
            .map(|id| {
                HashMap::from([(
                    expr::attr::TASK_ID.to_owned(),
                    AttributeValue::S(id.clone()),
                )])
            })
            .collect();
        let mut pending = Some(
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .map_err(|e| StoreError::Other {
                    operation: "BatchGetItem",
                    message: e.to_string(),
                })?,
        );
        let mut attempt = 0;
        while let Some(request) = pending.take() {
            let out = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await
                .map_err(|e| classify("BatchGetItem", &e))?;
            self.meter.record(Op::Read, out.consumed_capacity());
            for item in out
                .responses
                .and_then(|mut r| r.remove(&self.table))
                .unwrap_or_default()
            {
                match parse_task(item) {
                    Ok(t) => {
                        found.insert(t.task_id.clone(), t);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "skipping a malformed item in a user's history")
                    }
                }
            }
            pending = out
                .unprocessed_keys
                .and_then(|mut u| u.remove(&self.table))
                .filter(|k| !k.keys().is_empty());
            if pending.is_some() {
                attempt += 1;
                if attempt > UNPROCESSED_RETRIES {
                    return Err(StoreError::Throttled {
                        operation: "BatchGetItem",
                        message: "keys still unprocessed after retries".into(),
                    });
                }
                tokio::time::sleep(backoff(attempt)).await;
            }
        }
        Ok(found)
    }

    /// One task by id (strongly consistent).
    pub async fn get(&self, task_id: &str) -> Result<Option<Task>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(task_id.to_owned()))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| classify("GetItem", &e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        out.item.map(parse_task).transpose()
    }
}

/// 50 ms, 100 ms, 200 ms … capped at 3.2 s, with full jitter.
pub fn backoff(attempt: u32) -> Duration {
    let cap = 50u64 << attempt.min(6);
    Duration::from_millis(fastrand::u64(cap / 2..=cap))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::operation::batch_write_item::BatchWriteItemOutput;
    use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
    use aws_sdk_dynamodb::types::error::{
        ConditionalCheckFailedException, ProvisionedThroughputExceededException,
    };
    use aws_smithy_mocks::{RuleMode, mock, mock_client};

    fn step() -> Step<'static> {
        Step {
            now_ms: 1,
            token: 0,
            attempts: 1,
            lease_until: 2,
            max_attempts: 3,
            reason: "",
            history: &[],
            ..Step::default()
        }
    }

    fn task(id: &str, status: TaskStatus) -> Task {
        let mut t = Task::new_pending(id.into(), Default::default(), 1_000_000, 60, 1);
        t.task_status = status;
        t
    }

    #[tokio::test]
    async fn illegal_transition_sends_nothing() {
        let any = mock!(Client::update_item).then_output(|| UpdateItemOutput::builder().build());
        let client = mock_client!(aws_sdk_dynamodb, [&any]);
        let store = Store::new(client, "t");
        let err = store
            .apply("a", Transition::RetryLater, TaskStatus::Success, &step())
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Illegal(_)), "{err}");
        assert_eq!(any.num_calls(), 0);
    }

    #[tokio::test]
    async fn a_claim_asks_for_the_item_and_a_finish_for_nothing() {
        let claim = mock!(Client::update_item)
            .match_requests(|r| r.return_values() == Some(&ReturnValue::AllNew))
            .then_output(|| {
                let item: Item = serde_dynamo::to_item(task("a", TaskStatus::Taken)).unwrap();
                UpdateItemOutput::builder()
                    .set_attributes(Some(item))
                    .build()
            });
        let finish = mock!(Client::update_item)
            .match_requests(|r| r.return_values() == Some(&ReturnValue::None))
            .then_output(|| UpdateItemOutput::builder().build());
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&claim, &finish]);
        let store = Store::new(client, "t");
        let claimed = store
            .apply("a", Transition::Claim, TaskStatus::Pending, &step())
            .await
            .unwrap();
        assert_eq!(claimed.task_status, TaskStatus::Taken);
        store
            .record("a", Transition::Succeed, TaskStatus::Taken, &step())
            .await
            .unwrap();
        assert_eq!((claim.num_calls(), finish.num_calls()), (1, 1));
    }

    #[tokio::test]
    async fn conditional_failure_carries_the_current_item() {
        let current: Item = serde_dynamo::to_item(task("a", TaskStatus::Success)).unwrap();
        let rule = mock!(Client::update_item).then_error(move || {
            UpdateItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder()
                    .message("The conditional request failed")
                    .set_item(Some(current.clone()))
                    .build(),
            )
        });
        let client = mock_client!(aws_sdk_dynamodb, [&rule]);
        let store = Store::new(client, "t");
        let err = store
            .apply("a", Transition::Succeed, TaskStatus::Taken, &step())
            .await
            .unwrap_err();
        match err {
            StoreError::ConditionFailed { task_id, current } => {
                assert_eq!(task_id, "a");
                assert_eq!(current.map(|t| t.task_status), Some(TaskStatus::Success));
            }
            other => panic!("expected ConditionFailed, got {other}"),
        }
    }

    #[tokio::test]
    async fn throttling_is_typed() {
        let rule = mock!(Client::update_item).then_error(|| {
            UpdateItemError::ProvisionedThroughputExceededException(
                ProvisionedThroughputExceededException::builder()
                    .message("slow down")
                    .meta(
                        aws_sdk_dynamodb::error::ErrorMetadata::builder()
                            .code("ProvisionedThroughputExceededException")
                            .message("slow down")
                            .build(),
                    )
                    .build(),
            )
        });
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule], |c| {
            c.retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        });
        let store = Store::new(client, "t");
        let err = store
            .apply("a", Transition::Claim, TaskStatus::Pending, &step())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Throttled {
                    operation: "UpdateItem",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn unprocessed_batch_items_are_retried_until_written() {
        let tasks: Vec<Task> = (0..30)
            .map(|i| task(&format!("t{i}"), TaskStatus::Pending))
            .collect();
        // First call leaves 2 items unprocessed, every later call writes all.
        let leftover = {
            let item: Item = serde_dynamo::to_item(&tasks[0]).unwrap();
            let put = PutRequest::builder().set_item(Some(item)).build().unwrap();
            vec![WriteRequest::builder().put_request(put).build(); 2]
        };
        let partial = mock!(Client::batch_write_item)
            .match_requests(|r| r.request_items().map(|m| m["t"].len()) == Some(25))
            .then_output(move || {
                BatchWriteItemOutput::builder()
                    .unprocessed_items("t", leftover.clone())
                    .build()
            });
        let rest = mock!(Client::batch_write_item)
            .sequence()
            .output(|| BatchWriteItemOutput::builder().build())
            .repeatedly()
            .build();
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::Sequential, [&partial, &rest]);
        let store = Store::new(client, "t");
        assert_eq!(store.put_new(&tasks).await.unwrap(), 30);
        assert_eq!(partial.num_calls(), 1);
        // one retry of the 2 leftovers, then the last chunk of 5
        assert_eq!(rest.num_calls(), 2);
    }
}
