//! The HTTP API's integration suites, one module per file, in one test
//! binary: one build and link, one DynamoDB Local and one moto for the
//! stacks that share them ([`lifo_tests::Harness::start`]). One suite:
//! `cargo test -p api --test api_suites http::`. The contract run is a
//! binary of its own (`--test contract`).

mod common;

mod clients;
mod deployed;
mod http;
mod numbers;
mod openapi;
mod operators;
