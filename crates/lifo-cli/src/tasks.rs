//! `lifo tasks …`: create, look up, list (a user's, or the failed ones),
//! history, cancel, retry (redrive) and delete.

use crate::{CliError, Target, TasksCommand};
use lifo_core::store::FailedQuery;
use lifo_core::{Task, now_ms};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Most tasks one bulk retry takes (a window with more: narrow it, or run
/// it again).
pub const MAX_BULK: usize = 10_000;

pub use lifo_core::since::Since;

fn age(ms: u64, now: u64) -> String {
    format!("{:.1} s", now.saturating_sub(ms) as f64 / 1000.0)
}

fn task_json(t: &Task) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn task_row(t: &Task) -> String {
    format!(
        "{:<38} {:<10} {:>3} {:<10} {}",
        t.task_id,
        t.task_status.as_str(),
        t.attempts,
        t.due_date.as_deref().unwrap_or("-"),
        t.last_error.as_deref().unwrap_or("")
    )
}

async fn get(target: &Target, id: &str) -> Result<Task, CliError> {
    target
        .store
        .get(id)
        .await?
        .ok_or_else(|| CliError::NotFound(format!("no task {id}")))
}

/// Runs `lifo tasks …` and returns what to print.
pub async fn run(cmd: &TasksCommand, target: &Target, as_json: bool) -> Result<String, CliError> {
    let now = now_ms();
    let store = &target.store;
    match cmd {
        TasksCommand::Create { file, count } => {
            create(target, file.as_deref(), *count, as_json).await
        }
        TasksCommand::Get { id } => {
            let t = get(target, id).await?;
            if as_json {
                return Ok(task_json(&t).to_string());
            }
            Ok(show(&t, now))
        }
        TasksCommand::List {
            user: Some(user),
            limit,
            ..
        } => {
            let mut tasks = Vec::new();
            let mut start = None;
            while tasks.len() < *limit {
                let want = i32::try_from((*limit - tasks.len()).min(100)).unwrap_or(100);
                let (page, next) = store.user_tasks(user, want, start).await?;
                tasks.extend(page);
                start = next;
                if start.is_none() {
                    break;
                }
            }
            if as_json {
                return Ok(Value::Array(tasks.iter().map(task_json).collect()).to_string());
            }
            let mut out = format!(
                "{:<38} {:<10} {:>3} {:<10} {}\n",
                "TASK", "STATUS", "ATT", "DUE", "LAST ERROR"
            );
            for t in &tasks {
                out.push_str(&task_row(t));
                out.push('\n');
            }
            let _ = write!(out, "{} task(s) of user {user}, newest first", tasks.len());
            Ok(out)
        }
        TasksCommand::List {
            user: None,
            since,
            error_prefix,
            limit,
            ..
        } => {
            let since_ms = since.map_or(0, |s| s.epoch_ms(now));
            let failed = store
                .failed(FailedQuery {
                    shard_count: target.shards,
                    since_ms,
                    until_ms: now,
                    error_prefix: error_prefix.as_deref().unwrap_or(""),
                    limit: *limit,
                })
                .await?;
            if as_json {
                return Ok(Value::Array(
                    failed
                        .iter()
                        .map(|f| json!({"taskId": f.task_id, "failedAt": f.failed_at, "lastError": f.last_error}))
                        .collect(),
                )
                .to_string());
            }
            let mut out = format!("{:<38} {:>12}  {}\n", "TASK", "FAILED AGO", "LAST ERROR");
            for f in &failed {
                let _ = writeln!(
                    out,
                    "{:<38} {:>12}  {}",
                    f.task_id,
                    age(f.failed_at, now),
                    f.last_error.as_deref().unwrap_or("")
                );
            }
            let _ = write!(out, "{} failed task(s), newest first", failed.len());
            Ok(out)
        }
        TasksCommand::Cancel { id } => {
            let t = store.cancel(id, now).await?;
            Ok(if as_json {
                task_json(&t).to_string()
            } else {
                format!("cancelled {}", t.task_id)
            })
        }
        TasksCommand::History { id } => {
            let t = get(target, id).await?;
            if as_json {
                return Ok(serde_json::to_value(&t.history)
                    .unwrap_or(Value::Null)
                    .to_string());
            }
            let mut out = format!(
                "{:<10} {:>10} {:>7} {:>5}  {}\n",
                "STATUS", "AGO", "ATTEMPT", "TOKEN", "REASON"
            );
            for h in &t.history {
                let _ = writeln!(
                    out,
                    "{:<10} {:>10} {:>7} {:>5}  {}",
                    h.status.as_str(),
                    age(h.at, now),
                    h.attempt,
                    h.token,
                    h.reason.as_deref().unwrap_or("")
                );
            }
            let _ = write!(
                out,
                "task {} is {} ({} transitions)",
                t.task_id,
                t.task_status,
                t.history.len()
            );
            Ok(out)
        }
        TasksCommand::Retry(args) => crate::retry::run(args, target, as_json).await,
        TasksCommand::Delete { ids } => {
            let mut deleted = Vec::new();
            let mut refused = Vec::new();
            for id in ids {
                match store.delete(id, now_ms()).await {
                    Ok(t) => deleted.push(t.task_id),
                    Err(e) => refused.push((id.clone(), e.to_string())),
                }
            }
            finish_batch("deleted", deleted, refused, ids.len(), as_json)
        }
    }
}

/// The answer to a command on several ids: what was done, and one error
/// naming each id that was refused (then the command fails).
pub(crate) fn finish_batch(
    verb: &str,
    done: Vec<String>,
    refused: Vec<(String, String)>,
    asked: usize,
    as_json: bool,
) -> Result<String, CliError> {
    if !refused.is_empty() {
        let reasons: Vec<String> = refused.iter().map(|(_, why)| why.clone()).collect();
        return Err(CliError::Other(format!(
            "{verb} {} of {asked}; {}",
            done.len(),
            reasons.join("; ")
        )));
    }
    Ok(if as_json {
        json!({ verb: done }).to_string()
    } else {
        format!("{verb} {}", done.join(" "))
    })
}

fn show(t: &Task, now: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "taskId      {}", t.task_id);
    let _ = writeln!(out, "status      {}", t.task_status);
    let _ = writeln!(out, "created     {} ago", age(t.task_created, now));
    let _ = writeln!(out, "attempts    {} (token {})", t.attempts, t.token);
    let _ = writeln!(
        out,
        "expires     in {} s",
        (t.expires_at as i64) - (now / 1000) as i64
    );
    if let Some(lease) = t.lease_until {
        let _ = if t.lease_is_live(now) {
            writeln!(out, "lease       live for another {}", age(now, lease))
        } else {
            writeln!(
                out,
                "lease       expired {} ago: claimable again",
                age(lease, now)
            )
        };
    }
    if let Some(by) = &t.claimed_by {
        let _ = writeln!(out, "claimed by  {by}");
    }
    if let Some(u) = &t.user_id {
        let _ = writeln!(out, "user        {u}");
    }
    if let Some(d) = &t.due_date {
        let _ = writeln!(out, "due         {d}");
    }
    if let Some(f) = t.failed_at {
        let _ = writeln!(out, "failed      {} ago", age(f, now));
    }
    if let Some(e) = &t.last_error {
        let _ = writeln!(out, "lastError   {e}");
    }
    let _ = write!(out, "payload     {}", Value::Object(t.payload.clone()));
    out
}

