//! A request into the tasks to write: its shape, every field's checks, the
//! TTL and the due date, all before anything is written.

use super::checks::{check_id, check_key, check_payload, parse_date};
use super::{CreateError, Creator, MAX_TASKS_PER_REQUEST, invalid};
use crate::fields::{present, whole};
use lifo_core::exact::Payload;
use lifo_core::model::MAX_PAYLOAD_BYTES;
use lifo_core::{Task, new_task_id};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// The payloads of a request as written (`tasks[i].payload`), read again
/// from its text: the request's `Value` holds each number as an `f64` past
/// `u64`, which would round it.
#[derive(Deserialize)]
struct Written<'a> {
    #[serde(borrow, default)]
    tasks: Option<Vec<WrittenTask<'a>>>,
}

#[derive(Deserialize)]
struct WrittenTask<'a> {
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
}

// Fields as docs/openapi.yaml reads them: present means not null, and an
// integer may be written 60.0 (`lifo_ops::fields`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Request {
    #[serde(default, deserialize_with = "whole")]
    count: Option<u64>,
    #[serde(default, deserialize_with = "whole")]
    ttl_seconds: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    tasks: Option<Vec<TaskSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TaskSpec {
    #[serde(default, deserialize_with = "present")]
    task_id: Option<String>,
    payload: Map<String, Value>,
    #[serde(default, deserialize_with = "whole")]
    ttl_seconds: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    user_id: Option<String>,
    #[serde(default, deserialize_with = "present")]
    due_date: Option<String>,
    #[serde(default, deserialize_with = "whole")]
    due_in_days: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    supersede_key: Option<String>,
    #[serde(default, deserialize_with = "present")]
    priority: Option<String>,
    #[serde(default, deserialize_with = "present")]
    tenant: Option<String>,
}

/// Farthest a task may be scheduled ahead.
pub const MAX_DUE_IN_DAYS: u32 = 365;

/// A validated task, and whether the producer chose its id.
#[derive(Debug)]
pub(crate) struct Planned {
    pub(crate) task: Task,
    pub(crate) supplied_id: bool,
}

impl<Q> Creator<Q> {
    fn ttl(&self, field: String, ttl: Option<u64>) -> Result<u64, CreateError> {
        let ttl = ttl.unwrap_or(self.config.default_ttl_seconds);
        if !(1..=self.config.max_ttl_seconds).contains(&ttl) {
            return Err(invalid(
                field,
                format!(
                    "must be between 1 and {} seconds, got {ttl}",
                    self.config.max_ttl_seconds
                ),
            ));
        }
        Ok(ttl)
    }

