//! The `agentwire` binary: parse the command line, set up logs, bind, serve.

use std::io::IsTerminal;

use anyhow::Context as _;
use clap::{CommandFactory, Parser};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

use agentwire::config::{Cli, Command, KeysCommand, LogFormat};

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
    // async-nats logs the server's address, credentials and all, at `debug`:
    // its lines are `info` and above, whatever RUST_LOG says.
    if let Ok(quiet) = "async_nats=info".parse() {
        filter = filter.add_directive(quiet);
    }
    // A command that prints what it made (a key) keeps its stdout for that.
    let (writer, terminal) = match cli.command {
        Some(Command::Keys { .. }) => (
            BoxMakeWriter::new(std::io::stderr),
            std::io::stderr().is_terminal(),
        ),
        _ => (
            BoxMakeWriter::new(std::io::stdout),
            std::io::stdout().is_terminal(),
        ),
    };
    match config.log_format {
        // Colours only for a terminal: a log file gets no escape codes.
        LogFormat::Text => tracing_subscriber::fmt()
            .with_ansi(terminal)
            .with_writer(writer)
            .with_env_filter(filter)
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_writer(writer)
            .with_env_filter(filter)
            .init(),
    }
    match cli.command.clone().unwrap_or(Command::Serve) {
        Command::Serve => {
            // Flushed when `serve` returns (the guard is dropped).
            let _traces = agentwire::telemetry::init(&config.telemetry)
                .context("starting the trace exporter (`[telemetry]`, OTEL_EXPORTER_OTLP_*)")?;
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
        Command::Keys { action } => keys(&config, action).await,
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

/// `agentwire keys …`.
async fn keys(config: &agentwire::config::Config, action: KeysCommand) -> anyhow::Result<()> {
    use agentwire::auth::{Scope, keys};
    let store = agentwire::service_keys(config).await?;
    match action {
        KeysCommand::Create { name, scopes } => {
            let name = name.trim();
            if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
                anyhow::bail!("--name: 1 to 100 characters, no control characters");
            }
            let scopes: Vec<String> = Scope::parse_list(&scopes)
                .map_err(|e| anyhow::anyhow!("--scopes: {e}"))?
                .into_iter()
                .map(|s| s.as_str().to_owned())
                .collect();
            let (key, hash) = keys::generate();
            let record = store.create(name, &hash, &scopes).await.with_context(|| {
                format!("storing the key (is a live key named `{name}` there already? `agentwire keys list`)")
            })?;
            eprintln!(
                "created service key `{}` ({}) with scopes {}; it is shown once, keep it now:",
                record.name,
                record.id,
                scopes.join(",")
            );
            println!("{key}");
        }
        KeysCommand::List => {
            for k in store.list().await? {
                let state = match k.revoked_at {
                    Some(_) => "revoked",
                    None => "live",
                };
                let created = chrono::DateTime::from_timestamp_millis(k.created_at)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                    .unwrap_or_default();
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    k.id,
                    k.name,
                    k.scopes.join(","),
                    created,
                    state
                );
            }
        }
        KeysCommand::Revoke { key } => {
            if !store.revoke(&key).await? {
                anyhow::bail!("no live key has the id or name `{key}`");
            }
            eprintln!("revoked `{key}`: it stops working within seconds on every node");
        }
    }
    Ok(())
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
