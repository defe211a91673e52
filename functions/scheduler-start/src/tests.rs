use super::*;
use aws_sdk_dynamodb::Client as Ddb;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::error::ConditionalCheckFailedException;
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use lifo_lambda::testing::publish;
use serde_json::json;
use std::collections::HashMap;

fn key(id: &str) -> HashMap<String, AttributeValue> {
    HashMap::from([("taskId".to_owned(), AttributeValue::S(id.into()))])
}

fn started_item(id: &str) -> HashMap<String, AttributeValue> {
    let t = lifo_core::Task::new_pending(id.into(), lifo_core::Payload::new(), 1, 60, 1);
    lifo_core::store::item::to_item(&t).unwrap_or_default()
}

fn config(shards: u32, catch_up: u32) -> SchedulerConfig {
    SchedulerConfig {
        table_name: "t".into(),
        process_topic_arn: "arn:process".into(),
        due_shard_count: shards,
        catch_up_days: catch_up,
        parallelism: 4,
        default_ttl_seconds: 3600,
        retention_seconds: 60,
        deadline_margin: Duration::from_millis(10),
        processors: 1,
    }
}

fn scheduler(ddb: &[&Rule], sns: &Rule, cfg: SchedulerConfig) -> Scheduler {
    let ddb = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, ddb);
    let sns = mock_client!(aws_sdk_sns, RuleMode::MatchAny, [sns]);
    Scheduler::new(Store::new(ddb, "t"), Notifier::new(sns, "arn:process"), cfg)
}

fn later() -> SystemTime {
    SystemTime::now() + Duration::from_secs(60)
}

#[test]
fn run_dates_come_from_eventbridge_or_a_backfill_request() {
    let eb = json!({"source": "aws.events", "detail-type": "Scheduled Event", "time": "2026-12-06T02:00:00Z"});
    assert_eq!(run_date(&eb).unwrap().to_string(), "2026-12-06");
    assert_eq!(
        run_date(&json!({"date": "2026-12-01"}))
            .unwrap()
            .to_string(),
        "2026-12-01"
    );
    assert_eq!(
        run_date(&json!({"detail": {"date": "2026-12-02"}}))
            .unwrap()
            .to_string(),
        "2026-12-02"
    );
    for (bad, msg) in [
        (
            json!({"date": "12/06/2026"}),
            "invalid event: date \"12/06/2026\" is not a date of the form YYYY-MM-DD",
        ),
        (
            json!({"date": 5}),
            "invalid event: date must be a string YYYY-MM-DD",
        ),
        (
            json!({"source": "aws.events"}),
            "invalid event: an EventBridge event without time",
        ),
        (
            json!([]),
            "invalid event: expected an EventBridge scheduled event or {\"date\": \"YYYY-MM-DD\"}",
        ),
    ] {
        assert_eq!(run_date(&bad).unwrap_err().to_string(), msg);
    }
}

#[test]
fn the_fixtures_name_their_run_dates() {
    for (name, date) in [
        ("scheduler-start-scheduled.json", "2026-12-06"),
        ("scheduler-start-backfill.json", "2026-12-06"),
    ] {
        let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
        let event: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(run_date(&event).unwrap().to_string(), date, "{name}");
    }
}

#[tokio::test]
async fn queries_every_shard_of_every_date_and_starts_what_it_finds() {
    // Partition 2026-12-06#01 holds two tasks over two pages; one of them
    // was cancelled meanwhile.
    let pages = mock!(Ddb::query)
        .match_requests(|r| {
            r.index_name() == Some("due-index")
                && r.expression_attribute_values()
                    .and_then(|v| v.get(":dueKey"))
                    == Some(&AttributeValue::S("2026-12-06#01".into()))
        })
        .sequence()
        .output(|| {
            QueryOutput::builder()
                .items(key("a"))
                .last_evaluated_key("taskId", AttributeValue::S("a".into()))
                .build()
        })
        .output(|| QueryOutput::builder().items(key("cancelled")).build())
        .build();
    let empty = mock!(Ddb::query)
        .match_requests(|r| {
            r.expression_attribute_values()
                .and_then(|v| v.get(":dueKey"))
                != Some(&AttributeValue::S("2026-12-06#01".into()))
        })
        .then_output(|| QueryOutput::builder().build());
    let start = mock!(Ddb::update_item)
        .match_requests(|r| {
            r.key().and_then(|k| k.get("taskId")) == Some(&AttributeValue::S("a".into()))
        })
        .then_compute_output(|_| {
            UpdateItemOutput::builder()
                .set_attributes(Some(started_item("a")))
                .build()
        });
    let skip = mock!(Ddb::update_item)
        .match_requests(|r| {
            r.key().and_then(|k| k.get("taskId")) == Some(&AttributeValue::S("cancelled".into()))
        })
        .then_error(|| {
            UpdateItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder().build(),
            )
        });
    let sns = publish();
    let report = scheduler(&[&pages, &empty, &start, &skip], &sns, config(3, 1))
        .run(NaiveDate::from_ymd_opt(2026, 12, 6).unwrap(), later())
        .await
        .unwrap();
    assert_eq!(report.dates, vec!["2026-12-05", "2026-12-06"]);
    assert_eq!(report.partitions, 6);
    assert_eq!(empty.num_calls(), 5, "every other partition was read once");
    assert_eq!((report.started, report.skipped, report.pages), (1, 1, 7));
    assert!(report.woke_processor);
    assert_eq!(sns.num_calls(), 1, "the processor is woken once");
}

#[tokio::test]
async fn nothing_due_wakes_nobody_and_the_deadline_stops_starting() {
    let empty = mock!(Ddb::query).then_output(|| QueryOutput::builder().build());
    let sns = publish();
    let report = scheduler(&[&empty], &sns, config(2, 0))
        .run(NaiveDate::from_ymd_opt(2026, 12, 6).unwrap(), later())
        .await
        .unwrap();
    assert_eq!((report.started, report.woke_processor), (0, false));
    assert_eq!(sns.num_calls(), 0);

    let full = mock!(Ddb::query).then_output(|| QueryOutput::builder().items(key("x")).build());
    let sns = publish();
    let report = scheduler(&[&full], &sns, config(2, 0))
        .run(
            NaiveDate::from_ymd_opt(2026, 12, 6).unwrap(),
            SystemTime::now(),
        )
        .await
        .unwrap();
    assert!(report.stopped_early);
    assert_eq!(
        report.started, 0,
        "past the deadline nothing is started; it stays SCHEDULED"
    );
}
