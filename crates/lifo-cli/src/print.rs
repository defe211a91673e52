//! How the `lifo` command prints what an operation returned: a table for
//! people, or `--json` for scripts (the same document the HTTP API
//! answers). Every text from the table (ids, errors, reasons, payloads,
//! names) goes through [`shown`]: its control and bidirectional characters
//! are printed escaped, so a task cannot steer the terminal.

use crate::terminal::{json_shown, shown};
use lifo_core::Task;
use lifo_core::store::Failed;
use lifo_ops::control::QueueControl;
use lifo_ops::create::CreateResponse;
use lifo_ops::stats::{Stats, age_ms, shed_shown};
use lifo_ops::tasks::{BatchReport, History, Page};
use serde::Serialize;
use serde_json::json;
use std::fmt::Write as _;

/// `value` as one line of JSON (the characters a terminal would obey
/// written as JSON escapes, e.g. `\u202e`: the same value).
pub fn json<T: Serialize>(value: &T) -> String {
    json_shown(
        serde_json::to_string(value)
            .unwrap_or_else(|e| json!({ "error": e.to_string() }).to_string()),
    )
}

/// A duration in milliseconds as the tables print it: seconds with two
/// decimals (`0.36 s`).
fn age(ms: u64, now: u64) -> String {
    format!("{:.1} s", now.saturating_sub(ms) as f64 / 1000.0)
}

pub fn task(t: &Task, now: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "taskId      {}", shown(&t.task_id));
    let _ = writeln!(out, "status      {}", t.task_status);
    let _ = writeln!(out, "created     {} ago", age(t.task_created, now));
    let _ = writeln!(out, "attempts    {} (token {})", t.attempts, t.token);
    // Signed, and saturating: a stored `expiresAt` is anything a producer
    // wrote (once `as i64` casts then a subtraction that could overflow).
    let expires_in = i128::from(t.expires_at) - i128::from(now / 1000);
    let _ = writeln!(out, "expires     in {expires_in} s");
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
        let _ = writeln!(out, "claimed by  {}", shown(by));
    }
    if let Some(u) = &t.user_id {
        let _ = writeln!(out, "user        {}", shown(u));
    }
    if let Some(d) = &t.due_date {
        let _ = writeln!(out, "due         {}", shown(d));
    }
    if t.priority() != lifo_core::Priority::Normal {
        let _ = writeln!(out, "priority    {}", t.priority());
    }
    if let Some(tenant) = &t.tenant {
        let _ = writeln!(out, "tenant      {}", shown(tenant));
    }
    if let Some(k) = &t.supersede_key {
        let _ = writeln!(out, "key         {}", shown(k));
    }
    if let Some(by) = &t.superseded_by {
        let _ = writeln!(out, "supersededBy {}", shown(by));
    }
    if let Some(f) = t.failed_at {
        let _ = writeln!(out, "failed      {} ago", age(f, now));
    }
    if let Some(e) = &t.last_error {
        let _ = writeln!(out, "lastError   {}", shown(e));
    }
    let _ = write!(out, "payload     {}", shown(t.payload.json()));
    out
}

pub fn user_tasks(user: &str, page: &Page<Task>) -> String {
    let mut out = format!(
        "{:<38} {:<10} {:>3} {:<10} {}\n",
        "TASK", "STATUS", "ATT", "DUE", "LAST ERROR"
    );
    for t in &page.items {
        let _ = writeln!(
            out,
            "{:<38} {:<10} {:>3} {:<10} {}",
            shown(&t.task_id),
            t.task_status.as_str(),
            t.attempts,
            shown(t.due_date.as_deref().unwrap_or("-")),
            shown(t.last_error.as_deref().unwrap_or(""))
        );
    }
    let _ = write!(
        out,
        "{} task(s) of user {}, newest first",
        page.items.len(),
        shown(user)
    );
    if page.next_cursor.is_some() {
        out.push_str(" (more: raise --limit)");
    }
    out
}

pub fn failed(failed: &[Failed], now: u64) -> String {
    let mut out = format!("{:<38} {:>12}  {}\n", "TASK", "FAILED AGO", "LAST ERROR");
    for f in failed {
        let _ = writeln!(
            out,
            "{:<38} {:>12}  {}",
            shown(&f.task_id),
            age(f.failed_at, now),
            shown(f.last_error.as_deref().unwrap_or(""))
        );
    }
    let _ = write!(out, "{} failed task(s), newest first", failed.len());
    out
}

