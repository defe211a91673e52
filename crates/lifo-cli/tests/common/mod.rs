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
