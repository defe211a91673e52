use super::*;

#[test]
fn reads_the_workspace_template() {
    let t = Template::workspace().unwrap();
    let table = t.table("QueueTable").unwrap();
    assert_eq!(table.key_schema[0].attribute_name, "taskId");
    let gsi = &table.global_secondary_indexes[0];
    assert_eq!(gsi.index_name, lifo_core::expr::CLAIMABLE_INDEX);
    assert_eq!(
        gsi.key_schema[0].attribute_name,
        lifo_core::expr::attr::SHARD
    );
    assert_eq!(
        gsi.key_schema[1].attribute_name,
        lifo_core::expr::attr::CLAIMABLE_AT
    );
    assert_eq!(
        gsi.projection.non_key_attributes,
        vec![
            lifo_core::expr::attr::EXPIRES_AT,
            lifo_core::expr::attr::LEASE_UNTIL,
            lifo_core::expr::attr::TOKEN,
            lifo_core::expr::attr::ATTEMPTS,
            lifo_core::expr::attr::RETRY_AT,
            lifo_core::expr::attr::TENANT
        ]
    );
    assert_eq!(
        table.time_to_live_specification.unwrap().attribute_name,
        "ttl"
    );
    let mut topics = t.topics();
    topics.sort();
    assert_eq!(topics, vec!["ProcessTopic", "TriggerTopic"]);
    let s = t.stream_source(crate::stack::TRIGGER_STREAM).unwrap();
    assert_eq!(
        (s.batch_size, s.batching_window_seconds, s.filters.len()),
        (10, 1, 3)
    );
    assert_eq!(t.parameter_default("ShardCount").unwrap(), "1");
    assert_eq!(t.parameter_default("RunnerFailureRate").unwrap(), "0");
    assert!(t.function_timeout("ProcessFunction").unwrap() > 600);
}