    /// The tasks the request `text` asks for at `now`, or the error naming
    /// the first bad field.
    pub(crate) fn validate_text(&self, text: &str, now: u64) -> Result<Vec<Planned>, CreateError> {
        let event =
            lifo_lambda::event::parse_str(text).map_err(|e| invalid("(request)", e.to_string()))?;
        let written: Vec<Option<&RawValue>> = serde_json::from_str::<Written>(text)
            .ok()
            .and_then(|w| w.tasks)
            .map(|tasks| tasks.into_iter().map(|t| t.payload).collect())
            .unwrap_or_default();
        if !event.is_object() {
            return Err(invalid(
                "(request)",
                "must be a JSON object with \"count\" or \"tasks\"",
            ));
        }
        let request: Request = serde_path_to_error::deserialize(event).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                "(request)".to_owned()
            } else {
                path
            };
            invalid(field, e.into_inner().to_string())
        })?;
        let shards = self.config.shard_count;
        match (request.count, request.tasks) {
            (Some(_), Some(_)) => Err(invalid(
                "count",
                "give either \"count\" or \"tasks\", not both",
            )),
            (None, None) => Err(invalid(
                "(request)",
                "missing \"count\" (demo tasks) or \"tasks\"",
            )),
            (Some(count), None) => {
                if !(1..=MAX_TASKS_PER_REQUEST as u64).contains(&count) {
                    return Err(invalid(
                        "count",
                        format!("must be between 1 and {MAX_TASKS_PER_REQUEST}, got {count}"),
                    ));
                }
                let ttl = self.ttl("ttlSeconds".into(), request.ttl_seconds)?;
                Ok((0..count)
                    .map(|n| {
                        let mut payload = Map::new();
                        payload.insert("demo".into(), Value::Bool(true));
                        payload.insert("n".into(), Value::from(n));
                        Planned {
                            task: Task::new_pending(new_task_id(), payload, now, ttl, shards),
                            supplied_id: false,
                        }
                    })
                    .collect())
            }
            (None, Some(specs)) => {
                if request.ttl_seconds.is_some() {
                    return Err(invalid(
                        "ttlSeconds",
                        "only allowed with \"count\"; give ttlSeconds per task",
                    ));
                }
                if specs.is_empty() || specs.len() > MAX_TASKS_PER_REQUEST {
                    return Err(invalid(
                        "tasks",
                        format!(
                            "must hold between 1 and {MAX_TASKS_PER_REQUEST} tasks, got {}",
                            specs.len()
                        ),
                    ));
                }
                let mut seen = HashSet::new();
                let mut key_order: std::collections::HashMap<String, u64> = Default::default();
                let mut planned = Vec::with_capacity(specs.len());
                for (i, spec) in specs.into_iter().enumerate() {
                    let payload = match written.get(i).copied().flatten() {
                        Some(raw) => Payload::from_json(raw.get())
                            .map_err(|m| invalid(format!("tasks[{i}].payload"), m))?,
                        None => Payload::from(spec.payload),
                    };
                    let size = payload.len();
                    if size > MAX_PAYLOAD_BYTES {
                        return Err(invalid(
                            format!("tasks[{i}].payload"),
                            format!("is {size} bytes; the limit is {MAX_PAYLOAD_BYTES}"),
                        ));
                    }
                    check_payload(&payload.tree(), &mut format!("tasks[{i}].payload"), 0)
                        .map_err(|(field, message)| invalid(field, message))?;
                    let ttl = self.ttl(format!("tasks[{i}].ttlSeconds"), spec.ttl_seconds)?;
                    let supplied_id = spec.task_id.is_some();
                    let id = match spec.task_id {
                        Some(id) => {
                            check_id(&id).map_err(|m| invalid(format!("tasks[{i}].taskId"), m))?;
                            if !seen.insert(id.clone()) {
                                return Err(invalid(
                                    format!("tasks[{i}].taskId"),
                                    format!("{id:?} appears twice in this request"),
                                ));
                            }
                            id
                        }
                        None => new_task_id(),
                    };
                    // Tasks of one key in one request: a millisecond apart
                    // in request order, so the last is the newest (latest
                    // wins by creation, `lifo_core::store::supersede`).
                    let created = match &spec.supersede_key {
                        Some(key) => {
                            let n = key_order.entry(key.clone()).or_default();
                            *n += 1;
                            now + (*n - 1)
                        }
                        None => now,
                    };
                    let mut task = Task::new_pending(id, payload, created, ttl, shards)
                        .with_retention(self.config.retention_seconds);
                    if let Some(user) = spec.user_id {
                        check_id(&user).map_err(|m| invalid(format!("tasks[{i}].userId"), m))?;
                        task.user_id = Some(user);
                    }
                    if let Some(tenant) = &spec.tenant {
                        check_key(tenant).map_err(|m| invalid(format!("tasks[{i}].tenant"), m))?;
                    }
                    task.tenant = spec.tenant.or_else(|| task.user_id.clone());
                    if let Some(key) = spec.supersede_key {
                        let field = format!("tasks[{i}].supersedeKey");
                        check_key(&key).map_err(|m| invalid(field.clone(), m))?;
                        if spec.due_date.is_some() || spec.due_in_days.is_some() {
                            return Err(invalid(
                                field,
                                "cannot be combined with dueDate or dueInDays: latest wins \
                                 among tasks that can start now",
                            ));
                        }
                        task.supersede_key = Some(key);
                    }
                    task = self.schedule(task, i, spec.due_date, spec.due_in_days, ttl, now)?;
                    if let Some(name) = spec.priority {
                        let priority = lifo_core::Priority::parse(&name)
                            .map_err(|m| invalid(format!("tasks[{i}].priority"), m))?;
                        task = task.with_priority(priority);
                    }
                    planned.push(Planned { task, supplied_id });
                }
                Ok(planned)
            }
        }
    }

    /// Makes `task` a scheduled one when the spec names a due date. A date
    /// in the past is refused; today's date starts the task at once.
    fn schedule(
        &self,
        mut task: Task,
        i: usize,
        due_date: Option<String>,
        due_in_days: Option<u32>,
        ttl: u64,
        now: u64,
    ) -> Result<Task, CreateError> {
        let today = chrono::DateTime::from_timestamp_millis(now as i64)
            .map(|t| t.date_naive())
            .unwrap_or_default();
        let due = match (due_date, due_in_days) {
            (None, None) => return Ok(task),
            (Some(_), Some(_)) => {
                return Err(invalid(
                    format!("tasks[{i}].dueDate"),
                    "give either dueDate or dueInDays, not both",
                ));
            }
            (Some(text), None) => {
                let field = format!("tasks[{i}].dueDate");
                let date = parse_date(&text).map_err(|m| invalid(field.clone(), m))?;
                if date < today {
                    return Err(invalid(
                        field,
                        format!("{text} is in the past (today is {today} UTC)"),
                    ));
                }
                date
            }
            (None, Some(days)) => {
                if days > MAX_DUE_IN_DAYS {
                    return Err(invalid(
                        format!("tasks[{i}].dueInDays"),
                        format!("must be between 0 and {MAX_DUE_IN_DAYS}, got {days}"),
                    ));
                }
                today + chrono::Days::new(u64::from(days))
            }
        };
        if (due - today).num_days() > i64::from(MAX_DUE_IN_DAYS) {
            return Err(invalid(
                format!("tasks[{i}].dueDate"),
                format!("is more than {MAX_DUE_IN_DAYS} days ahead"),
            ));
        }
        let due_text = due.format("%Y-%m-%d").to_string();
        if due == today {
            // Due today: claimable now (the day's scheduler runs may be over).
            task.due_date = Some(due_text);
            return Ok(task);
        }
        let due_epoch = due
            .and_hms_opt(0, 0, 0)
            .map_or(0, |d| d.and_utc().timestamp() as u64);
        Ok(task.scheduled(
            due_text,
            due_epoch,
            self.config.due_shard_count,
            u64::from(self.config.catch_up_days) * 86_400 + 86_400,
            ttl,
            self.config.retention_seconds,
        ))
    }
}
