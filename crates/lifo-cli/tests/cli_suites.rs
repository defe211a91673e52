//! The `lifo` command's short suites, one module per file, in one test
//! binary (one build and link). One suite: `cargo test -p lifo-cli --test
//! cli_suites probe::`. `lifo bench`, the console, `lifo local up` and
//! operate are binaries of their own.

mod common;

mod cli;
mod commands;
mod inputs;
mod local_invoke;
mod plan;
mod probe;
mod runtime;
