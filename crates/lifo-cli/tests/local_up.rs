//! `lifo local up` run as a user runs it: started, used, stopped with
//! SIGTERM; killed with SIGKILL, leaving no server behind; restarted on the
//! same `--data-dir`, finishing what was queued.

mod common;
use common::*;

use std::process::Command;
use std::time::{Duration, Instant};

/// True while `pid` runs: a process killed and not yet reaped (a zombie,
/// state `Z`, which holds no port and runs nothing) does not count.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// The pid printed on a line like `DynamoDB Local  http://…  (pid 123)`.
fn pid_in(line: &str) -> Option<u32> {
    line.rsplit_once("(pid ")?
        .1
        .trim_end_matches(')')
        .parse()
        .ok()
}

#[test]
fn local_up_serves_until_sigterm_then_stops_its_servers() {
    let (mut child, rx, lines) = local_up(&["--scheduler-every", "2"], &[]);
    let pids: Vec<u32> = lines.iter().filter_map(|l| pid_in(l)).collect();
    assert_eq!(pids.len(), 2, "{lines:?}");
    assert!(pids.iter().all(|p| alive(*p)));
    let endpoint = endpoint_in(&lines);

    // The stack it printed is usable: a task written to its table is run
    // by its pipeline, and `lifo` reads it there.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = lifo_core::Store::new(
            aws_sdk_dynamodb::Client::new(&lifo_local::stack::sdk_config(&endpoint).await),
            "QueueTable",
        );
        // An empty payload: DynamoDB Local writes its stream record as a
        // bare `{}`, which the local stream client rewrites.
        let payload = serde_json::Map::new();
        let task = lifo_core::Task::new_pending(
            "from-outside".into(),
            payload,
            lifo_core::now_ms(),
            60,
            1,
        );
        // And one scheduled for yesterday, which only scheduler-start
        // makes claimable (here every 2 s).
        let yesterday = chrono::Utc::now().date_naive() - chrono::Duration::days(1);
        let due_epoch = yesterday
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc()
            .timestamp() as u64;
        let scheduled = lifo_core::Task::new_pending(
            "scheduled-yesterday".into(),
            serde_json::json!({"n": 2}).as_object().cloned().unwrap(),
            lifo_core::now_ms(),
            60,
            1,
        )
        .scheduled(
            yesterday.format("%Y-%m-%d").to_string(),
            due_epoch,
            50,
            7 * 86_400,
            3600,
            3600,
        );
        store.put_new(&[task, scheduled]).await.unwrap();
    });
    let get = |id: &str| {
        run_ok(Command::new(LIFO).args(["--endpoint-url", &endpoint, "tasks", "get", id]))
    };
    for id in ["from-outside", "scheduled-yesterday"] {
        let until = Instant::now() + Duration::from_secs(30);
        let mut shown = get(id);
        while !shown.contains("status      SUCCESS") && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(300));
            shown = get(id);
        }
        assert!(shown.contains("status      SUCCESS"), "{shown}");
    }

    let term = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(rest.iter().any(|l| l == "stopped"), "{rest:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        pids.iter().all(|p| !alive(*p)),
        "servers left running: {pids:?}"
    );
}

/// `n` tasks written straight to the table at `endpoint`, named by `id`.
async fn put_tasks(endpoint: &str, n: usize, id: impl Fn(usize) -> String) {
    let store = lifo_core::Store::new(
        aws_sdk_dynamodb::Client::new(&lifo_local::stack::sdk_config(endpoint).await),
        "QueueTable",
    );
    let tasks: Vec<lifo_core::Task> = (0..n)
        .map(|i| {
            lifo_core::Task::new_pending(
                id(i),
                serde_json::json!({"n": i}).as_object().cloned().unwrap(),
                lifo_core::now_ms(),
                3600,
                1,
            )
        })
        .collect();
    store.put_new(&tasks).await.unwrap();
}

/// The status of every task in the table at `endpoint`, by id.
async fn statuses(endpoint: &str) -> std::collections::HashMap<String, lifo_core::Task> {
    let ddb = aws_sdk_dynamodb::Client::new(&lifo_local::stack::sdk_config(endpoint).await);
    let mut tasks = std::collections::HashMap::new();
    let mut start = None;
    loop {
        let out = ddb
            .scan()
            .table_name("QueueTable")
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        for item in out.items.unwrap_or_default() {
            let t: lifo_core::Task = lifo_core::store::item::from_item(item).unwrap();
            tasks.insert(t.task_id.clone(), t);
        }
        start = out.last_evaluated_key;
        if start.is_none() {
            return tasks;
        }
    }
}

