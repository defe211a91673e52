//! `lifo`: see `lifo --help`.

use clap::Parser;
use lifo_cli::{Cli, Command, connect, run};
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
        Command::Local(lifo_cli::LocalCommand::Up {
            scheduler_every,
            data_dir,
            process_timeout,
            pacing,
        }) => lifo_cli::local::up(lifo_cli::local::UpOptions {
            shards: cli.shards,
            scheduler_every: Duration::from_secs(*scheduler_every),
            data_dir: data_dir.clone(),
            process_timeout: process_timeout.map(Duration::from_secs),
            rate_limit: pacing.rate_limit(),
            retry_backoff: Duration::from_secs(pacing.retry_backoff),
        })
        .await
        .map(|()| None),
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
        _ => match connect(&cli).await {
            Ok(target) => run(&cli, &target).await.map(Some).map_err(Into::into),
            Err(e) => Err(e.into()),
        },
    };
    match result {
        Ok(out) => {
            if let Some(out) = out {
                println!("{out}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            // The whole chain: what failed, then each cause.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