pub fn history(h: &History, now: u64) -> String {
    let mut out = format!(
        "{:<10} {:>10} {:>7} {:>5}  {}\n",
        "STATUS", "AGO", "ATTEMPT", "TOKEN", "REASON"
    );
    for e in &h.history {
        let _ = writeln!(
            out,
            "{:<10} {:>10} {:>7} {:>5}  {}",
            e.status.as_str(),
            age(e.at, now),
            e.attempt,
            e.token,
            shown(e.reason.as_deref().unwrap_or(""))
        );
    }
    let _ = write!(
        out,
        "task {} is {} ({} transitions)",
        shown(&h.task_id),
        h.task_status,
        h.history.len()
    );
    out
}

/// What a command on several tasks did: "deleted a b", "retried 3 failed
/// task(s): …", "would retry 2 task(s) (dry run, nothing written): …".
/// `by_window`: the tasks were a window of failures, not ids.
pub fn batch(infinitive: &str, past: &str, by_window: bool, r: &BatchReport) -> String {
    let ids = |ids: &[String]| {
        if ids.is_empty() || ids.len() > 20 {
            String::new()
        } else {
            format!(": {}", joined(ids))
        }
    };
    let mut out = if r.dry_run {
        format!(
            "would {infinitive} {} task(s) (dry run, nothing written){}",
            r.done.len(),
            ids(&r.done)
        )
    } else if by_window {
        format!("{past} {} failed task(s){}", r.done.len(), ids(&r.done))
    } else {
        format!("{past} {}", joined(&r.done))
    };
    if r.paused {
        out.push_str(" (the queue is paused: they run after `lifo resume`)");
    }
    out
}

