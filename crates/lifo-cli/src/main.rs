//! `lifo`: see `lifo --help`.

use clap::Parser;
use lifo_cli::cli::{Cli, Command, LocalCommand, run};
use lifo_cli::connect::connect;
use std::time::Duration;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match &cli.command {
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
        })
        .await
        .map(|()| None),
        Command::Local(LocalCommand::Invoke {
            function,
            event,
            bin_dir,
        }) => lifo_cli::local::invoke(*function, event, bin_dir)
            .await
            .map(Some),
        Command::Simulate(args) => {
            tokio::select! {
                r = lifo_cli::simulate::command(args, cli.shards, cli.json) => r.map(Some),
                _ = lifo_local::interrupted() => Err(anyhow::anyhow!("interrupted; the local servers are stopped")),
            }
        }
        Command::Bench(args) => {
            tokio::select! {
                r = lifo_cli::bench::command(args, cli.json) => r.map(Some),
                _ = lifo_local::interrupted() => Err(anyhow::anyhow!("interrupted; the local servers are stopped")),
            }
        }
        Command::Ui(args) => match connect(&cli.connection()).await {
            Ok(queue) => serve_console(&cli, queue, args).await.map(|()| None),
            Err(e) => Err(e.into()),
        },
        _ => match connect(&cli.connection()).await {
            Ok(queue) => run(&cli, &queue).await.map(Some).map_err(Into::into),
            Err(e) => Err(e.into()),
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
        Err(e) => {
            // The whole chain: what failed, then each cause.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
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

/// `lifo ui`: serves until Ctrl-C.
async fn serve_console(
    cli: &Cli,
    queue: lifo_ops::Queue,
    args: &lifo_cli::ui::console::UiArgs,
) -> anyhow::Result<()> {
    let freshness = lifo_cli::ui::console::source(&cli.connection()).await;
    let console = lifo_cli::ui::start(queue, args, freshness).await?;
    println!("console         {}", console.url);
    println!("Ctrl-C stops it.");
    lifo_local::interrupted().await;
    console.stop().await;
    Ok(())
}
