//! Helpers the `lifo` binary's test files share.

#![allow(dead_code)] // each test file uses its own part

use std::process::Command;

/// The `lifo` binary cargo built for these tests.
pub const LIFO: &str = env!("CARGO_BIN_EXE_lifo");

/// Runs `lifo` to success and returns its stdout.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A fresh scratch folder for one test.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lifo-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `lifo ARGS` run in-process against the harness's local table (its
/// endpoint, table, shards and 4 due shards): what it prints, or the whole
/// error chain.
pub async fn lifo_in(h: &lifo_tests::Harness, args: &[&str]) -> Result<String, String> {
    use clap::Parser;
    let endpoint = h.stack.dynamodb_local.endpoint.clone();
    let shards = h.shards.to_string();
    let mut argv = vec![
        "lifo",
        "--endpoint-url",
        &endpoint,
        "--table",
        &h.stack.table,
        "--shards",
        &shards,
        "--due-shards",
        "4",
    ];
    argv.extend_from_slice(args);
    let cli = lifo_cli::Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    let target = lifo_cli::connect(&cli)
        .await
        .map_err(|e| lifo_core::error::chain(&e))?;
    lifo_cli::run(&cli, &target)
        .await
        .map_err(|e| lifo_core::error::chain(&e))
}

/// A stack in moto's CloudFormation whose outputs are `outputs` (name,
/// value): what `lifo --stack NAME` reads.
pub async fn moto_stack(h: &lifo_tests::Harness, name: &str, outputs: &[(&str, &str)]) {
    let moto = &h.stack.moto.endpoint;
    let cfn = aws_sdk_cloudformation::Client::new(&lifo_local::stack::sdk_config(moto).await);
    let outputs: serde_json::Map<String, serde_json::Value> = outputs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::json!({ "Value": v })))
        .collect();
    let body = serde_json::json!({
        "Resources": {"Marker": {"Type": "AWS::SNS::Topic"}},
        "Outputs": outputs,
    });
    cfn.create_stack()
        .stack_name(name)
        .template_body(body.to_string())
        .send()
        .await
        .unwrap();
}
