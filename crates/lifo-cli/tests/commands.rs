//! The `lifo` binary's local-stack commands, run as a user runs them:
//! `simulate --compare` (a short overload) and `local up` (started, used,
//! stopped with SIGTERM, leaving no server behind).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIFO: &str = env!("CARGO_BIN_EXE_lifo");

/// Runs `lifo` to success and returns its stdout.
fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lifo-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn simulate_compare_runs_both_orders_on_the_same_arrivals_and_plots_them() {
    let dir = scratch("simulate");
    let svg = dir.join("age.svg");
    let stdout = run_ok(
        Command::new(LIFO)
            .args([
                "--json",
                "--shards",
                "2",
                "simulate",
                "--compare",
                "--rate",
                "20",
                "--duration",
                "6",
                "--ttl",
                "3",
                "--capacity",
                "5",
                "--latency-ms",
                "500",
                "--budget",
                "3",
                "--plot",
            ])
            .arg(&svg),
    );
    let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["order"].as_str(), rows[1]["order"].as_str()),
        (Some("lifo"), Some("fifo"))
    );
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap();
    assert_eq!(
        n(&rows[0], "created"),
        n(&rows[1], "created"),
        "same arrivals"
    );
    // 6 s at 20/s: about 120 arrivals.
    assert!((70..=170).contains(&n(&rows[0], "created")));
    for r in rows {
        assert!(n(r, "processed") > 0, "{r}");
        assert!(n(r, "shedByExpiry") > 0, "2× overload sheds: {r}");
        assert_eq!(
            n(r, "processed") + n(r, "shedByExpiry") + n(r, "failed"),
            n(r, "created"),
            "every task is run or shed: {r}"
        );
        // put 2 + claim 2 + finish 2; all writes / successes adds the puts
        // of the shed tasks.
        assert_eq!(r["writeUnitsPerSuccessfulTask"].as_f64(), Some(6.0), "{r}");
        assert!(r["writeUnitsPerSuccess"].as_f64().unwrap() > 6.0, "{r}");
        assert!(r["snsPublishesPerTask"].as_f64().unwrap() > 0.0, "{r}");
    }
    let p95 = |r: &serde_json::Value| r["ageAtStartMs"]["p95"].as_u64().unwrap();
    assert!(
        p95(&rows[0]) < p95(&rows[1]),
        "LIFO is fresher than FIFO under overload: {} vs {} ms",
        p95(&rows[0]),
        p95(&rows[1])
    );
    // Starts that skipped a newer waiting task: almost none for LIFO (the
    // check allows 250 ms for a write to become visible, which a loaded
    // machine can exceed), most for FIFO.
    let inversions =
        |r: &serde_json::Value| n(r, "lifoInversions") as f64 / n(r, "processed") as f64;
    assert!(inversions(&rows[0]) <= 0.05, "{}", rows[0]);
    assert!(inversions(&rows[1]) >= 0.5, "{}", rows[1]);
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.contains("<svg") && svg_text.contains("LIFO") && svg_text.contains("FIFO"));
    let png = std::fs::read(svg.with_extension("png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_workload_that_cannot_run_is_one_line_naming_the_flag() {
    let out = Command::new(LIFO)
        .args(["simulate", "--rate", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: --rate must be in (0, 500], got 0"
    );
    let out = Command::new(LIFO)
        .args(["bench", "--only", "sizes", "--minutes", "NaN"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: --minutes must be in (0, 1440], got NaN"
    );
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The pid printed on a line like `DynamoDB Local  http://…  (pid 123)`.
fn pid_in(line: &str) -> Option<u32> {
    line.rsplit_once("(pid ")?
        .1
        .trim_end_matches(')')
        .parse()
        .ok()
}

/// A child process that gets SIGTERM (and is waited for) if the test
/// panics first, so that it stops the servers it started.
struct Terminate(std::process::Child);

impl Drop for Terminate {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn local_up_serves_until_sigterm_then_stops_its_servers() {
    let mut child = Command::new(LIFO)
        .args(["local", "up", "--scheduler-every", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut child = Terminate(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    let started = Instant::now();
    while !lines.iter().any(|l: &String| l.starts_with("Ctrl-C stops")) {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => lines.push(line),
            Err(e) => panic!(
                "local up did not come up in {:?} ({e}): {lines:?}",
                started.elapsed()
            ),
        }
    }
    let pids: Vec<u32> = lines.iter().filter_map(|l| pid_in(l)).collect();
    assert_eq!(pids.len(), 2, "{lines:?}");
    assert!(pids.iter().all(|p| alive(*p)));
    let endpoint = lines
        .iter()
        .find_map(|l| l.strip_prefix("DynamoDB Local"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();

    // The stack it printed is usable: a task written to its table is run
    // by its pipeline, and `lifo` reads it there.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = lifo_core::Store::new(
            aws_sdk_dynamodb::Client::new(&lifo_local::stack::sdk_config(&endpoint).await),
            "QueueTable",
        );
        // (Not an empty payload: DynamoDB Local writes an empty map into
        // stream records as `{}`, which no SDK can parse.)
        let payload = serde_json::json!({"n": 1}).as_object().cloned().unwrap();
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

#[test]
fn bench_measures_every_part_and_says_how_to_reproduce_it() {
    // The debug binaries next to this `lifo` (scripts/test builds them
    // first); the figures are a debug build's, the table is the same.
    let bin_dir = std::path::Path::new(LIFO).parent().unwrap();
    for f in ["create", "trigger", "process", "scheduler-start"] {
        assert!(
            bin_dir.join(f).is_file(),
            "{f} is not built: run `cargo build --workspace --bins` first"
        );
    }
    let stdout = run_ok(
        Command::new(LIFO)
            .args([
                "--json",
                "bench",
                "--tasks",
                "60",
                "--starts",
                "1",
                "--minutes",
                "0.1",
                "--ttl",
                "3",
                "--bin-dir",
            ])
            .arg(bin_dir),
    );
    let bench: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let f = &bench["figures"];
    assert_eq!(f["writeUnitsPerSuccessfulTask"].as_f64(), Some(6.0), "{f}");
    assert!(f["process"]["tasks"].as_u64().unwrap() >= 60, "{f}");
    let rss = f["process"]["peakRssMb"].as_f64().unwrap();
    assert!(rss > 1.0 && rss < 1024.0, "{f}");
    assert!(f["process"]["cpuMsPerTask"].as_f64().unwrap() > 0.0, "{f}");
    for name in ["create", "trigger", "process", "scheduler-start"] {
        let ms = f["coldStartMedianMs"][name].as_f64().unwrap();
        assert!(ms > 0.0 && ms < 10_000.0, "{name}: {ms}");
        assert!(f["sizesBytes"][name].as_u64().unwrap() > 1_000_000);
    }
    let fresh = &f["freshness"];
    assert!(
        fresh["lifoP95Ms"].as_u64().unwrap() < fresh["fifoP95Ms"].as_u64().unwrap(),
        "{fresh}"
    );
    // Every row says how to reproduce it, with the settings it ran with.
    let rows = bench["rows"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        1 + 4 + 2 + 1 + 1,
        "sizes, 4 cold starts, CPU, RSS, write units, freshness"
    );
    for r in rows {
        let cmd = r["command"].as_str().unwrap();
        assert!(cmd.starts_with("lifo bench --only "), "{r}");
        assert!(
            cmd.ends_with(&format!("--bin-dir {}", bin_dir.display())),
            "{r}"
        );
    }
    assert!(rows.iter().any(|r| {
        r["command"]
            .as_str()
            .unwrap()
            .contains("--only freshness --minutes 0.1 --ttl 3")
    }));
}