/// `kill -9` of `lifo local up` takes its servers with it (they die with
/// their parent), and a restart on the same `--data-dir` finds the queue as
/// it was: it serves the tasks still waiting, and claims again the ones the
/// killed run held once their lease ends.
#[test]
fn local_up_killed_with_sigkill_leaves_no_server_and_resumes_from_its_data_dir() {
    const TASKS: usize = 200;
    let dir = scratch("data-dir");
    let data = dir.join("ddb");
    let data = data.to_str().unwrap();
    // 200 tasks of 200 ms, 2 at a time: about 20 s of work; invocations of
    // 6 s, so a killed run's leases end within 8 s.
    let args = ["--data-dir", data, "--process-timeout", "6"];
    let envs = [
        ("RUNNER_LATENCY_MS", "200"),
        ("RUNNER_MAX_CONCURRENCY", "2"),
    ];
    let rt = tokio::runtime::Runtime::new().unwrap();

    let (mut first, _rx, lines) = local_up(&args, &envs);
    let pids: Vec<u32> = lines.iter().filter_map(|l| pid_in(l)).collect();
    assert_eq!(pids.len(), 2, "{lines:?}");
    let endpoint = endpoint_in(&lines);
    rt.block_on(async {
        put_tasks(&endpoint, TASKS, |i| format!("queued-{i:03}")).await;
        // Kill it mid-work: some done, most still queued.
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let done = statuses(&endpoint)
                .await
                .values()
                .filter(|t| t.task_status == lifo_core::TaskStatus::Success)
                .count();
            if done >= 10 {
                assert!(done < TASKS / 2, "too late to kill mid-work: {done} done");
                break;
            }
            assert!(Instant::now() < until, "no task ran");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let kill = Command::new("kill")
        .args(["-KILL", &first.0.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let _ = first.0.wait();
    let until = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        pids.iter().all(|p| !alive(*p)),
        "servers outlived a kill -9 of their parent: {pids:?}"
    );

    // Restart on the same data: every queued task ends SUCCESS.
    let (mut second, rx, lines) = local_up(&args, &envs);
    assert!(lines.iter().any(|l| l.contains("(kept in ")), "{lines:?}");
    let endpoint = endpoint_in(&lines);
    let pids: Vec<u32> = lines.iter().filter_map(|l| pid_in(l)).collect();
    let tasks = rt.block_on(async {
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            let tasks = statuses(&endpoint).await;
            let done = tasks
                .values()
                .filter(|t| t.task_status == lifo_core::TaskStatus::Success)
                .count();
            if done == TASKS || Instant::now() > until {
                return tasks;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    assert_eq!(tasks.len(), TASKS, "the table came back whole");
    let unfinished: Vec<String> = tasks
        .values()
        .filter(|t| t.task_status != lifo_core::TaskStatus::Success)
        .map(|t| format!("{} {}", t.task_id, t.task_status))
        .collect();
    assert!(
        unfinished.is_empty(),
        "not finished after restart: {unfinished:?}"
    );
    // What the killed run held was claimed again (a second attempt), and
    // nothing needed more.
    assert!(tasks.values().all(|t| t.attempts <= 2));

    let term = Command::new("kill")
        .args(["-TERM", &second.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert!(second.0.wait().unwrap().success());
    assert!(rx.try_iter().any(|l| l == "stopped"));
    let until = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(pids.iter().all(|p| !alive(*p)), "{pids:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM with tasks in flight (issue 32): `lifo local up` says what it
/// waits for, exits within 10 s (`docker stop`'s grace), stops its servers,
/// and leaves no task held: the runs it cut short are put back, so a
/// restart on the same `--data-dir` finds them claimable at once.
#[test]
fn local_up_exits_within_ten_seconds_of_sigterm_with_tasks_in_flight() {
    let dir = scratch("sigterm");
    let data = dir.join("ddb");
    let data = data.to_str().unwrap();
    // Runs of 60 s: nothing finishes on its own before the stop.
    let envs = [
        ("RUNNER_LATENCY_MS", "60000"),
        ("RUNNER_MAX_CONCURRENCY", "3"),
    ];
    let (mut child, rx, lines) = local_up(&["--data-dir", data], &envs);
    let pids: Vec<u32> = lines.iter().filter_map(|l| pid_in(l)).collect();
    let endpoint = endpoint_in(&lines);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        put_tasks(&endpoint, 5, |i| format!("long-{i}")).await;
        let until = Instant::now() + Duration::from_secs(60);
        while statuses(&endpoint)
            .await
            .values()
            .filter(|t| t.task_status == lifo_core::TaskStatus::Taken)
            .count()
            < 3
        {
            assert!(Instant::now() < until, "no task started");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let asked = Instant::now();
    let term = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = child.0.wait().unwrap();
    let took = asked.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(10),
        "exited {took:?} after SIGTERM"
    );
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(
        rest.iter()
            .any(|l| l.starts_with("stopping: no new invocations; waiting up to 5 s for")),
        "{rest:?}"
    );
    assert!(
        rest.iter()
            .any(|l| l.contains("put back 3 running task(s)")),
        "{rest:?}"
    );
    let until = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(pids.iter().all(|p| !alive(*p)), "servers left: {pids:?}");
    // Nothing held: the table on disk has no TAKEN task.
    rt.block_on(async {
        let stack = lifo_local::LocalStack::start_with(lifo_local::stack::StackOptions {
            data_dir: Some(dir.join("ddb")),
            ..Default::default()
        })
        .await
        .unwrap();
        let tasks = stack.scan_tasks().await.unwrap();
        assert_eq!(tasks.len(), 5);
        let held: Vec<&str> = tasks
            .iter()
            .filter(|t| t.task_status == lifo_core::TaskStatus::Taken)
            .map(|t| t.task_id.as_str())
            .collect();
        assert!(held.is_empty(), "held after the stop: {held:?}");
    });
    let _ = std::fs::remove_dir_all(&dir);
}
