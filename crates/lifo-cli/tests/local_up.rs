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
    servers_gone(&pids);
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
    servers_gone(&pids);

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
    servers_gone(&pids);
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
        held_by_an_earlier_run(&endpoint).await;
        let until = Instant::now() + Duration::from_secs(60);
        while statuses(&endpoint)
            .await
            .values()
            .filter(|t| t.task_status == lifo_core::TaskStatus::Taken)
            .count()
            < 4
        {
            assert!(Instant::now() < until, "no task started");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let (_, _, rest) = sigterm(&mut child, &rx);
    assert!(
        rest.iter().any(|l| l.starts_with(
            "stopping: claiming nothing more; waiting up to 5 s for 3 running task(s)"
        )),
        "{rest:?}"
    );
    assert!(
        rest.iter()
            .any(|l| l.contains("put back 3 running task(s), their attempt given back")),
        "{rest:?}"
    );
    assert!(
        rest.iter()
            .any(|l| l == "of the 3 running, 0 finished and 3 were put back"),
        "{rest:?}"
    );
    servers_gone(&pids);
    // Nothing of this run's held: the table on disk has no TAKEN task but
    // the earlier run's (its lease ends by itself), and the three put back
    // cost no attempt (issue 51: the history showed PENDING "lifo local up
    // stopped…", then TAKEN attempt 2).
    let tasks = kept_in(&rt, &dir.join("ddb"));
    assert_eq!(tasks.len(), 6);
    assert_eq!(put_back_unheld(&tasks, &["earlier"]), 3, "{tasks:?}");
}

/// Sends SIGTERM to `lifo local up` (from here: no `kill` process in
/// between) and checks it exits successfully within 10 s (`docker stop`'s
/// grace): when the signal was sent by (epoch ms), how long the exit took,
/// and the lines it printed since `rx` was last read.
fn sigterm(
    child: &mut Terminate,
    rx: &std::sync::mpsc::Receiver<String>,
) -> (u64, Duration, Vec<String>) {
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) }, 0);
    let signalled = lifo_core::now_ms();
    let asked = Instant::now();
    let status = child.0.wait().unwrap();
    let took = asked.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(10),
        "exited {took:?} after SIGTERM"
    );
    (signalled, took, rx.try_iter().collect())
}

/// Waits up to 10 s for the servers `pids` to end, and fails if one runs.
fn servers_gone(pids: &[u32]) {
    let until = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(pids.iter().all(|p| !alive(*p)), "servers left: {pids:?}");
}