/// Least privilege: each function may call exactly the actions its code
/// uses, on exactly the resources it needs. The one wildcard is
/// dynamodb:ListStreams, which has no resource-level permissions. (SAM
/// adds, outside these statements, the basic execution role for logs,
/// AWSXrayWriteOnlyAccess for `Tracing: Active` — X-Ray's PutTraceSegments
/// has no resource-level permissions either — and sqs:SendMessage on the
/// dead-letter queue for the async on-failure destinations.)
#[test]
fn every_function_gets_only_what_it_uses() {
    let t = Template::workspace().unwrap();
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = v
            .iter()
            .map(|(a, r)| (a.to_string(), r.to_string()))
            .collect();
        v.sort();
        v
    };
    let table = "!GetAtt QueueTable.Arn";
    let key = "!GetAtt TopicKey.Arn";
    let expected = [
        (
            "CreateFunction",
            pairs(&[
                ("dynamodb:BatchWriteItem", table),
                ("dynamodb:PutItem", table),
                ("dynamodb:GetItem", table),
                ("dynamodb:UpdateItem", table),
                // Payload items of a write that failed are deleted again.
                ("dynamodb:DeleteItem", table),
                ("sns:Publish", "!Ref ProcessTopic"),
                ("kms:GenerateDataKey", key),
                ("kms:Decrypt", key),
            ]),
        ),
        (
            "TriggerFunction",
            pairs(&[
                ("sns:Publish", "!Ref ProcessTopic"),
                (
                    "dynamodb:Query",
                    "!Sub ${QueueTable.Arn}/index/claimable-index",
                ),
                ("dynamodb:GetItem", table),
                ("dynamodb:UpdateItem", table),
                ("kms:GenerateDataKey", key),
                ("kms:Decrypt", key),
                ("dynamodb:DescribeStream", "!GetAtt QueueTable.StreamArn"),
                ("dynamodb:GetRecords", "!GetAtt QueueTable.StreamArn"),
                ("dynamodb:GetShardIterator", "!GetAtt QueueTable.StreamArn"),
                ("dynamodb:ListStreams", "*"),
                ("sqs:SendMessage", "!GetAtt DeadLetterQueue.Arn"),
                ("sqs:ReceiveMessage", "!GetAtt RestWakeQueue.Arn"),
                ("sqs:DeleteMessage", "!GetAtt RestWakeQueue.Arn"),
                ("sqs:GetQueueAttributes", "!GetAtt RestWakeQueue.Arn"),
                ("sqs:SendMessage", "!GetAtt RestWakeQueue.Arn"),
            ]),
        ),
        (
            "ProcessFunction",
            pairs(&[
                (
                    "dynamodb:Query",
                    "!Sub ${QueueTable.Arn}/index/claimable-index",
                ),
                ("dynamodb:UpdateItem", table),
                ("dynamodb:GetItem", table),
                ("sns:Publish", "!Ref TriggerTopic"),
                ("sqs:SendMessage", "!GetAtt RestWakeQueue.Arn"),
                (
                    "lambda:InvokeFunction",
                    "(if IsLambdaRunner) !Ref WorkerFunctionArn",
                ),
                ("kms:GenerateDataKey", key),
                ("kms:Decrypt", key),
            ]),
        ),
        (
            "ApiFunction",
            pairs(&[
                ("dynamodb:GetItem", table),
                ("dynamodb:BatchGetItem", table),
                ("dynamodb:PutItem", table),
                ("dynamodb:BatchWriteItem", table),
                ("dynamodb:UpdateItem", table),
                ("dynamodb:DeleteItem", table),
                (
                    "dynamodb:Query",
                    "!Sub ${QueueTable.Arn}/index/claimable-index",
                ),
                ("dynamodb:Query", "!Sub ${QueueTable.Arn}/index/due-index"),
                ("dynamodb:Query", "!Sub ${QueueTable.Arn}/index/user-index"),
                (
                    "dynamodb:Query",
                    "!Sub ${QueueTable.Arn}/index/failed-index",
                ),
                ("dynamodb:Query", "!Sub ${QueueTable.Arn}/index/shed-index"),
                (
                    "dynamodb:Query",
                    "!Sub ${QueueTable.Arn}/index/superseded-index",
                ),
                ("sns:Publish", "!Ref ProcessTopic"),
                ("kms:GenerateDataKey", key),
                ("kms:Decrypt", key),
            ]),
        ),
        (
            "SchedulerStartFunction",
            pairs(&[
                ("dynamodb:Query", "!Sub ${QueueTable.Arn}/index/due-index"),
                ("dynamodb:UpdateItem", table),
                ("sns:Publish", "!Ref ProcessTopic"),
                ("kms:GenerateDataKey", key),
                ("kms:Decrypt", key),
            ]),
        ),
    ];
    assert_eq!(
        t.doc["Conditions"]["IsLambdaRunner"],
        serde_json::json!({"!Equals": [{"!Ref": "RunnerKind"}, "lambda"]})
    );
    for (function, want) in expected {
        assert_eq!(
            t.function_permissions(function).unwrap(),
            want,
            "{function}"
        );
    }
    // No function has any other way to get permissions.
    for (name, r) in t.doc["Resources"].as_object().unwrap() {
        if r["Type"] == "AWS::Serverless::Function" {
            assert!(
                r["Properties"].get("Role").is_none(),
                "{name} brings its own role"
            );
            assert!(
                r["Properties"]
                    .get("Events")
                    .and_then(|e| e.as_object())
                    .is_none_or(|events| {
                        events.values().all(|e| {
                            e["Type"] != "DynamoDB" && e["Type"] != "SQS" && e["Type"] != "Kinesis"
                        })
                    }),
                "{name} has a SAM poller event (it would attach a managed policy with Resource *)"
            );
        }
    }
}

/// The tail-call loop (process → TriggerTopic → trigger → ProcessTopic →
/// process) is intended: Lambda's recursive loop detection must let it
/// run on trigger and process, and only there. Our own guard stays:
/// process runs one at a time, and an alarm watches the loop.
/// (`scripts/check-sam-translation` checks that SAM passes the property
/// through to AWS::Lambda::Function.)
#[test]
fn the_tail_call_loop_is_allowed_on_its_two_functions_only() {
    let t = Template::workspace().unwrap();
    for (name, r) in t.doc["Resources"].as_object().unwrap() {
        if r["Type"] != "AWS::Serverless::Function" {
            continue;
        }
        let in_loop = matches!(name.as_str(), "TriggerFunction" | "ProcessFunction");
        let setting = r["Properties"].get("RecursiveLoop");
        assert_eq!(
            setting.and_then(Value::as_str),
            in_loop.then_some("Allow"),
            "{name}"
        );
    }
    // One invocation per shard group at a time (the default: one).
    let process = t.resource("ProcessFunction").unwrap();
    assert_eq!(
        process["Properties"]["ReservedConcurrentExecutions"],
        serde_json::json!({"!Ref": "ProcessorCount"})
    );
    assert_eq!(t.parameter_default("ProcessorCount").unwrap(), "1");
    let alarm = t.resource("TailCallLoopAlarm").unwrap();
    let metric = &alarm["Properties"]["Metrics"][0]["MetricStat"]["Metric"];
    assert_eq!(metric["MetricName"], "TailCalls");
    assert_eq!(metric["Namespace"], "LifoQueue");
}

