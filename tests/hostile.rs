//! Hostile input: every parser (create, trigger, process, task items) on a
//! small corpus of malformed events kept in tests/corpus/, on mutated
//! fixtures and on random JSON shaped like the real events. Nothing may
//! panic: the answer is a clear error (or a partial batch failure).
//! These tests need no servers (AWS calls go to aws-smithy-mocks).

use aws_sdk_dynamodb::operation::batch_write_item::BatchWriteItemOutput;
use aws_sdk_dynamodb::operation::put_item::PutItemOutput;
use aws_sdk_sns::operation::publish::PublishOutput;
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use lifo_core::{Candidate, Store};
use lifo_lambda::Notifier;
use lifo_ops::create::{CreateConfig, CreateError, Creator};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;
use trigger::Trigger;

fn rules() -> &'static (Rule, Rule, Rule) {
    static RULES: OnceLock<(Rule, Rule, Rule)> = OnceLock::new();
    RULES.get_or_init(|| {
        (
            mock!(aws_sdk_dynamodb::Client::batch_write_item)
                .sequence()
                .output(|| BatchWriteItemOutput::builder().build())
                .repeatedly()
                .build(),
            mock!(aws_sdk_dynamodb::Client::put_item)
                .sequence()
                .output(|| PutItemOutput::builder().build())
                .repeatedly()
                .build(),
            mock!(aws_sdk_sns::Client::publish)
                .sequence()
                .output(|| PublishOutput::builder().message_id("m").build())
                .repeatedly()
                .build(),
        )
    })
}

fn handlers() -> (Creator, Trigger) {
    let (batch, put, publish) = rules();
    let ddb = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [batch, put]);
    let sns = mock_client!(aws_sdk_sns, RuleMode::MatchAny, [publish]);
    let config = CreateConfig {
        table_name: "t".into(),
        shard_count: 2,
        default_ttl_seconds: 60,
        max_ttl_seconds: 3600,
        ..CreateConfig::new("t")
    };
    (
        Creator::new(Store::new(ddb, "t"), config),
        Trigger::new(Notifier::new(sns, "arn:process")),
    )
}

/// Runs `event` through every event parser; panics propagate as failures.
fn run_all(event: Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (creator, trigger) = handlers();
        // create: a valid request may be written (to the mock); anything
        // else must be an InvalidRequest naming a field.
        if let Err(e) = creator.handle(event.clone()).await {
            assert!(
                matches!(e, CreateError::Invalid { .. }),
                "create gave a non-validation error: {e}"
            );
        }
        // trigger: a batch it reads (malformed records reported one by
        // one), or a refusal of the event as malformed or unrecognised,
        // never another error (the publish mock always succeeds).
        match trigger.handle(event.clone()).await {
            Ok(_) => {}
            Err(
                e @ (trigger::TriggerError::Malformed { .. }
                | trigger::TriggerError::Unrecognised(_)),
            ) => {
                assert!(!e.to_string().is_empty());
            }
            Err(e) => panic!("trigger gave a non-event error: {e}"),
        }
        // process: wake-ups read, or the event refused as malformed.
        match process::Wakeups::parse(event.clone()) {
            Ok(w) => assert!(w.records > 0 || event.get("Records").is_some(), "{w:?}"),
            Err(process::ProcessError::Malformed(m)) => assert!(!m.is_empty()),
            Err(e) => panic!("process gave a non-event error: {e}"),
        }
    });
    // task items: any map that parses must round-trip
    if let Value::Object(m) = &event
        && let Ok(item) = serde_dynamo::to_item::<_, lifo_core::store::Item>(m)
    {
        if let Ok(task) = lifo_core::store::item::from_item(item.clone()) {
            let back = lifo_core::store::item::to_item(&task).unwrap();
            assert_eq!(lifo_core::store::item::from_item(back).unwrap(), task);
        }
        let _ = serde_dynamo::from_item::<_, Candidate>(item);
    }
}

#[test]
fn the_corpus_gets_errors_not_panics() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        match serde_json::from_str::<Value>(&text) {
            Ok(event) => run_all(event),
            // Lambda's runtime refuses what is not JSON (or too deep) before
            // any handler runs. Only the over-deep file is meant to be
            // refused there; any other unparseable file is a broken corpus.
            Err(e) => assert!(
                path.ends_with("create-deep.json") && e.to_string().contains("recursion limit"),
                "{}: {e}",
                path.display()
            ),
        }
        n += 1;
    }
    assert!(n >= 10, "corpus has {n} files");
}

#[test]
fn every_fixture_with_each_field_removed_or_replaced() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../events");
    for entry in std::fs::read_dir(dir).unwrap() {
        let fixture: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        let mut paths = Vec::new();
        collect_paths(&fixture, String::new(), &mut paths);
        for p in paths {
            for replacement in [Value::Null, json!(7), json!("x"), json!([]), json!({})] {
                let mut mutated = fixture.clone();
                if let Some(slot) = mutated.pointer_mut(&p) {
                    *slot = replacement;
                }
                run_all(mutated);
            }
        }
    }
}

fn collect_paths(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                collect_paths(child, p, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                collect_paths(child, p, out);
            }
        }
        _ => {}
    }
}

/// Random JSON built from the words the parsers look for.
fn event_like() -> impl Strategy<Value = Value> {
    let words = prop::sample::select(vec![
        "Records",
        "eventSource",
        "EventSource",
        "eventName",
        "dynamodb",
        "NewImage",
        "Keys",
        "SequenceNumber",
        "claimableAt",
        "N",
        "S",
        "M",
        "L",
        "BOOL",
        "Sns",
        "Message",
        "TopicArn",
        "Timestamp",
        "source",
        "count",
        "tasks",
        "taskId",
        "payload",
        "ttlSeconds",
        "aws:dynamodb",
        "aws:sns",
        "aws.events",
        "INSERT",
        "MODIFY",
        "taskStatus",
        "PENDING",
        "TAKEN",
        "token",
        "attempts",
        "leaseUntil",
        "history",
        "ttl",
        "lifoShard",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e300f64..1e300).prop_map(Value::from),
        words.clone().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 80, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((words.clone(), inner), 0..6).prop_map(|kv| Value::Object(
                kv.into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Map<_, _>>()
            )),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn random_events_get_errors_not_panics(event in event_like()) {
        run_all(event);
    }
}
