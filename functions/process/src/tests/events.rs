//! The SNS wake-up events process reads.

use super::*;

#[test]
fn the_wakeup_fixture_parses_and_garbage_is_an_error() {
    let path = format!(
        "{}/../../events/process-wakeup.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let event: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(Wakeups::parse(event).unwrap().records, 1);
    let err = Wakeups::parse(serde_json::json!({"Records": [{"Sns": 3}]})).unwrap_err();
    assert!(
        err.to_string().starts_with("malformed SNS event: "),
        "{err}"
    );
    // An array is no SNS event, though serde reads a struct from one.
    for not_sns in [serde_json::json!([[]]), serde_json::json!({"Records": {}})] {
        let err = Wakeups::parse(not_sns).unwrap_err();
        assert!(err.to_string().contains("\"Records\" array"), "{err}");
    }
}

#[test]
fn a_wakeup_that_names_a_group_is_read() {
    let mut event: serde_json::Value =
        serde_json::from_str(include_str!("../../../../events/process-wakeup.json")).unwrap();
    event["Records"][0]["Sns"]["Message"] =
        serde_json::json!(r#"{"source":"trigger","reason":"sweep","at":1,"group":2}"#);
    assert_eq!(
        Wakeups::parse(event).unwrap(),
        Wakeups {
            records: 1,
            groups: vec![2],
            previous_trace: None,
            wake_at: None,
            handover: None,
        }
    );
}

/// Woken by rest alarms (through trigger), the invocation looks until the
/// latest rest end they named.
#[test]
fn a_rest_alarms_wakeup_names_when_its_rests_end() {
    let mut event: serde_json::Value =
        serde_json::from_str(include_str!("../../../../events/process-wakeup.json")).unwrap();
    let record = event["Records"][0].clone();
    event["Records"][0]["Sns"]["Message"] =
        serde_json::json!(r#"{"source":"trigger","reason":"rest-end","at":1,"wakeAt":5000}"#);
    let mut second = record;
    second["Sns"]["Message"] =
        serde_json::json!(r#"{"source":"trigger","reason":"rest-end","at":1,"wakeAt":7000}"#);
    event["Records"].as_array_mut().unwrap().push(second);
    assert_eq!(Wakeups::parse(event).unwrap().wake_at, Some(7000));
}

#[test]
fn a_tail_call_hands_over_what_its_claim_policy_left_and_nothing_else_counts() {
    let mut event: serde_json::Value =
        serde_json::from_str(include_str!("../../../../events/process-wakeup.json")).unwrap();
    let record = event["Records"][0].clone();
    let mut wakeup = lifo_lambda::Wakeup::new("process", "tail-call", 1_000);
    wakeup.group = Some(1);
    let value = serde_json::json!({"fairShare": {"at": 1000, "served": {"flood": [10, 400]}}});
    wakeup.handover = Some(value.clone());
    event["Records"][0]["Sns"]["Message"] =
        serde_json::json!(serde_json::to_string(&wakeup).unwrap());
    let got = Wakeups::parse(event.clone()).unwrap();
    let handover = got.handover.expect("a handover");
    assert_eq!(handover.group, Some(1));
    assert_eq!(serde_json::Value::Object(handover.value), value);
    // The version before's fields, or a handover that is no object: a
    // wake-up as any other, with none.
    for message in [
        r#"{"source":"process","reason":"tail-call","at":1,"group":1,"served":{"flood":[10]},"kept":[]}"#,
        r#"{"source":"process","reason":"tail-call","at":1,"group":1,"handover":[1,2]}"#,
    ] {
        let mut e = event.clone();
        e["Records"] = serde_json::json!([record.clone()]);
        e["Records"][0]["Sns"]["Message"] = serde_json::json!(message);
        let got = Wakeups::parse(e).unwrap();
        assert_eq!((got.handover, got.groups), (None, vec![1]), "{message}");
    }
}