#[test]
fn the_template_filter_passes_the_fixture_and_nothing_else() {
    let t = Template::workspace().unwrap();
    let s = t.stream_source(crate::stack::TRIGGER_STREAM).unwrap();
    let path = format!(
        "{}/../../events/trigger-stream-insert.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let event: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for record in event["Records"].as_array().unwrap() {
        assert!(crate::filter::matches(&s.filters[0], record));
        let mut modify = record.clone();
        modify["eventName"] = "MODIFY".into();
        assert!(!crate::filter::matches(&s.filters[0], &modify));
        let mut scheduled = record.clone();
        scheduled["dynamodb"]["NewImage"]
            .as_object_mut()
            .unwrap()
            .remove("claimableAt");
        assert!(!crate::filter::matches(&s.filters[0], &scheduled));
        let passes = |r: &Value| s.filters.iter().any(|f| crate::filter::matches(f, r));
        assert!(!passes(&modify) && !passes(&scheduled));
        // DynamoDB's TTL deletion of a task never started nor shed
        // passes (TasksShed); of a shed one (counted when shed), or
        // a user's delete, does not.
        let mut ttl_delete = record.clone();
        ttl_delete["eventName"] = "REMOVE".into();
        ttl_delete["dynamodb"]["OldImage"] = serde_json::json!({"taskStatus": {"S": "PENDING"}});
        ttl_delete["userIdentity"] =
            serde_json::json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
        assert!(passes(&ttl_delete));
        let mut shed_delete = ttl_delete.clone();
        shed_delete["dynamodb"]["OldImage"]["taskStatus"]["S"] = "EXPIRED".into();
        assert!(!passes(&shed_delete));
        ttl_delete["userIdentity"] = serde_json::json!({"type": "User", "principalId": "someone"});
        assert!(!passes(&ttl_delete));
    }
    // The control item passes (pause, resume, nudge); a task's MODIFY
    // does not.
    let control = serde_json::json!({"eventName": "MODIFY", "eventSource": "aws:dynamodb",
            "dynamodb": {"Keys": {"taskId": {"S": lifo_core::store::CONTROL_ID}},
                         "NewImage": {"paused": {"BOOL": false}}}});
    assert!(
        s.filters
            .iter()
            .any(|f| crate::filter::matches(f, &control))
    );
    let mut task_modify = control.clone();
    task_modify["dynamodb"]["Keys"]["taskId"]["S"] = "order-1".into();
    assert!(
        !s.filters
            .iter()
            .any(|f| crate::filter::matches(f, &task_modify))
    );
}

/// A wake-up that process's reserved concurrency throttles is retried
/// by Lambda for at most a minute and then dropped, never sent to the
/// dead-letter queue (where it would look like a failure and hide real
/// ones); trigger's failures still go there.
#[test]
fn throttled_wakeups_are_dropped_after_a_minute_not_dead_lettered() {
    let t = Template::workspace().unwrap();
    assert_eq!(
        t.async_config("ProcessFunction").unwrap(),
        crate::invoke::AsyncConfig {
            reserved: Some(1),
            max_event_age: Duration::from_secs(60),
            max_retries: 0,
            on_failure: false,
        }
    );
    let trigger = t.async_config("TriggerFunction").unwrap();
    assert!(trigger.on_failure && trigger.reserved.is_none());
    assert_eq!(
        t.schedule_rate("TriggerFunction", "Sweep").unwrap(),
        Duration::from_secs(60)
    );
}

/// Lambda's START and REPORT lines (duration, memory, init) stay: no
/// function sets SystemLogLevel above INFO. create wakes the processor
/// itself, so it may publish to the process topic, and the stream's
/// filter skips the inserts it announced.
#[test]
fn system_logs_stay_and_create_announces_its_tasks() {
    let t = Template::workspace().unwrap();
    let globals = t.doc["Globals"]["Function"]["LoggingConfig"]["SystemLogLevel"].clone();
    assert_eq!(globals, "INFO");
    for (name, r) in t.doc["Resources"].as_object().unwrap() {
        if let Some(level) = r.pointer("/Properties/LoggingConfig/SystemLogLevel") {
            assert_eq!(level, "INFO", "{name}");
        }
    }
    let create = t.resource("CreateFunction").unwrap();
    assert_eq!(
        create["Properties"]["Environment"]["Variables"]["PROCESS_TOPIC_ARN"],
        serde_json::json!({"!Ref": "ProcessTopic"})
    );
    assert!(
        t.function_permissions("CreateFunction")
            .unwrap()
            .contains(&("sns:Publish".to_owned(), "!Ref ProcessTopic".to_owned()))
    );
    let s = t.stream_source(crate::stack::TRIGGER_STREAM).unwrap();
    assert_eq!((s.batch_size, s.batching_window_seconds), (10, 1));
    let insert = serde_json::json!({"eventName": "INSERT", "dynamodb": {"NewImage": {
            "claimableAt": {"N": "1"}}}});
    let mut announced = insert.clone();
    announced["dynamodb"]["NewImage"]["announced"] = serde_json::json!({"BOOL": true});
    let passes = |r: &Value| s.filters.iter().any(|f| crate::filter::matches(f, r));
    assert!(passes(&insert), "a direct write wakes the trigger");
    assert!(!passes(&announced), "create's own tasks do not");
}

