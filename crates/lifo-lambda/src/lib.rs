//! The Lambda plumbing the queue's functions share, and nothing of the
//! protocol (that is `lifo-core`): parsing an invocation's event, JSON
//! logs, EMF metrics, X-Ray subsegments, bounded reads of answers, the
//! functions' settings from the environment, wake-ups (one SNS message a
//! shard group, [`notify`]) and rest alarms ([`alarm`]).

pub mod alarm;
pub mod bounded;
pub mod config;
pub mod event;
pub mod logging;
pub mod metrics;
pub mod notify;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod xray;

pub use notify::{Notifier, NotifyError, Wakeup};
