//! The measures that run the release Lambda binaries: CPU and memory of
//! process, cold starts, sizes.

use super::part::{BenchArgs, Binaries, FUNCTIONS, Line, Report};
use super::xray::{Daemon, judge};
use anyhow::Context as _;
use lifo_core::{Task, now_ms};
use lifo_local::LocalStack;
use lifo_local::runtime_api::{Answer, RuntimeApi, Usage, lambda_env, offline_function_env};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// CPU and memory of the process binary, then the same run with X-Ray
/// recording every invocation (sampled, a daemon on loopback): what
/// tracing costs per task.
pub(super) async fn process_cost(args: &BenchArgs, bins: &Binaries) -> anyhow::Result<Report> {
    let mut out = Report::default();
    let plain = process_run(args, bins, &mut out, false).await?;
    let traced = process_run(args, bins, &mut out, true).await?;
    let ratio = traced / plain;
    out.lines.push(Line {
        measure: "process binary: CPU per task with X-Ray subsegments against without".into(),
        result: format!("{ratio:.2}× ({traced:.3} ms against {plain:.3} ms)"),
        target: "≤ 1.10×".into(),
        met: Some(ratio <= 1.10),
        flags: format!(" --tasks {}", args.tasks),
    });
    out.figures.insert("xrayCpuRatio".into(), json!(ratio));
    Ok(out)
}

/// Runs the `process` binary against DynamoDB Local + moto until `tasks`
/// tasks succeeded (`traced`: every invocation sampled, subsegments to a
/// loopback daemon); CPU is counted from its first request for an event.
/// Adds its rows; the CPU per task, ms.
async fn process_run(
    args: &BenchArgs,
    bins: &Binaries,
    out: &mut Report,
    traced: bool,
) -> anyhow::Result<f64> {
    let binary = bins.path("process");
    let daemon = if traced { Some(Daemon::start()?) } else { None };
    let stack = LocalStack::start().await?;
    let store = stack.store();
    let now = now_ms();
    let tasks: Vec<Task> = (0..args.tasks)
        .map(|i| {
            let payload = json!({"n": i}).as_object().cloned().unwrap_or_default();
            Task::new_pending(lifo_core::new_task_id(), payload, now + i as u64, 3600, 1)
        })
        .collect();
    store.put_new(&tasks).await?;
    let concurrency = stack.template.parameter_default("RunnerMaxConcurrency")?;
    let header = if traced {
        lifo_local::runtime_api::SAMPLED
    } else {
        lifo_local::runtime_api::UNSAMPLED
    };
    let mut api = RuntimeApi::start_traced(Duration::from_secs(60), header).await?;
    let mut command = tokio::process::Command::new(&binary);
    if let Some(d) = &daemon {
        command.env("AWS_XRAY_DAEMON_ADDRESS", &d.address);
    }
    let mut child = command
        .envs(lambda_env(&api, "process"))
        .envs(stack.function_env())
        .envs([
            ("RUNNER", "simulated"),
            ("RUNNER_LATENCY_MS", "0"),
            ("RUNNER_MAX_CONCURRENCY", concurrency.as_str()),
            ("TIME_BUDGET_SECONDS", "50"),
        ])
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let pid = child.id().context("the process binary exited at once")?;
    let result = async {
        first_request(&mut api, &mut child, "process").await?;
        let init = Usage::of(pid)?;
        let event: Value =
            serde_json::from_str(include_str!("../../../../events/process-wakeup.json"))?;
        let started = Instant::now();
        let mut succeeded = 0u64;
        let mut invocations = 0;
        // Tasks each invocation claimed: what its trace was asked to hold.
        let mut claimed = Vec::new();
        while succeeded < args.tasks as u64 {
            invocations += 1;
            if invocations > 50 {
                return Err(anyhow::anyhow!(
                    "only {succeeded} tasks succeeded in 50 invocations"
                ));
            }
            match api.invoke(event.clone(), Duration::from_secs(90)).await? {
                Answer::Response(report) => {
                    succeeded += report["succeeded"].as_u64().unwrap_or(0);
                    claimed.push(report["claimed"].as_array().map_or(0, Vec::len));
                }
                other => return Err(anyhow::anyhow!("process failed: {other:?}")),
            }
        }
        let wall = started.elapsed();
        let end = Usage::of(pid)?;
        Ok::<_, anyhow::Error>((init, end, wall, succeeded, invocations, claimed))
    }
    .await;
    let _ = child.kill().await;
    let (init, end, wall, succeeded, invocations, claimed) = result?;
    let per_task = (end.cpu - init.cpu).as_secs_f64() * 1000.0 / succeeded as f64;
    let rss_mb = end.peak_rss_bytes as f64 / 1_048_576.0;
    // What the traces held, judged by what a trace may hold: a row of its
    // own, so the figures above stand whatever it finds.
    let judged = daemon.map(|d| {
        // Let the last datagrams land.
        std::thread::sleep(Duration::from_millis(300));
        let judged = judge(&d.documents(), &claimed);
        d.stop();
        judged
    });
    let segments = judged.as_ref().map_or(0, |j| j.documents);
    // Its row follows the traced run's CPU row.
    let mut judged_line = None;
    if let Some(j) = &judged {
        out.figures.insert(
            "xrayJudged".into(),
            json!({
                "documents": j.documents, "taskDocuments": j.task_documents,
                "subsegmentsDropped": j.dropped, "mostBytesPerInvocation": j.most_bytes,
                "faults": j.faults,
            }),
        );
        judged_line = Some(Line {
            measure: format!(
                "process binary, {succeeded} tasks, X-Ray: documents within each invocation's \
                 trace budget ({} KB), left out only once it is full",
                lifo_lambda::xray::TRACE_BUDGET / 1024
            ),
            result: if j.faults.is_empty() {
                format!(
                    "{} documents ({} of tasks), {} left out, at most {:.0} KB an invocation",
                    j.documents,
                    j.task_documents,
                    j.dropped,
                    j.most_bytes as f64 / 1024.0
                )
            } else {
                j.faults.join("; ")
            },
            target: "every invocation".into(),
            met: Some(j.faults.is_empty()),
            flags: format!(" --tasks {}", args.tasks),
        });
    }
    let (key, with) = if traced {
        ("processXray", ", X-Ray sampled")
    } else {
        ("process", "")
    };
    out.figures.insert(
        key.into(),
        json!({
            "tasks": succeeded, "invocations": invocations,
            "cpuMsPerTask": per_task, "initCpuMs": init.cpu.as_millis() as u64,
            "peakRssMb": rss_mb, "wallMs": wall.as_millis() as u64,
            "xrayDocuments": segments,
        }),
    );
    out.lines.push(Line {
        measure: format!(
            "process binary, {succeeded} tasks (runner latency 0, {concurrency} at a time{with}): CPU per task"
        ),
        result: format!(
            "{per_task:.3} ms ({:.0} ms CPU in init; {:.1} s wall, {invocations} invocations{})",
            init.cpu.as_secs_f64() * 1000.0,
            wall.as_secs_f64(),
            if traced { format!(", {segments} subsegments sent") } else { String::new() }
        ),
        target: "< 1 ms".into(),
        met: Some(per_task < 1.0),
        flags: format!(" --tasks {}", args.tasks),
    });
    out.lines.extend(judged_line);
    if !traced {
        out.lines.push(Line {
            measure: format!("process binary, {succeeded} tasks: peak RSS"),
            result: format!("{rss_mb:.1} MB"),
            target: "< 64 MB".into(),
            met: Some(rss_mb < 64.0),
            flags: format!(" --tasks {}", args.tasks),
        });
    }
    Ok(per_task)
}

