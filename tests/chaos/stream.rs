//! The chaos run's independent witness: every change the table's stream
//! says committed.

use lifo_lab::chaos::{Change, Image};
use lifo_tests::Harness;
use std::collections::HashMap;

/// Every committed change of the table, from its stream.
pub async fn stream_changes(h: &Harness) -> Vec<Change> {
    use aws_sdk_dynamodbstreams::types::{AttributeValue, ShardIteratorType};
    let image = |m: Option<&HashMap<String, AttributeValue>>| {
        let m = m?;
        let status = m.get("taskStatus")?.as_s().ok()?;
        let token = m
            .get("token")
            .and_then(|t| t.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        Some(Image {
            status: serde_json::from_value(serde_json::json!(status)).ok()?,
            token,
        })
    };
    let streams = &h.stack.streams;
    let arn = h
        .stack
        .stream_arn
        .as_deref()
        .expect("a DynamoDB Local of its own has the stream");
    let shards = streams
        .describe_stream()
        .stream_arn(arn)
        .send()
        .await
        .unwrap();
    let mut out = Vec::new();
    for shard in shards
        .stream_description
        .and_then(|d| d.shards)
        .unwrap_or_default()
    {
        let mut it = streams
            .get_shard_iterator()
            .stream_arn(arn)
            .shard_id(shard.shard_id().unwrap_or_default())
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator;
        while let Some(i) = it {
            let page = streams
                .get_records()
                .shard_iterator(i)
                .limit(1000)
                .send()
                .await
                .unwrap();
            let records = page.records();
            if records.is_empty() {
                break;
            }
            for r in records {
                let Some(d) = r.dynamodb() else { continue };
                let id = d
                    .keys()
                    .and_then(|k| k.get("taskId"))
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default();
                out.push(Change {
                    id,
                    old: image(d.old_image()),
                    new: image(d.new_image()),
                });
            }
            it = page.next_shard_iterator;
        }
    }
    out
}
