//! The core of the LIFO task queue: the task model, the state machine, every
//! DynamoDB expression, the store and the wake-up notifier.
//!
//! The Lambda functions are thin wrappers around this crate.

pub mod alarm;
pub mod bounded;
pub mod config;
pub mod error;
pub mod event;
pub mod expr;
pub mod fair;
pub mod fields;
pub mod groups;
pub mod heads;
pub mod lanes;
pub mod logging;
pub mod metrics;
pub mod model;
pub mod notify;
pub mod order;
pub mod rest;
pub mod since;
pub mod state;
pub mod store;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod xray;

pub use expr::{Lifetime, Move, Step};
pub use lanes::Lane;
pub use model::{HistoryEntry, Task, TaskStatus, new_task_id, now_ms};
pub use notify::{Notifier, NotifyError, Wakeup};
pub use order::{Candidate, Order};
pub use state::{IllegalTransition, Transition};
pub use store::{CancelError, CapacityMeter, Op, Store, StoreError};
