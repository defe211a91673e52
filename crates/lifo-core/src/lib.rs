//! The LIFO queue's protocol and its storage: everything a task is
//! ([`model`]), every move it can make ([`state`]), every DynamoDB
//! expression that makes a move ([`expr`]) and the calls that send them
//! ([`store`]), and the same storage in memory, the reference model
//! ([`memory`]); payloads kept digit for digit ([`exact`]); with the claimable index's priorities ([`priority`]), its
//! shard groups ([`groups`]) and the order of its reads ([`order`]).
//!
//! No Lambda plumbing (`lifo-lambda`), no claim policy (`process`'s
//! `select`), no operator's operation (`lifo-ops`).

pub mod clock;
pub mod error;
pub mod exact;
pub mod expr;
pub mod groups;
pub mod memory;
pub mod model;
pub mod order;
pub mod priority;
pub mod state;
pub mod store;
#[cfg(feature = "test-util")]
pub mod testing;

pub use exact::Payload;
pub use expr::{Lifetime, Move, Step};
pub use model::{HistoryEntry, Task, TaskStatus, new_task_id, now_ms, seed_task_ids};
pub use order::{Candidate, Order};
pub use priority::Priority;
pub use state::{IllegalTransition, Transition};
pub use store::{CancelError, CapacityMeter, Op, Store, StoreError};
