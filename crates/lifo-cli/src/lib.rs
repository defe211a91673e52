//! The `lifo` command: inspect and operate a queue, against AWS (the
//! caller's own credentials, like the AWS CLI) or the local stack
//! (`--endpoint-url`). Output is a table by default, `--json` for scripts.
//! Errors are one clear line and a non-zero exit code.
//!
//! Layers, bottom up: the operations (`lifo-ops`), then the faces: the
//! command line ([`cli`], printing through [`print`]) and the console
//! ([`ui`]); the local stack's commands beside them (`local`). `simulate`
//! and `bench` are the lab's (`lifo_lab`), which this command calls.
//! The root only declares modules (tests/modules.rs holds that, and that no
//! module imports one that imports it back).

pub mod cli;
pub mod connect;
pub mod error;
pub mod local;
pub mod print;
pub mod terminal;
pub mod ui;
