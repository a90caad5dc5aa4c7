//! The `agentwire` binary: parse the command line, set up logs, bind, serve.

use std::io::IsTerminal;

use anyhow::Context as _;
use clap::{CommandFactory, Parser};
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
    let cli = Cli::try_parse().unwrap_or_else(|e| exit_for(e));
    let config = match cli.settings.resolve() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("agentwire: {e}");
            std::process::exit(2);
        }
    };
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // rmcp logs every message an MCP server sends unasked (each progress
    // report of a call) at `info`: its lines are warnings and errors only,
    // unless RUST_LOG names it. (agentwire logs each report at `debug`.)
    if !std::env::var("RUST_LOG").is_ok_and(|spec| spec.contains("rmcp"))
        && let Ok(quiet) = "rmcp=warn".parse()
    {
        filter = filter.add_directive(quiet);
    }
    match config.log_format {
        // Colours only for a terminal: a log file gets no escape codes.
        LogFormat::Text => tracing_subscriber::fmt()
            .with_ansi(std::io::stdout().is_terminal())
            .with_env_filter(filter)
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init(),
    }
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let (soft, hard) = agentwire::raise_fd_limit();
            tracing::debug!(soft, hard, "open file limit");
            let listener = tokio::net::TcpListener::bind(config.listen)
                .await
                .with_context(|| {
                    format!(
                        "cannot listen on {} (configuration key `listen`, AGENTWIRE_LISTEN, --listen)",
                        config.listen
                    )
                })?;
            agentwire::run(config, listener, shutdown_signal()).await
        }
        Command::Reindex => {
            let started = std::time::Instant::now();
            let done = agentwire::reindex(&config).await?;
            println!(
                "reindexed {} chat(s) ({} texts and titles) in {:.1} s",
                done.chats,
                done.rows,
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
    }
}

/// Prints a command-line error and exits. A bad value that came from an
/// environment variable is reported as that variable, not as the flag the
/// user never typed (`AGENTWIRE_AUTH=maybe`, not `--auth`).
fn exit_for(e: clap::Error) -> ! {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) && let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg)
        && let Some(long) = arg
            .strip_prefix("--")
            .and_then(|a| a.split([' ', '=']).next())
        && !std::env::args_os().any(|a| {
            let a = a.to_string_lossy();
            a == format!("--{long}") || a.starts_with(&format!("--{long}="))
        })
    {
        let command = Cli::command();
        let env = command
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .and_then(|a| a.get_env())
            .and_then(|name| name.to_str())
            .map(str::to_owned);
        if let Some(env) = env
            && let Ok(value) = std::env::var(&env)
        {
            let key = long.replace('-', "_");
            let mut message = format!(
                "agentwire: environment variable {env}={value:?} is not a valid value for `{key}`"
            );
            if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
                message.push_str(&format!(" (one of: {})", valid.join(", ")));
            } else if let Some(source) = std::error::Error::source(&e) {
                message.push_str(&format!(": {source}"));
            }
            eprintln!("{message}");
            std::process::exit(2);
        }
    }
    e.exit()
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
