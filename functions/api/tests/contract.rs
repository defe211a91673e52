//! The HTTP API against its own contract (issue 33): schemathesis runs
//! docs/openapi.yaml with every check against the local API, behind the
//! local API Gateway with IAM on and every request signed with SigV4
//! (`contract/hooks.py`), at two fixed seeds and a bounded number of
//! examples (`contract/schemathesis.toml`), its stateful phase following
//! the document's links (how many it followed is printed and checked). It fails when the document
//! allows what the server refuses (positive data), the server accepts what
//! the document refuses (negative data), an answer breaks its schema or
//! status list, an operation ignores the authorizer, or anything answers
//! 5xx.

mod common;

use lifo_local::api_gateway::ApiGateway;
use lifo_tests::Harness;
use std::path::Path;
use std::time::Duration;

/// The seeds of the run (issue 51, item 25: each phase at both, with
/// every link the document has in play).
const SEEDS: [u32; 2] = [7, 2027];
/// Links the stateful phase must follow at each seed (the document has 21:
/// create, then get, history, cancel, retry, delete of the same task).
const MIN_LINKS: usize = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_keeps_the_openapi_document_with_authentication_on() {
    // The seeds run side by side: each is one request at a time through
    // schemathesis, the gateway and DynamoDB Local, about one core's work.
    let [a, b] = SEEDS;
    tokio::join!(run_at_seed(a), run_at_seed(b));
}

/// schemathesis at `seed`, against a table and a served API of its own.
async fn run_at_seed(seed: u32) {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.join("../..");
    let contract = here.join("tests/contract");
    let credentials = lifo_local::stack::credentials();
    // A table of its own per seed: one seed's thousands of tasks do not
    // slow the next one's reads.
    let h = Harness::start(1).await;
    // DynamoDB Local on a loaded 2-core machine can take longer than
    // API Gateway's 30 s for what DynamoDB does in one or two (a create
    // of 1,000 tasks, stats over 32 days): the contract is what is
    // answered, not how fast, so the integration may take 120 s here.
    let gateway = ApiGateway {
        timeout: Some(Duration::from_secs(120)),
        ..ApiGateway::default()
    };
    let served = common::serve_api(common::api(&h), gateway).await;
    // Its caches (.hypothesis/) go to a folder of its own.
    let work = std::env::temp_dir().join(format!("lifo-contract-{}-{seed}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let started = std::time::Instant::now();
    let out = tokio::process::Command::new(root.join(".tools/schemathesis/bin/schemathesis"))
        .arg("--config-file")
        .arg(contract.join("schemathesis.toml"))
        .arg("run")
        .arg(root.join("docs/openapi.yaml"))
        .args(["--url", &served.base, "--seed", &seed.to_string()])
        .current_dir(&work)
        .env("SCHEMATHESIS_HOOKS", contract.join("hooks.py"))
        .env("AWS_ACCESS_KEY_ID", credentials.access_key_id())
        .env("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key())
        .env("AWS_REGION", lifo_local::stack::REGION)
        .env_remove("AWS_SESSION_TOKEN")
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .output()
        .await
        .expect("run `make test` once: it installs .tools/schemathesis");
    let _ = std::fs::remove_dir_all(&work);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The summary (operations, test cases, links, seed), for the log.
    for line in stdout.lines().filter(|l| {
        l.contains("Tested:")
            || l.contains("generated")
            || l.contains("API Links:")
            || l.starts_with("Seed:")
            || l.contains(" (in ")
    }) {
        println!("schemathesis seed {seed}: {}", line.trim());
    }
    println!(
        "schemathesis seed {seed}: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "seed {seed}:\n{stdout}\n{stderr}");
    assert!(stdout.contains("Tested: 11"), "every operation: {stdout}");
    let cases = stdout
        .lines()
        .find(|l| l.contains(" generated, "))
        .unwrap_or_default();
    assert!(
        cases.contains("passed") && !cases.contains("failure"),
        "{stdout}"
    );
    // "API Links: 21 covered / 34 selected / 34 total".
    let covered: usize = stdout
        .lines()
        .find_map(|l| l.split("API Links:").nth(1))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("seed {seed}: no link coverage in {stdout}"));
    assert!(
        covered >= MIN_LINKS,
        "seed {seed}: {covered} links followed, fewer than {MIN_LINKS}"
    );
}
