//! The queue's operations, with typed results: create, find, list, retry,
//! cancel, delete, pause, resume and stats. The three faces (the `lifo`
//! command, its console and the HTTP API function) call these and only
//! format what they return; nothing here knows of clap, axum or HTTP.

pub mod control;
pub mod create;
pub mod cursor;
pub mod error;
pub mod fields;
pub mod path_id;
pub mod queue;
pub mod redrive;
pub mod since;
pub mod stats;
pub mod tasks;
pub mod tenants;

pub use error::OpsError;
pub use queue::{Produce, Queue, Settings};
