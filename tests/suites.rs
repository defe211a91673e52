//! The integration suites on the local stack, one module per file, in one
//! test binary: one build and link, one DynamoDB Local and one moto for the
//! stacks that share them ([`lifo_tests::Harness::start`]). One suite:
//! `cargo test -p lifo-tests --test suites rests::`. The chaos run is a
//! binary of its own (`--test chaos`).

mod architecture;
mod billing;
mod contention;
mod differential;
mod downstream;
mod failures;
mod groups;
mod hostile;
mod iam;
mod index_lag;
mod layout;
mod leases;
mod light_load;
mod limits;
mod operate;
mod payload;
mod pipeline;
mod priorities;
mod rests;
mod scheduler;
mod settings;
mod shed;
mod supersede;
mod tenants;
mod traces;
mod worker;
