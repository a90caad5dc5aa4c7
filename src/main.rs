//! The `agentwire` binary: parse the command line, set up logs, bind, serve.

use clap::Parser;
use tracing_subscriber::EnvFilter;

use agentwire::config::{Cli, Command, LogFormat};

#[tokio::main]
async fn main() {
    if let Err(e) = serve().await {
        // `{:#}` prints the whole chain on one line, without a backtrace.
        eprintln!("agentwire: {e:#}");
        std::process::exit(1);
    }
}

async fn serve() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = match cli.settings.resolve() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("agentwire: {e}");
            std::process::exit(2);
        }
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    match config.log_format {
        LogFormat::Text => tracing_subscriber::fmt().with_env_filter(filter).init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init(),
    }
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let (soft, hard) = agentwire::raise_fd_limit();
            tracing::debug!(soft, hard, "open file limit");
            let listener = tokio::net::TcpListener::bind(config.listen).await?;
            agentwire::run(config, listener, shutdown_signal()).await
        }
    }
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
