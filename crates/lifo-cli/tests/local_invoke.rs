//! Lambda as deployed (issue 32): every fixture in `events/` through its
//! function's real binary under AWS's Runtime Interface Emulator (what `sam
//! local invoke` runs inside its container), with the template's
//! environment and behind its IAM policy (issue 50: the binary talked to
//! DynamoDB Local directly, so a policy without an action it uses went
//! unnoticed), against one local stack. Each answer and its log lines are
//! checked. The binaries are the debug ones `make test` builds first
//! (`cargo build --bins`).

use lifo_cli::local::Function;
use lifo_local::LocalStack;
use lifo_local::rie::{Emulated, locate};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The function a fixture is for, by its name; `None` for events of other
/// programs (the worker example's request).
fn function_of(name: &str) -> Option<Function> {
    Function::ALL
        .into_iter()
        .find(|f| name.starts_with(&format!("{}-", f.binary())))
}

/// What each fixture must answer.
fn check(name: &str, answer: &Value) {
    let error = answer.get("errorType");
    match name {
        "create-invalid.json" => {
            assert_eq!(answer["errorType"], "InvalidRequest", "{answer}");
            assert!(
                answer["errorMessage"]
                    .as_str()
                    .unwrap_or("")
                    .contains("tasks[0].payload"),
                "{answer}"
            );
        }
        "create-tasks.json" => {
            assert!(
                answer["created"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|i| i == "order-1001")),
                "{answer}"
            );
        }
        "create-scheduled.json" => assert_eq!(
            answer["created"].as_array().map(Vec::len),
            Some(2),
            "{answer}"
        ),
        "create-demo.json" => assert_eq!(
            answer["created"].as_array().map(Vec::len),
            Some(20),
            "{answer}"
        ),
        n if n.starts_with("trigger-") => {
            assert_eq!(
                answer["batchItemFailures"],
                serde_json::json!([]),
                "{n}: {answer}"
            );
        }
        "process-wakeup.json" => {
            assert!(error.is_none(), "{answer}");
            assert!(answer["stop"].is_string(), "{answer}");
        }
        n if n.starts_with("scheduler-start-") => assert!(error.is_none(), "{n}: {answer}"),
        "api-create.json" => assert_eq!(answer["statusCode"], 201, "{answer}"),
        "api-jwt-read-scope-create.json" => assert_eq!(answer["statusCode"], 403, "{answer}"),
        n if n.starts_with("api-") => assert_eq!(answer["statusCode"], 200, "{n}: {answer}"),
        other => panic!("no expected answer for {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_runs_through_its_binary_under_the_runtime_interface_emulator() {
    let rie = locate().expect("the SAM CLI's emulator (make tools)");
    let stack = LocalStack::start().await.unwrap();
    let mut fixtures: Vec<(String, Function)> = std::fs::read_dir(workspace().join("events"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            function_of(&name).map(|f| (name, f))
        })
        .collect();
    // process first (on an empty table it answers at once: later, the
    // tasks create wrote would keep it busy for its whole budget), and
    // api-create before the API's reads of what it wrote.
    let order = [
        Function::Process,
        Function::Trigger,
        Function::SchedulerStart,
        Function::Create,
        Function::Api,
    ];
    fixtures.sort_by_key(|(name, _)| (name != "api-create.json", name.clone()));
    let mut ran = Vec::new();
    for function in order {
        let mine: Vec<&String> = fixtures
            .iter()
            .filter(|(_, f)| *f == function)
            .map(|(n, _)| n)
            .collect();
        if mine.is_empty() {
            continue;
        }
        // The function behind its policy, as deployed: the IAM proxy lives
        // as long as the binary runs.
        let (env, _iam) = stack
            .guarded_binary_env(function.logical_id())
            .await
            .unwrap();
        assert!(
            _iam.is_some()
                && env.iter().any(|(k, v)| k == "AWS_ENDPOINT_URL_DYNAMODB"
                    && *v != stack.dynamodb_local.endpoint),
            "{env:?}"
        );
        let binary = workspace().join("target/debug").join(function.binary());
        let emulated = Emulated::start(&rie, &binary, &env).await.unwrap();
        for name in mine {
            let event = std::fs::read(workspace().join("events").join(name)).unwrap();
            let invoked = emulated
                .invoke(&event, Duration::from_secs(60))
                .await
                .unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(invoked.status, 200, "{name}: {}", invoked.body);
            let answer: Value = serde_json::from_str(&invoked.body)
                .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {}", invoked.body));
            check(name, &answer);
            // Lambda's own lines, and the function's JSON log lines.
            for mark in ["START RequestId", "END RequestId", "REPORT RequestId"] {
                assert!(
                    invoked.lines.iter().any(|l| l.contains(mark)),
                    "{name}: no {mark} in {:#?}",
                    invoked.lines
                );
            }
            // Every function logs JSON lines; the API's reads log nothing
            // of their own when they succeed.
            let quiet = name.starts_with("api-") && name != "api-create.json";
            assert!(
                quiet
                    || invoked.lines.iter().any(|l| {
                        serde_json::from_str::<Value>(l).is_ok_and(|v| v.get("level").is_some())
                    }),
                "{name}: no JSON log line in {:#?}",
                invoked.lines
            );
            ran.push(name.clone());
        }
        emulated.stop().await;
    }
    println!("ran under aws-lambda-rie: {ran:?}");
    assert!(ran.len() >= 15, "{ran:?}");
}

/// `lifo local invoke --template COPY` (issue 50, item 6): with
/// `dynamodb:PutItem` removed from CreateFunction's policy in a copy of the
/// template, create's binary is refused as AWS would refuse it, naming the
/// role, the action and the resource, and writes nothing (it created
/// `order-1001` before: the binary talked to DynamoDB Local directly).
#[test]
fn a_binary_is_held_to_its_policy_in_the_template_it_is_given() {
    let template = std::fs::read_to_string(workspace().join("template.yaml")).unwrap();
    let create = template.find("\n  CreateFunction:\n").unwrap();
    let put = create + template[create..].find("- dynamodb:PutItem\n").unwrap();
    let line = template[..put].rfind('\n').unwrap() + 1;
    let end = put + "- dynamodb:PutItem\n".len();
    let copy = format!("{}{}", &template[..line], &template[end..]);
    assert!(!copy[create..create + 4000].contains("dynamodb:PutItem"));
    let dir = std::env::temp_dir().join(format!("lifo-invoke-iam-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("template.yaml");
    std::fs::write(&file, copy).unwrap();
    let lifo = std::env::var_os("LIFO_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_lifo")), PathBuf::from);
    let out = std::process::Command::new(&lifo)
        .args(["local", "invoke", "create", "--event"])
        .arg(workspace().join("events/create-tasks.json"))
        .arg("--bin-dir")
        .arg(workspace().join("target/debug"))
        .arg("--template")
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let answer: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
    let message = answer["errorMessage"].as_str().unwrap_or_default();
    assert!(answer.get("created").is_none(), "{answer}");
    for part in [
        "AccessDeniedException",
        "assumed-role/CreateFunctionRole/CreateFunction",
        "does not allow dynamodb:PutItem",
        "on arn:aws:dynamodb:us-east-1:000000000000:table/QueueTable",
    ] {
        assert!(message.contains(part), "{part:?} not in {answer}\n{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
