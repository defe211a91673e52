//! What process writes to CloudWatch Logs: JSON lines and EMF metrics.

use super::*;

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn log_lines_are_json_with_the_documented_fields_and_metrics_are_valid_emf() {
    // A global subscriber (a thread-local one misses events whose callsite
    // interest another test thread cached first); lines of other tests may
    // interleave, so task lines are picked by this test's own task id.
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    let captured = CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let sink = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .json()
                .flatten_event(true)
                .with_writer(move || sink.clone())
                .finish();
            let _ = tracing::subscriber::set_global_default(subscriber);
            captured
        })
        .clone();

    let query = one_page(&[("log-test-task", 20)]);
    let (claim, finish) = updates();
    let sns = publish();
    let report = processor(&[&query, &claim, &finish], &sns, Duration::from_secs(10))
        .handle(&crate::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, 1);

    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let find = |name: &str| {
        lines
            .iter()
            .find(|l| {
                l["event"] == name && (l.get("taskId").is_none() || l["taskId"] == "log-test-task")
            })
            .unwrap_or_else(|| panic!("no {name} line in {text}"))
    };
    let claimed = find("task.claimed");
    for field in ["taskId", "shard", "attempt", "token", "ageMs"] {
        assert!(
            claimed.get(field).is_some(),
            "task.claimed lacks {field}: {claimed}"
        );
    }
    let finished = find("task.finished");
    for field in ["taskId", "fromStatus", "toStatus", "attempt", "token"] {
        assert!(
            finished.get(field).is_some(),
            "task.finished lacks {field}: {finished}"
        );
    }
    assert_eq!(finished["toStatus"], "SUCCESS");
    let end = find("process.end");
    for field in [
        "claimed",
        "succeeded",
        "conflicts",
        "staleRejected",
        "tailCall",
        "elapsedMs",
    ] {
        assert!(end.get(field).is_some(), "process.end lacks {field}: {end}");
    }
    assert!(
        !text.contains("payload"),
        "payloads are never logged at info"
    );

    let emf = report.metrics().to_emf("LifoQueue", "stack", 1);
    let directive = &emf["_aws"]["CloudWatchMetrics"][0];
    let names: Vec<&str> = directive["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    for name in [
        "TasksClaimed",
        "TasksSucceeded",
        "TasksFailed",
        "TasksRetried",
        "TasksRetriedLater",
        "ClaimConflicts",
        "StaleFinishRejected",
        "TailCalls",
        "AgeAtStartMs",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
        assert!(emf.get(name).is_some(), "{name} has no value");
    }
    assert_eq!(emf["TasksSucceeded"], 1.0);
}

/// The fair share's starts go out as two sums, for the dashboard to divide
/// (an average of each invocation's share would weigh a short one like a
/// long one), and the settings clamped as a count.
#[test]
fn the_flooding_share_is_two_counts_and_clamps_are_counted() {
    let report = crate::ProcessReport {
        fairness: Some(crate::select::fair::Fairness {
            starts: 8,
            flooding_starts: 3,
            quiet_oldest_age_ms: Some(120),
        }),
        settings_clamped: 2,
        ..crate::ProcessReport::default()
    };
    let emf = report.metrics().to_emf("LifoQueue", "stack", 1);
    assert_eq!(emf["TenantStarts"], 8.0);
    assert_eq!(emf["FloodingTenantStarts"], 3.0);
    assert_eq!(emf["SettingsClamped"], 2.0);
    assert!(emf.get("FloodingTenantsShareOfStarts").is_none(), "{emf}");
}

/// The downstream as the runs saw it: the limit the invocation ended with
/// and each run's latency; an invocation that ran nothing sends neither.
#[test]
fn the_downstreams_limit_and_latency_are_metrics_when_something_ran() {
    let report = crate::ProcessReport {
        downstream_limit: 4,
        runs_refused: 1,
        downstream_latencies_ms: vec![120, 80],
        ..crate::ProcessReport::default()
    };
    let emf = report.metrics().to_emf("LifoQueue", "stack", 1);
    assert_eq!(emf["DownstreamLimit"], 4.0);
    assert_eq!(emf["DownstreamLatencyMs"], serde_json::json!([120.0, 80.0]));
    assert_eq!(emf["RunsRefused"], 1.0);
    let idle = crate::ProcessReport {
        downstream_limit: 4,
        ..crate::ProcessReport::default()
    };
    let emf = idle.metrics().to_emf("LifoQueue", "stack", 1);
    assert!(emf.get("DownstreamLimit").is_none(), "{emf}");
    assert!(emf.get("DownstreamLatencyMs").is_none(), "{emf}");
}