/// SNS active tracing reaches X-Ray only through a resource policy that
/// CloudFormation does not create by itself: one for sns.amazonaws.com,
/// this account, and (by default) these two topics and nothing else. AWS
/// allows 5 such policies an account, so `SnsTracingPolicyScope` makes it
/// one account-wide policy of a fixed name, or none (issue 32, item 5).
#[test]
fn sns_may_send_trace_segments_for_our_topics_only_and_the_policy_is_optional() {
    let t = Template::workspace().unwrap();
    let r = &t.doc["Resources"]["SnsTracingPolicy"];
    assert_eq!(r["Type"], "AWS::XRay::ResourcePolicy");
    assert_eq!(r["Condition"], "HasSnsTracingPolicy");
    assert_eq!(
        t.doc["Conditions"]["HasSnsTracingPolicy"],
        serde_json::json!({"!Not": [{"!Equals": [{"!Ref": "SnsTracingPolicyScope"}, "none"]}]})
    );
    assert_eq!(
        t.doc["Parameters"]["SnsTracingPolicyScope"]["AllowedValues"],
        serde_json::json!(["stack", "account", "none"])
    );
    assert_eq!(
        t.parameter_default("SnsTracingPolicyScope").unwrap(),
        "stack"
    );
    let choice = r["Properties"]["PolicyDocument"]["!If"].as_array().unwrap();
    assert_eq!(choice[0], "SnsTracingPolicyForAccount");
    assert_eq!(
        r["Properties"]["PolicyName"]["!If"][1], "lifo-sns-active-tracing",
        "one name for the account-wide policy"
    );
    let statement = |branch: &serde_json::Value| {
        let text = branch["!Sub"].as_str().unwrap();
        let doc: serde_json::Value = serde_json::from_str(
            &text
                .replace("${AWS::AccountId}", "123456789012")
                .replace("${AWS::Partition}", "aws")
                .replace("${ProcessTopic}", "arn:p")
                .replace("${TriggerTopic}", "arn:t"),
        )
        .unwrap();
        let statements = doc["Statement"].as_array().unwrap().clone();
        assert_eq!(statements.len(), 1);
        let st = statements[0].clone();
        assert_eq!(
            st["Principal"],
            serde_json::json!({"Service": "sns.amazonaws.com"})
        );
        assert_eq!(
            st["Condition"]["StringEquals"]["aws:SourceAccount"],
            "123456789012"
        );
        assert!(
            st["Action"]
                .as_array()
                .unwrap()
                .iter()
                .all(|a| a.as_str().unwrap().starts_with("xray:"))
        );
        st
    };
    assert_eq!(
        statement(&choice[2])["Condition"]["ArnLike"]["aws:SourceArn"],
        serde_json::json!(["arn:p", "arn:t"])
    );
    assert_eq!(
        statement(&choice[1])["Condition"]["ArnLike"]["aws:SourceArn"],
        "arn:aws:sns:*:123456789012:*"
    );
}

/// The bounds the functions and the `lifo` command check settings against
/// (`lifo_lambda::config::bounds`) are the template's own.
#[test]
fn the_shared_bounds_are_the_templates() {
    use lifo_lambda::config::bounds;
    let t = Template::workspace().unwrap();
    let wide = |r: std::ops::RangeInclusive<u32>| u64::from(*r.start())..=u64::from(*r.end());
    for (name, range) in [
        ("ShardCount", wide(bounds::SHARD_COUNT)),
        ("ProcessorCount", wide(bounds::PROCESSOR_COUNT)),
        ("MaxTaskTtlSeconds", bounds::MAX_TTL_SECONDS),
        ("TaskTtlSeconds", bounds::TASK_TTL_SECONDS),
        ("DueShardCount", wide(bounds::DUE_SHARD_COUNT)),
        ("CatchUpDays", wide(bounds::CATCH_UP_DAYS)),
        ("RetentionSeconds", bounds::RETENTION_SECONDS),
        ("RunnerLatencyMs", bounds::RUNNER_LATENCY_MS),
    ] {
        assert_eq!(t.parameter_range(name).unwrap(), range, "{name}");
    }
}