/// Exec to first `next` request, once.
async fn cold_start_once(
    binary: &Path,
    name: &str,
    extra_env: &[(&str, &str)],
) -> anyhow::Result<Duration> {
    let mut api = RuntimeApi::start(Duration::from_secs(30)).await?;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(binary)
        .envs(lambda_env(&api, name))
        .envs(offline_function_env())
        .envs(extra_env.iter().copied())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let first = first_request(&mut api, &mut child, name).await;
    let _ = child.kill().await;
    first.map(|at| at.duration_since(started))
}

/// When the function first asked for an event; an error naming why not
/// (it exited, reported an init error, or stayed silent for 10 s).
async fn first_request(
    api: &mut RuntimeApi,
    child: &mut tokio::process::Child,
    name: &str,
) -> anyhow::Result<Instant> {
    tokio::select! {
        first = api.first_request(Duration::from_secs(10)) => match first {
            Ok(Some(at)) => Ok(at),
            Ok(None) => Err(anyhow::anyhow!("{name} never asked for an event")),
            Err(init) => Err(anyhow::anyhow!("{name} failed to start: {init}")),
        },
        status = child.wait() => Err(match status {
            Ok(s) => anyhow::anyhow!("{name} exited before asking for an event ({s})"),
            Err(e) => anyhow::Error::new(e).context(name.to_owned()),
        }),
    }
}

pub(super) async fn cold_starts(args: &BenchArgs, bins: &Binaries) -> anyhow::Result<Report> {
    let mut out = Report::default();
    let mut figures = serde_json::Map::new();
    // Each function as deployed, then process with an X-Ray daemon
    // configured (its tracer binds a UDP socket at init).
    let daemon = Daemon::start()?;
    let xray_env = [("AWS_XRAY_DAEMON_ADDRESS", daemon.address.as_str())];
    let runs = FUNCTIONS.iter().map(|f| (*f, *f, &[][..])).chain([(
        "process",
        "process (X-Ray daemon set)",
        &xray_env[..],
    )]);
    for (name, label, env) in runs {
        let binary = bins.path(name);
        let mut times = Vec::new();
        for _ in 0..args.starts.max(1) {
            times.push(cold_start_once(&binary, name, env).await?);
        }
        times.sort_unstable();
        let median = times[times.len() / 2];
        let max = times[times.len() - 1];
        figures.insert(label.into(), json!(median.as_secs_f64() * 1000.0));
        out.lines.push(Line {
            measure: format!("Cold start of {label} (exec → first request for an event)"),
            result: format!(
                "{:.1} ms median, {:.1} ms max of {}",
                median.as_secs_f64() * 1000.0,
                max.as_secs_f64() * 1000.0,
                times.len()
            ),
            target: "< 50 ms".into(),
            met: Some(median < Duration::from_millis(50)),
            flags: format!(" --starts {}", args.starts),
        });
    }
    out.figures
        .insert("coldStartMedianMs".into(), Value::Object(figures));
    Ok(out)
}

pub(super) fn sizes(args: &BenchArgs, bins: &Binaries) -> anyhow::Result<Report> {
    let mut out = Report::default();
    let mut figures = serde_json::Map::new();
    let mut parts = Vec::new();
    for name in FUNCTIONS {
        let binary = bins.path(name);
        let bytes = std::fs::metadata(&binary)
            .with_context(|| format!("{}", binary.display()))?
            .len();
        figures.insert(name.into(), json!(bytes));
        parts.push(format!("{name} {:.1} MB", bytes as f64 / 1_048_576.0));
    }
    out.figures
        .insert("sizesBytes".into(), Value::Object(figures));
    out.lines.push(Line {
        measure: format!("Binary sizes ({})", args.bin_dir.display()),
        result: parts.join(", "),
        target: "-".into(),
        met: None,
        flags: String::new(),
    });
    Ok(out)
}
