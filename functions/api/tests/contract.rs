//! The HTTP API against its own contract (issue 33): schemathesis runs
//! docs/openapi.yaml with every check against the local API, behind the
//! local API Gateway with IAM on and every request signed with SigV4
//! (`contract/hooks.py`), with a fixed seed and a bounded number of
//! examples (`contract/schemathesis.toml`). It fails when the document
//! allows what the server refuses (positive data), the server accepts what
//! the document refuses (negative data), an answer breaks its schema or
//! status list, an operation ignores the authorizer, or anything answers
//! 5xx.

mod common;

use lifo_tests::Harness;
use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_keeps_the_openapi_document_with_authentication_on() {
    let h = Harness::start(1).await;
    let served = common::serve(&h).await;
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.join("../..");
    let contract = here.join("tests/contract");
    // Its caches (.hypothesis/) go to a folder of its own.
    let work = std::env::temp_dir().join(format!("lifo-contract-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let credentials = lifo_local::stack::credentials();
    let out = tokio::process::Command::new(root.join(".tools/schemathesis/bin/schemathesis"))
        .arg("--config-file")
        .arg(contract.join("schemathesis.toml"))
        .arg("run")
        .arg(root.join("docs/openapi.yaml"))
        .args(["--url", &served.base])
        .current_dir(&work)
        .env("SCHEMATHESIS_HOOKS", contract.join("hooks.py"))
        .env("AWS_ACCESS_KEY_ID", credentials.access_key_id())
        .env("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key())
        .env("AWS_REGION", lifo_local::stack::REGION)
        .env_remove("AWS_SESSION_TOKEN")
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("run `make test` once: it installs .tools/schemathesis");
    let _ = std::fs::remove_dir_all(&work);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The summary (operations, test cases, seed), for the log.
    for line in stdout
        .lines()
        .filter(|l| l.contains("Tested:") || l.contains("generated") || l.starts_with("Seed:"))
    {
        println!("schemathesis: {}", line.trim());
    }
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("Tested: 11"), "every operation: {stdout}");
    let cases = stdout
        .lines()
        .find(|l| l.contains(" generated, "))
        .unwrap_or_default();
    assert!(
        cases.contains("passed") && !cases.contains("failure"),
        "{stdout}"
    );
}
