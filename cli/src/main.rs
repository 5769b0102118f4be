//! `sarvcrawl`: the embedded server (`serve`) and the client commands.

#[cfg(feature = "aws")]
mod aws;
mod backend;
mod client;
mod serve;
mod server;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// SarvCrawl: web pages as clean Markdown, whole sites crawled, as asynchronous jobs.
#[derive(Parser)]
#[command(name = "sarvcrawl", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    client: client::ClientArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the API server with its workers (SQLite and files under --data-dir by default).
    Serve(serve::ServeArgs),
    /// Manage an AWS deployment's resources and keys.
    #[cfg(feature = "aws")]
    #[command(subcommand)]
    Aws(aws::AwsCommand),
    #[command(flatten)]
    Client(client::ClientCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Client(_) => "warn",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => exit_code(serve::run(args).await),
            #[cfg(feature = "aws")]
            Command::Aws(cmd) => exit_code(aws::run(cmd).await),
            Command::Client(cmd) => match client::run(cli.client, cmd).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(failure) => failure.report(),
            },
        }
    })
}

fn exit_code(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
