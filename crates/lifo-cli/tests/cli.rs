//! The `lifo` commands against the local stack (DynamoDB Local).

use clap::{CommandFactory, Parser};
use lifo_cli::{Cli, run, store};
use lifo_tests::{Harness, deadline};
use std::time::Duration;

async fn lifo(h: &Harness, args: &[&str]) -> Result<String, String> {
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
    ];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    let store = store(&cli).await;
    run(&cli, &store).await.map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_commands_against_the_local_stack() {
    let h = Harness::start(2).await;
    let created = h
        .creator()
        .handle(serde_json::json!({"tasks": [
            {"taskId": "run-me", "userId": "1234", "payload": {"n": 1}},
            {"taskId": "later", "userId": "1234", "dueInDays": 3, "payload": {"n": 2}},
            {"taskId": "also-later", "userId": "1234", "dueInDays": 4, "payload": {"n": 3}}
        ]}))
        .await
        .unwrap();
    assert_eq!(created.created.len(), 3);

    let stats = lifo(&h, &["stats"]).await.unwrap();
    assert!(
        stats.ends_with("1 claimable task(s) in table QueueTable"),
        "{stats}"
    );
    let stats: serde_json::Value =
        serde_json::from_str(&lifo(&h, &["--json", "stats"]).await.unwrap()).unwrap();
    let total: u64 = stats
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["claimable"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 1);

    h.processor(1, Duration::ZERO, Duration::from_secs(5))
        .handle(1, deadline())
        .await
        .unwrap();
    let got = lifo(&h, &["tasks", "get", "run-me"]).await.unwrap();
    assert!(got.contains("status      SUCCESS"), "{got}");
    let history = lifo(&h, &["tasks", "history", "run-me"]).await.unwrap();
    assert!(
        history.contains("TAKEN") && history.ends_with("task run-me is SUCCESS (2 transitions)"),
        "{history}"
    );

    assert_eq!(
        lifo(&h, &["tasks", "cancel", "later"]).await.unwrap(),
        "cancelled later"
    );
    let err = lifo(&h, &["tasks", "cancel", "run-me"]).await.unwrap_err();
    assert_eq!(
        err,
        "task run-me is SUCCESS; only SCHEDULED tasks can be cancelled"
    );
    assert_eq!(
        lifo(&h, &["tasks", "get", "nope"]).await.unwrap_err(),
        "no task nope"
    );

    let list = lifo(&h, &["tasks", "list", "--user", "1234"])
        .await
        .unwrap();
    assert!(
        list.ends_with("3 task(s) of user 1234, newest first"),
        "{list}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &lifo(&h, &["--json", "tasks", "list", "--user", "1234"])
            .await
            .unwrap(),
    )
    .unwrap();
    let statuses: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskStatus"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.len(), 3);
    assert!(
        statuses.contains(&"CANCELLED")
            && statuses.contains(&"SCHEDULED")
            && statuses.contains(&"SUCCESS")
    );
}

#[test]
fn every_command_has_help_with_an_example() {
    let mut cmd = Cli::command();
    cmd.build();
    let mut missing = Vec::new();
    fn walk(c: &clap::Command, path: String, missing: &mut Vec<String>) {
        let subs: Vec<&clap::Command> = c
            .get_subcommands()
            .filter(|s| s.get_name() != "help")
            .collect();
        if subs.is_empty() {
            let help = c
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            if !help.starts_with("Example: lifo") {
                missing.push(path.clone());
            }
        }
        for s in subs {
            walk(s, format!("{path} {}", s.get_name()), missing);
        }
    }
    walk(&cmd, "lifo".into(), &mut missing);
    assert!(
        missing.is_empty(),
        "commands without an example: {missing:?}"
    );
}