/// The tasks a stopped `lifo local up` left in its `--data-dir`.
fn kept_in(rt: &tokio::runtime::Runtime, data: &std::path::Path) -> Vec<lifo_core::Task> {
    rt.block_on(async {
        let stack = lifo_local::LocalStack::start_with(lifo_local::stack::StackOptions {
            data_dir: Some(data.to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
        stack.scan_tasks().await.unwrap()
    })
}

/// Checks that no task of `tasks` is held (TAKEN) but `earlier` (an
/// earlier run's), and that each one the stop put back is PENDING with its
/// attempt given back; how many it put back.
fn put_back_unheld(tasks: &[lifo_core::Task], earlier: &[&str]) -> usize {
    let held: Vec<&str> = tasks
        .iter()
        .filter(|t| t.task_status == lifo_core::TaskStatus::Taken)
        .map(|t| t.task_id.as_str())
        .collect();
    assert_eq!(held, earlier, "held after the stop");
    let put_back: Vec<&lifo_core::Task> = tasks
        .iter()
        .filter(|t| put_back_entry(t).is_some())
        .collect();
    for t in &put_back {
        assert_eq!(
            (t.task_status, t.attempts),
            (lifo_core::TaskStatus::Pending, 0),
            "{t:?}"
        );
        assert_eq!(put_back_entry(t).map(|e| e.attempt), Some(0), "{t:?}");
    }
    put_back.len()
}

/// A task an earlier, killed run holds (TAKEN a minute ago, its lease live
/// for 10 minutes more): a stop leaves it to its lease, since it was not
/// among the runs this `lifo local up` cut short.
async fn held_by_an_earlier_run(endpoint: &str) {
    let store = lifo_core::Store::new(
        aws_sdk_dynamodb::Client::new(&lifo_local::stack::sdk_config(endpoint).await),
        "QueueTable",
    );
    let now = lifo_core::now_ms();
    let mut t = lifo_core::Task::new_pending(
        "earlier".into(),
        serde_json::Map::new(),
        now - 120_000,
        3600,
        1,
    );
    t.task_status = lifo_core::TaskStatus::Taken;
    t.lease_until = Some(now + 600_000);
    t.claimed_by = Some("process-an-earlier-run".into());
    (t.attempts, t.token) = (1, 1);
    t.history.push(lifo_core::HistoryEntry {
        status: lifo_core::TaskStatus::Taken,
        at: now - 60_000,
        attempt: 1,
        token: 1,
        reason: None,
    });
    store.put_new(&[t]).await.unwrap();
}

/// The history entry of a task `lifo local up` put back when it stopped.
fn put_back_entry(t: &lifo_core::Task) -> Option<&lifo_core::HistoryEntry> {
    t.history.iter().find(|e| {
        e.status == lifo_core::TaskStatus::Pending
            && e.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("lifo local up stopped"))
    })
}

/// A number printed before `after` in `line` (`… for 3 running task(s)`).
fn number_before(line: &str, after: &str) -> usize {
    line.split(after)
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {after:?} in {line:?}"))
}

/// A graceful stop (issue 51): 60 tasks of 1 s, three at a time, and
/// SIGTERM mid-run. No claim follows the signal (15 did, within the grace);
/// what runs finishes within the grace, or is put back with its attempt
/// given back; the process exits within 10 s; the counts it prints are the
/// table's. Started without AWS_REGION: nothing on stderr before the
/// banner (three IMDS warnings of several kilobytes each were).
#[test]
fn a_graceful_stop_claims_nothing_more_and_lets_what_runs_finish() {
    let dir = scratch("graceful");
    let data = dir.join("ddb");
    let mut cmd = Command::new(lifo_bin());
    cmd.env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .env_remove("RUST_LOG")
        .env("RUNNER_LATENCY_MS", "1000")
        .env("RUNNER_MAX_CONCURRENCY", "3")
        .stderr(std::process::Stdio::piped());
    let (mut child, rx, lines) = local_up_as(cmd, &["--data-dir", data.to_str().unwrap()]);
    let stderr = child.0.stderr.take().unwrap();
    let noise = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    assert!(
        lines.iter().any(
            |l| l == "region          us-east-1 (the local stack's own; AWS_REGION is not set)"
        ),
        "{lines:?}"
    );
    let pids: Vec<u32> = lines.iter().filter_map(|l| pid_in(l)).collect();
    let endpoint = endpoint_in(&lines);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        put_tasks(&endpoint, 60, |i| format!("second-{i:02}")).await;
        // Mid-run: a few done, three running, most waiting.
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let tasks = statuses(&endpoint).await;
            let count = |s| tasks.values().filter(|t| t.task_status == s).count();
            if count(lifo_core::TaskStatus::Success) >= 4
                && count(lifo_core::TaskStatus::Taken) >= 2
            {
                break;
            }
            assert!(Instant::now() < until, "no task ran");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let (signalled, took, rest) = sigterm(&mut child, &rx);
    let stopping = rest
        .iter()
        .find(|l| l.starts_with("stopping: claiming nothing more; waiting up to 5 s for "))
        .unwrap_or_else(|| panic!("{rest:?}"));
    let running = number_before(stopping, " running task(s)");
    let counts = rest
        .iter()
        .find(|l| l.starts_with("of the "))
        .unwrap_or_else(|| panic!("{rest:?}"));
    let finished = number_before(counts, " finished");
    let printed_put_back = number_before(counts, " were put back");
    assert!((1..=3).contains(&running), "three slots: {rest:?}");
    assert_eq!(running, finished + printed_put_back, "{rest:?}");
    let stderr = noise.join().unwrap();
    assert!(
        stderr.iter().all(|l| !l.contains("WARN")),
        "nothing on stderr but errors: {stderr:#?}"
    );
    servers_gone(&pids);
    let tasks = kept_in(&rt, &data);
    assert_eq!(tasks.len(), 60);
    // No claim after the signal.
    let late: Vec<String> = tasks
        .iter()
        .flat_map(|t| {
            t.history
                .iter()
                .filter(|e| e.status == lifo_core::TaskStatus::Taken && e.at > signalled)
                .map(move |e| format!("{} at +{} ms", t.task_id, e.at - signalled))
        })
        .collect();
    assert!(late.is_empty(), "claimed after the signal: {late:?}");
    // Every task that was running finished, or was put back with its
    // attempt given back; none is left held.
    assert_eq!(put_back_unheld(&tasks, &[]), printed_put_back, "{rest:?}");
    // What ran when the signal came: claimed before it, ended after it.
    let ran_across = tasks
        .iter()
        .filter(|t| {
            t.history.iter().enumerate().any(|(i, e)| {
                e.status == lifo_core::TaskStatus::Taken
                    && e.at <= signalled
                    && t.history.get(i + 1).is_none_or(|next| next.at >= signalled)
            })
        })
        .count();
    assert!(ran_across <= 3, "{ran_across} ran across the signal");
    println!(
        "graceful stop: {running} running at the signal ({ran_across} by the table), \
         {finished} finished, {printed_put_back} put back; exit {took:?} after SIGTERM; \
         {} SUCCESS, {} PENDING",
        tasks
            .iter()
            .filter(|t| t.task_status == lifo_core::TaskStatus::Success)
            .count(),
        tasks
            .iter()
            .filter(|t| t.task_status == lifo_core::TaskStatus::Pending)
            .count()
    );
}

/// `lifo local up --template FILE` (issue 51: the template's path was fixed
/// when `lifo` was built): the stack runs under the copy's policies. A copy
/// whose ProcessFunction may not UpdateItem has every claim refused, as AWS
/// would refuse it.
#[test]
fn local_up_builds_its_stack_from_the_template_it_is_given() {
    let dir = scratch("template");
    let template = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../template.yaml"),
    )
    .unwrap();
    let process = template.find("\n  ProcessFunction:\n").unwrap();
    let grant = process
        + template[process..]
            .find("Action: dynamodb:UpdateItem\n")
            .unwrap();
    let copy = format!(
        "{}Action: dynamodb:DescribeTable\n{}",
        &template[..grant],
        &template[grant + "Action: dynamodb:UpdateItem\n".len()..]
    );
    let file = dir.join("no-claims.yaml");
    std::fs::write(&file, copy).unwrap();
    let mut cmd = Command::new(lifo_bin());
    cmd.env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped());
    let (mut child, rx, lines) = local_up_as(cmd, &["--template", file.to_str().unwrap()]);
    assert!(
        lines
            .iter()
            .any(|l| l == &format!("template        {}", file.display())),
        "{lines:?}"
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, refusals) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let endpoint = endpoint_in(&lines);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(put_tasks(&endpoint, 1, |_| "unclaimable".to_owned()));
    let until = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        match refusals.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(l) if l.contains("IAM as deployed: refused") => break l,
            Ok(_) => {}
            Err(e) => panic!("no claim refused in 30 s ({e})"),
        }
    };
    assert!(
        refused.contains("ProcessFunction") && refused.contains("dynamodb:UpdateItem"),
        "{refused}"
    );
    let statuses = rt.block_on(statuses(&endpoint));
    assert_eq!(
        statuses["unclaimable"].task_status,
        lifo_core::TaskStatus::Pending
    );
    let (_, _, rest) = sigterm(&mut child, &rx);
    assert!(rest.iter().any(|l| l == "stopped"), "{rest:?}");
}
