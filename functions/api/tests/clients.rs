//! Clients generated from docs/openapi.yaml as it is (issue 51, item 19):
//! openapi-python-client and @hey-api/openapi-ts each generate a client,
//! which is imported and drives create, get, list, cancel, retry, delete,
//! pause and stats against the local API behind the local API Gateway
//! with IAM on, each request signed with SigV4 in the client's own hook
//! (`clients/drive.py`, `clients/drive.ts`). A document a generator
//! cannot read whole (a schema dropped, a response parsed as the wrong
//! shape) fails here.

use crate::common;

use lifo_tests::{Harness, failed_task};
use std::path::{Path, PathBuf};
use std::process::Output;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh folder for one generated client.
fn work(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lifo-clients-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn run(what: &str, cmd: &mut tokio::process::Command) -> Output {
    let out = cmd
        .output()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e} (run `make test` once: it installs .tools)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}:\n{stdout}\n{stderr}");
    out
}

/// Sets what both drivers read: the API, the local stack's credentials and
/// a failed task to retry.
fn driver_env<'a>(
    cmd: &'a mut tokio::process::Command,
    base: &str,
    failed: &str,
) -> &'a mut tokio::process::Command {
    let credentials = lifo_local::stack::credentials();
    cmd.env("LIFO_API_URL", base)
        .env("AWS_ACCESS_KEY_ID", credentials.access_key_id())
        .env("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key())
        .env("AWS_REGION", lifo_local::stack::REGION)
        .env_remove("AWS_SESSION_TOKEN")
        .env("FAILED_TASK_ID", failed)
}

fn steps(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_generated_from_the_document_drives_the_api() {
    let h = Harness::start(1).await;
    let s = common::serve(&h).await;
    failed_task(&h.store, "py-failed", "downstream said no").await;
    let tools = root().join(".tools/openapi-python/bin");
    let dir = work("python");
    let started = std::time::Instant::now();
    // The generator's post-hooks (ruff) come from its own folder.
    let path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let generated = run(
        "openapi-python-client generate",
        tokio::process::Command::new(tools.join("openapi-python-client"))
            .args([
                "generate",
                "--meta",
                "none",
                "--output-path",
                "lifo_client",
                "--path",
            ])
            .arg(root().join("docs/openapi.yaml"))
            .current_dir(&dir)
            .env("PATH", &path),
    )
    .await;
    let said = String::from_utf8_lossy(&generated.stdout);
    assert!(
        !said.contains("Unable to") && !said.contains("removal of"),
        "every schema generated:\n{said}"
    );
    let out = run(
        "drive.py",
        driver_env(
            tokio::process::Command::new(tools.join("python"))
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/drive.py"))
                .current_dir(&dir)
                .env("PYTHONPATH", &dir)
                .env("PYTHONDONTWRITEBYTECODE", "1"),
            &s.base,
            "py-failed",
        ),
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    let steps = steps(&out);
    println!(
        "python client: {} steps in {:.1} s",
        steps.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        steps.last().map(String::as_str),
        Some("python: ok"),
        "{steps:?}"
    );
    let t = h.store.get("py-failed").await.unwrap().unwrap();
    assert_eq!(t.task_status, lifo_core::TaskStatus::Pending, "retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_generated_from_the_document_drives_the_api() {
    let h = Harness::start(1).await;
    let s = common::serve(&h).await;
    failed_task(&h.store, "ts-failed", "downstream said no").await;
    let tools = root().join(".tools/openapi-ts/node_modules");
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
    let dir = work("typescript");
    let started = std::time::Instant::now();
    for file in ["drive.ts", "tsconfig.json"] {
        std::fs::copy(here.join(file), dir.join(file)).unwrap();
    }
    run(
        "openapi-ts",
        tokio::process::Command::new(tools.join(".bin/openapi-ts"))
            .args(["-o", "client", "-i"])
            .arg(root().join("docs/openapi.yaml"))
            .current_dir(&dir)
            .env("NO_COLOR", "1"),
    )
    .await;
    run(
        "tsc",
        tokio::process::Command::new(tools.join(".bin/tsc"))
            .args(["-p", "."])
            .current_dir(&dir),
    )
    .await;
    let out = run(
        "drive.ts",
        driver_env(
            tokio::process::Command::new("node")
                .arg("out/drive.js")
                .current_dir(&dir)
                .env("NODE_PATH", &tools),
            &s.base,
            "ts-failed",
        ),
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    let steps = steps(&out);
    println!(
        "typescript client: {} steps in {:.1} s",
        steps.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        steps.last().map(String::as_str),
        Some("typescript: ok"),
        "{steps:?}"
    );
    let t = h.store.get("ts-failed").await.unwrap().unwrap();
    assert_eq!(t.task_status, lifo_core::TaskStatus::Pending, "retried");
}
