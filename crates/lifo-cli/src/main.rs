//! `lifo`: see `lifo --help`.

use clap::Parser;
use lifo_cli::cli::{Cli, Command, LocalCommand, run};
use lifo_cli::connect::connect;
use lifo_cli::error::{CliError, once};
use lifo_cli::terminal::shown;
use std::time::Duration;

/// The default log filter (`RUST_LOG` replaces it).
const QUIET_SDK: &str =
    "warn,aws_smithy_http_client=error,aws_smithy_runtime=error,aws_config=error";

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            // The SDK's own warnings (a Hyper parse error, IMDS unreachable)
            // only repeat what the command's one error line says.
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| QUIET_SDK.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return refuse(e),
    };
    let conn = cli.connection();
    // What failed, as the one line to print.
    let result: Result<Option<String>, String> = match &cli.command {
        Command::Local(LocalCommand::Up {
            scheduler_every,
            data_dir,
            process_timeout,
            pacing,
            order,
            ui,
            ui_listen,
            api,
            api_listen,
            api_auth,
            template,
            contention_rate,
            index_lag,
        }) => lifo_cli::local::up(lifo_cli::local::UpOptions {
            ui: ui.then_some(*ui_listen),
            api: api.then_some((*api_listen, *api_auth)),
            shards: cli.shards,
            scheduler_every: Duration::from_secs(*scheduler_every),
            data_dir: data_dir.clone(),
            process_timeout: process_timeout.map(Duration::from_secs),
            rate_limit: pacing.rate_limit(),
            retry_backoff: Duration::from_secs(pacing.retry_backoff),
            tenant_max_in_flight: pacing.tenant_max_in_flight(),
            order: *order,
            template: template.clone(),
            contention_rate: *contention_rate,
            index_lag: *index_lag,
        })
        .await
        .map(|()| None)
        .map_err(|e| once(&*e)),
        Command::Local(LocalCommand::Invoke {
            function,
            event,
            bin_dir,
            template,
        }) => lifo_cli::local::invoke(*function, event, bin_dir, template.as_deref())
            .await
            .map(Some)
            .map_err(|e| once(&*e)),
        Command::Simulate(args) => {
            tokio::select! {
                r = lifo_lab::simulate_command::command(args, cli.shards, cli.json) => r.map(Some).map_err(|e| once(&*e)),
                _ = lifo_local::interrupted() => Err("interrupted; the local servers are stopped".to_owned()),
            }
        }
        // Virtual time, on threads of its own: no servers to stop.
        Command::Plan(args) => lifo_lab::plan::command(args, cli.json)
            .map(Some)
            .map_err(|e| once(&*e)),
        Command::Bench(args) => {
            tokio::select! {
                r = lifo_lab::bench::command(args, cli.json) => r.map(Some).map_err(|e| once(&*e)),
                _ = lifo_local::interrupted() => Err("interrupted; the local servers are stopped".to_owned()),
            }
        }
        Command::Ui(args) => match connect(&conn).await {
            Ok(queue) => serve_console(&cli, queue, args).await.map(|()| None),
            Err(e) => Err(e.line(&conn.dynamodb(), &cli.table)),
        },
        _ => match connect(&conn).await {
            Ok(queue) => run(&cli, &queue)
                .await
                .map(Some)
                .map_err(|e| e.line(&conn.dynamodb(), queue.store.table())),
            Err(e) => Err(e.line(&conn.dynamodb(), &cli.table)),
        },
    };
    match result {
        Ok(out) => match out.map_or(Ok(()), |out| print(&out)) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: writing the output: {e}");
                std::process::ExitCode::FAILURE
            }
        },
        Err(line) => {
            // What failed, then each cause once, on one line: escaped, since
            // it may quote what a task holds.
            eprintln!("error: {}", shown(&line));
            std::process::ExitCode::FAILURE
        }
    }
}

/// A command line clap refuses. A value out of its range, or that does not
/// parse, is one line naming the flag and what it takes ("error: invalid
/// value '0' for '--shards <SHARDS>': 0 is not in 1..=100"); the rest
/// (help, version, usage errors) as clap prints them.
fn refuse(e: clap::Error) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::ValueValidation | ErrorKind::InvalidValue => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("error: invalid value");
            eprintln!("{}", shown(first));
            std::process::ExitCode::from(2)
        }
        _ => e.exit(),
    }
}

/// Writes the command's output. A reader that closed the pipe early
/// (`lifo tasks get ID | head -1`) has all it wanted: that is success, as
/// for `ls | head` (Rust ignores SIGPIPE, so `println!` would panic).
fn print(out: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{out}").and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// `lifo ui`: serves until Ctrl-C, once the queue answered one read (an
/// endpoint that cannot be reached fails the command, not every page).
async fn serve_console(
    cli: &Cli,
    queue: lifo_ops::Queue,
    args: &lifo_cli::ui::console::UiArgs,
) -> Result<(), String> {
    let conn = cli.connection();
    if let Err(e) = queue.store.control(false).await {
        return Err(CliError::from(e).line(&conn.dynamodb(), queue.store.table()));
    }
    let freshness = lifo_cli::ui::console::source(&conn).await;
    let console = lifo_cli::ui::start(queue, args, freshness)
        .await
        .map_err(|e| once(&*e))?;
    println!("console         {}", console.url);
    println!("Ctrl-C stops it.");
    lifo_local::interrupted().await;
    console.stop().await;
    Ok(())
}