/// Ids from the table, shown and joined by spaces.
fn joined(ids: &[String]) -> String {
    ids.iter()
        .map(|id| shown(id).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn created(r: &CreateResponse) -> String {
    let mut out = format!("created {}", r.created.len());
    if !r.existing.is_empty() {
        let _ = write!(
            out,
            ", {} already existed ({})",
            r.existing.len(),
            joined(&r.existing)
        );
    }
    if r.created.len() <= 20 && !r.created.is_empty() {
        let _ = write!(out, ": {}", joined(&r.created));
    }
    out
}

pub fn control(c: &QueueControl) -> String {
    let why = c
        .reason
        .as_deref()
        .filter(|r| !r.is_empty())
        .map(|r| format!(" ({})", shown(r)))
        .unwrap_or_default();
    if c.paused {
        format!(
            "paused{why}: processors claim nothing (within one PAUSE_POLL_MS, 5 s by default), finish what runs, \
             and tasks keep expiring; `lifo resume` wakes the queue"
        )
    } else {
        format!("running{why}: the processor is woken")
    }
}

/// `lifo stats --tenants`'s table: who waits, the flooding tenants marked.
/// A tenant's name is the producer's: control characters are shown
/// escaped, so a name cannot move the terminal's cursor.
pub fn tenants(t: &lifo_ops::tenants::Tenants) -> String {
    let name = |n: &str| -> String {
        if n.is_empty() {
            return "(none)".to_owned();
        }
        shown(n).into_owned()
    };
    let mut out = format!(
        "\n\n{:<32} {:>9} {:>12} {:>9}\n",
        "TENANT", "WAITING", "OLDEST AGE", "FLOODING"
    );
    for r in &t.rows {
        let _ = writeln!(
            out,
            "{:<32} {:>9} {:>10.1} s {:>9}",
            name(&r.tenant),
            r.waiting,
            r.oldest_age_ms as f64 / 1000.0,
            if r.flooding { "yes" } else { "" }
        );
    }
    let _ = write!(
        out,
        "flooding tenants hold {:.0}% of the waiting tasks; the others' oldest waits {}{}",
        t.flooding_share_pct,
        t.quiet_oldest_age_ms
            .map_or("-".to_owned(), |ms| format!("{:.1} s", ms as f64 / 1000.0)),
        if t.cut_short {
            format!(
                " (of each shard's newest {} claimable tasks)",
                lifo_ops::tenants::READ_PER_SHARD
            )
        } else {
            String::new()
        }
    );
    out
}

/// `lifo stats`'s table.
pub fn stats(s: &Stats, now: u64, table: &str) -> String {
    let show = |at: Option<u64>| {
        age_ms(at, now).map_or("-".to_owned(), |a| format!("{:.1} s", a as f64 / 1000.0))
    };
    let mut out = format!(
        "{:>5} {:>9} {:>9} {:>11} {:>15} {:>18} {:>12} {:>12}\n",
        "SHARD",
        "PENDING",
        "RUNNING",
        "BACKING OFF",
        "EXPIRED (1 H)",
        "SUPERSEDED (1 H)",
        "NEWEST AGE",
        "OLDEST AGE"
    );
    for sh in &s.shards {
        let _ = writeln!(
            out,
            "{:>5} {:>9} {:>9} {:>11} {:>15} {:>18} {:>12} {:>12}",
            sh.shard,
            sh.pending,
            sh.running,
            sh.backing_off,
            shed_shown(sh),
            lifo_ops::stats::superseded_shown(sh),
            show(sh.newest_claimable_at),
            show(sh.oldest_claimable_at)
        );
    }
    if !s.scheduled.is_empty() {
        let _ = writeln!(out, "\n{:<10} {:>9}", "DUE DATE", "SCHEDULED");
        for (d, n) in &s.scheduled {
            let _ = writeln!(out, "{d:<10} {n:>9}");
        }
    }
    if let Some(d) = &s.downstream {
        let unloaded = if d.unloaded_ms > 0 {
            format!(", unloaded latency {:.2} s", d.unloaded_ms as f64 / 1000.0)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "\nDOWNSTREAM LIMIT {} of {} runs in flight (adaptive; group {}, {:.0} s ago{unloaded})",
            d.limit,
            d.ceiling,
            d.group,
            now.saturating_sub(d.at) as f64 / 1000.0
        );
    }
    if s.control.paused {
        let since = s.control.changed_at.map_or(String::new(), |at| {
            format!(" for {:.0} s", now.saturating_sub(at) as f64 / 1000.0)
        });
        let why = s
            .control
            .reason
            .as_deref()
            .filter(|r| !r.is_empty())
            .map_or(String::new(), |r| format!(" ({})", shown(r)));
        let _ = write!(
            out,
            "\nPAUSED{since}{why}: nothing is claimed until `lifo resume`"
        );
    }
    let _ = write!(
        out,
        "\n{} pending, {} running, {} backing off, {}{} shed by expiry and {}{} superseded \
         in the last hour, {} scheduled (due from {} days ago to {} days ahead) in table {table}",
        s.total(|x| x.pending),
        s.total(|x| x.running),
        s.total(|x| x.backing_off),
        s.total(|x| x.expired_last_hour),
        if s.shards.iter().any(|x| x.expired_capped) {
            "+"
        } else {
            ""
        },
        s.total(|x| x.superseded_last_hour),
        if s.shards.iter().any(|x| x.superseded_capped) {
            "+"
        } else {
            ""
        },
        s.scheduled.iter().map(|(_, n)| n).sum::<usize>(),
        s.past_days,
        s.days,
        table = shown(table),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lifo stats` names the last adaptive limit, its ceiling and when;
    /// with a fixed limit (no `#downstream` item) it says nothing of it.
    #[test]
    fn stats_show_the_last_adaptive_limit() {
        let mut s = Stats {
            control: Default::default(),
            downstream: None,
            shards: Vec::new(),
            scheduled: Vec::new(),
            past_days: 0,
            days: 0,
        };
        assert!(!stats(&s, 10_000, "Q").contains("DOWNSTREAM"));
        s.downstream = Some(lifo_core::store::DownstreamLimit {
            limit: 4,
            ceiling: 20,
            unloaded_ms: 1000,
            group: 0,
            at: 4_000,
        });
        assert!(
            stats(&s, 10_000, "Q").contains(
                "DOWNSTREAM LIMIT 4 of 20 runs in flight (adaptive; group 0, 6 s ago, \
                 unloaded latency 1.00 s)"
            ),
            "{}",
            stats(&s, 10_000, "Q")
        );
    }
}
