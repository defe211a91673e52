//! `lifo`: see `lifo --help`.

use clap::Parser;
use lifo_cli::{Cli, Command, connect, run};

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
        Command::Local(lifo_cli::LocalCommand::Up { scheduler_every }) => {
            lifo_cli::local::up(cli.shards, std::time::Duration::from_secs(*scheduler_every))
                .await
                .map(|()| None)
        }
        Command::Simulate(args) => {
            tokio::select! {
                r = lifo_cli::simulate::command(args, cli.shards, cli.json) => r.map(Some),
                _ = lifo_local::interrupted() => Err("interrupted; the local servers are stopped".into()),
            }
        }
        Command::Bench(args) => {
            tokio::select! {
                r = lifo_cli::bench::command(args, cli.json) => r.map(Some),
                _ = lifo_local::interrupted() => Err("interrupted; the local servers are stopped".into()),
            }
        }
        _ => match connect(&cli).await {
            Ok(target) => run(&cli, &target)
                .await
                .map(Some)
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
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
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
