//! IAM as deployed (issue 32, "A local stack as strict as AWS"): each
//! function's calls in the local stack are checked against the policy
//! template.yaml gives its role ([`lifo_local::iam`]).

use lifo_local::stack::{IamMode, StackOptions};
use lifo_tests::Harness;
use serde_json::json;

/// template.yaml with `line` removed from `function`'s resource.
fn without(function: &str, line: &str) -> lifo_local::Template {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find(&format!("\n  {function}:\n")).unwrap();
    let end = start
        + 1
        + text[start + 1..]
            .match_indices("\n  ")
            .find(|(i, _)| {
                let rest = &text[start + 1 + i + 3..];
                rest.starts_with(|c: char| c.is_ascii_alphabetic())
            })
            .map_or(text.len() - start - 1, |(i, _)| i);
    let block = &text[start..end];
    assert!(block.contains(line), "{function} has {line:?}");
    let edited = block.replacen(&format!("{line}\n"), "", 1);
    lifo_local::Template::parse(&text.replacen(block, &edited, 1)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_its_policy_does_not_allow_is_refused_naming_function_action_and_resource() {
    let template = without("CreateFunction", "                - dynamodb:PutItem");
    let h = Harness::start_with(
        1,
        StackOptions {
            iam: IamMode::Template(Box::new(template)),
            ..StackOptions::default()
        },
    )
    .await;
    let e = h
        .creator()
        .handle(json!({"tasks": [{"taskId": "a", "payload": {"n": 1}}]}))
        .await
        .expect_err("create may not put");
    let text = lifo_core::error::chain(&e);
    let table_arn = format!(
        "arn:aws:dynamodb:us-east-1:000000000000:table/{}",
        h.stack.table
    );
    for part in [
        "AccessDeniedException",
        "assumed-role/CreateFunctionRole/CreateFunction",
        "dynamodb:PutItem",
        &table_arn,
    ] {
        assert!(text.contains(part), "{part} in: {text}");
    }
    assert!(h.tasks().await.is_empty(), "nothing written");
    // The API function's policy is its own: it may put.
    h.creator_as("ApiFunction")
        .handle(json!({"tasks": [{"taskId": "b", "payload": {"n": 1}}]}))
        .await
        .expect("the API function may put");
}

/// The defect of issue 32, item 9: create deletes the payload item of a
/// write that found its id taken, and its role lacked DeleteItem, so the
/// item stayed until TTL. As deployed, with the template as it is now,
/// nothing is orphaned; with the old policy, this fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_keyed_write_leaves_no_payload_item_behind() {
    for (template, orphaned) in [
        (None, false),
        (
            Some(without(
                "CreateFunction",
                "                - dynamodb:DeleteItem",
            )),
            true,
        ),
    ] {
        let h = Harness::start_with(
            1,
            StackOptions {
                iam: template.map_or(IamMode::AsDeployed, |t| IamMode::Template(Box::new(t))),
                ..StackOptions::default()
            },
        )
        .await;
        let c = h.creator();
        c.handle(json!({"tasks": [{"taskId": "dup", "payload": {"n": 1}}]}))
            .await
            .unwrap();
        // The same id again, keyed, with a payload of its own item: its
        // payload item is written first, then the transaction finds the id.
        let big = lifo_local::payloads::realistic(7, 4096);
        let r = c
            .handle(json!({"tasks": [{"taskId": "dup", "supersedeKey": "k", "payload": big}]}))
            .await
            .unwrap();
        assert!(r.created.is_empty(), "{r:?}");
        let payload = h
            .store
            .client()
            .get_item()
            .table_name(h.store.table())
            .key(
                "taskId",
                aws_sdk_dynamodb::types::AttributeValue::S(lifo_core::store::payload::payload_key(
                    "dup",
                )),
            )
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item;
        assert_eq!(payload.is_some(), orphaned, "orphaned payload item");
    }
}
