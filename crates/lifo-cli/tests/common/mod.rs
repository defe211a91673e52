//! Helpers the `lifo` binary's test files share.

#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// A fresh scratch folder for one test, removed when the guard is dropped:
/// bind it (`let dir = scratch(…)`) for as long as the test uses the folder.
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("lifo-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A scratch folder ([`scratch`]); dereferences to its path.
pub struct Scratch(std::path::PathBuf);

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
    let cli = lifo_cli::cli::Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    let queue = lifo_cli::connect::connect(&cli.connection())
        .await
        .map_err(|e| lifo_core::error::chain(&e))?;
    lifo_cli::cli::run(&cli, &queue)
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

/// `lifo local up ARGS` with `envs`, its stdout lines arriving on a channel;
/// returns once it printed "Ctrl-C stops", with the lines so far.
pub fn local_up(
    args: &[&str],
    envs: &[(&str, &str)],
) -> (Terminate, std::sync::mpsc::Receiver<String>, Vec<String>) {
    let mut cmd = Command::new(lifo_bin());
    cmd.envs(envs.iter().copied()).stderr(Stdio::inherit());
    local_up_as(cmd, args)
}

/// [`local_up`] from `cmd` (`lifo` with its environment and stderr set).
pub fn local_up_as(
    mut cmd: Command,
    args: &[&str],
) -> (Terminate, std::sync::mpsc::Receiver<String>, Vec<String>) {
    let mut child = cmd
        .args(["local", "up"])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Terminate(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    let started = Instant::now();
    while !lines.iter().any(|l: &String| l.starts_with("Ctrl-C stops")) {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => lines.push(line),
            Err(e) => panic!(
                "local up did not come up in {:?} ({e}): {lines:?}",
                started.elapsed()
            ),
        }
    }
    (child, rx, lines)
}

/// The DynamoDB Local endpoint `local up` printed.
pub fn endpoint_in(lines: &[String]) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("DynamoDB Local"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned()
}

/// A child process that gets SIGTERM (and is waited for) if the test
/// panics first, so that it stops the servers it started.
pub struct Terminate(pub std::process::Child);

impl Drop for Terminate {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let _ = self.0.wait();
        }
    }
}

/// The `lifo` binary a probe runs: `LIFO_BIN` when set (a release build:
/// `make bench` makes target/release/lifo), else [`LIFO`].
pub fn lifo_bin() -> std::path::PathBuf {
    std::env::var_os("LIFO_BIN").map_or_else(|| LIFO.into(), Into::into)
}
