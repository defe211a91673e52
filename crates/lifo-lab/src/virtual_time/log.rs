//! A virtual run's event log: every wake-up published, every process
//! invocation's outcome, each with its virtual time, then every task as it
//! ended (its history of moves included). The same seed writes the same
//! log, byte for byte; [`EventLog::hash`] says so in 16 hex digits.

use lifo_core::Task;
use lifo_core::clock::SharedClock;
use lifo_lambda::Wakeup;
use process::ProcessReport;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// The log, shared by the run's parts.
#[derive(Clone)]
pub struct EventLog {
    text: Arc<Mutex<String>>,
    clock: SharedClock,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EventLog({} bytes, {})", self.text().len(), self.hash())
    }
}

impl EventLog {
    pub fn new(clock: SharedClock) -> Self {
        Self {
            text: Arc::new(Mutex::new(String::new())),
            clock,
        }
    }

    fn line(&self, line: std::fmt::Arguments<'_>) {
        let at = self.clock.now_ms();
        let mut text = self.text.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(text, "{at} {line}");
    }

    /// A wake-up published to `topic`.
    pub fn wakeup(&self, topic: &str, w: &Wakeup) {
        let handover = w
            .handover
            .as_ref()
            .map(|h| h.to_string())
            .unwrap_or_default();
        self.line(format_args!(
            "publish {topic} source={} reason={} group={:?} handover={handover}",
            w.source, w.reason, w.group
        ));
    }

    /// A process invocation's end.
    pub fn invocation(&self, r: &ProcessReport) {
        self.line(format_args!(
            "process group={:?} claimed={} succeeded={} failed={} retried={} conflicts={} shed={} stop={:?} tail={} claims={}",
            r.group,
            r.claimed.len(),
            r.succeeded,
            r.failed,
            r.retried_later,
            r.conflicts,
            r.shed,
            r.stop,
            r.tail_call,
            r.claimed.join(",")
        ));
    }

    /// A process invocation failed with `error`.
    pub fn failed(&self, error: &str) {
        self.line(format_args!("process failed: {error}"));
    }

    /// A process invocation ended before its handler returned (a chaos
    /// run's crash, or Lambda's timeout).
    pub fn cut_short(&self) {
        self.line(format_args!("process cut short"));
    }

    /// The tasks as they ended, in the order given.
    pub fn tasks<'a>(&self, tasks: impl Iterator<Item = &'a Task>) {
        for t in tasks {
            let json = serde_json::to_string(t).unwrap_or_default();
            self.line(format_args!("task {json}"));
        }
    }

    /// The whole log.
    pub fn text(&self) -> String {
        self.text.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The log's FNV-1a hash, in hex.
    pub fn hash(&self) -> String {
        format!("{:016x}", lifo_core::model::fnv1a(self.text().as_bytes()))
    }
}