/// `lifo tasks create`: the create function's request, from a file or a
/// count. Locally (no `--stack`) it runs the create handler's own code
/// against the table; against a stack it invokes the stack's
/// CreateFunction, as the console does, so the function's validation and
/// permissions apply.
async fn create(
    target: &Target,
    file: Option<&std::path::Path>,
    count: Option<u64>,
    as_json: bool,
) -> Result<String, CliError> {
    let request: Value = match (file, count) {
        (Some(path), None) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::Other(format!("reading {}: {e}", path.display())))?;
            serde_json::from_str(&text)
                .map_err(|e| CliError::Other(format!("{} is not JSON: {e}", path.display())))?
        }
        (None, Some(n)) => json!({ "count": n }),
        _ => {
            return Err(CliError::Other(
                "give --file FILE (a create request) or --count N".into(),
            ));
        }
    };
    let size = serde_json::to_vec(&request).map_or(usize::MAX, |v| v.len());
    create::check_request_size(size).map_err(|e| CliError::Other(e.to_string()))?;
    let response: Value = match &target.create_function {
        Some(f) => invoke_create(f, &request).await?,
        None => {
            let creator = create::Creator::new(
                target.store.clone(),
                create::CreateConfig {
                    shard_count: target.shards,
                    due_shard_count: target.due_shards,
                    max_ttl_seconds: target.max_ttl_seconds,
                    default_ttl_seconds: target.task_ttl_seconds.min(target.max_ttl_seconds),
                    retention_seconds: target.retention_seconds,
                    ..create::CreateConfig::new(target.store.table())
                },
            );
            let out = creator
                .handle(request)
                .await
                .map_err(|e| CliError::Other(lifo_core::error::chain(&e)))?;
            serde_json::to_value(out).unwrap_or(Value::Null)
        }
    };
    if as_json {
        return Ok(response.to_string());
    }
    let ids = |k: &str| -> Vec<String> {
        response[k]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (created, existing) = (ids("created"), ids("existing"));
    let mut out = format!("created {}", created.len());
    if !existing.is_empty() {
        let _ = write!(
            out,
            ", {} already existed ({})",
            existing.len(),
            existing.join(" ")
        );
    }
    if created.len() <= 20 && !created.is_empty() {
        let _ = write!(out, ": {}", created.join(" "));
    }
    Ok(out)
}

async fn invoke_create(
    f: &crate::target::CreateFunction,
    request: &Value,
) -> Result<Value, CliError> {
    let out = f
        .lambda
        .invoke()
        .function_name(&f.name)
        .invocation_type(aws_sdk_lambda::types::InvocationType::RequestResponse)
        .payload(aws_sdk_lambda::primitives::Blob::new(request.to_string()))
        .send()
        .await
        .map_err(|e| {
            CliError::Other(format!(
                "invoking {}: {}",
                f.name,
                lifo_core::error::chain(&e)
            ))
        })?;
    let body: Value = out
        .payload()
        .and_then(|p| serde_json::from_slice(p.as_ref()).ok())
        .unwrap_or(Value::Null);
    if out.function_error().is_some() {
        return Err(CliError::Other(format!(
            "{} ({})",
            body["errorMessage"]
                .as_str()
                .unwrap_or("the create function failed"),
            body["errorType"].as_str().unwrap_or("error")
        )));
    }
    Ok(body)
}
