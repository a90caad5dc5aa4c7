//! agentwire: a durable, resumable backend between AI agents and chat UIs.
//!
//! The crate, in the order its modules may depend on each other (each uses
//! only those above it; `tests/it/layers.rs` checks it):
//!
//! - [`config`]: settings from file, environment and flags, validated once.
//! - [`metrics`]: the metric names and the recorder.
//! - [`protocol`]: the wire types of `/v1/ws` and their JSON-Schema validation.
//! - [`store`]: the durable session log (SQLite or PostgreSQL), its
//!   group-committing writer, and the coordination of several nodes on PostgreSQL.
//! - [`databases`]: users' own databases (seed 003): connections with
//!   sealed passwords.
//! - [`llm`]: the model seam (`Provider`) and the HTTP providers.
//! - [`link`]: the run's channel to its chat (`RunMsg`, `RunLink`, outcomes).
//! - [`tools`]: tool kinds and the one pipeline every call takes.
//! - [`templates`]: seed 004's conversation templates and their walk.
//! - [`workflows`]: seed 002's user-invoked workflows: files, checks, registry.
//! - [`agent`]: agent files, the agentic loop and the model turn.
//! - [`session`]: one actor per chat, the single writer of its log.
//! - [`wire`]: pure encoders of the log for each wire and SSE dialect.
//! - [`auth`]: bearer token → user.
//! - [`http`]: the axum router, `/healthz`, `/v1/ws` and the REST routes.
//!
//! [`run`] wires them together; `main.rs` only parses the command line.

pub mod agent;
pub mod auth;
pub mod config;
pub mod databases;
pub mod http;
pub mod link;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub mod protocol;
pub mod schedules;
pub mod session;
pub mod store;
pub mod telemetry;
pub mod templates;
#[doc(hidden)]
pub mod testing;
pub mod tools;
pub mod upstream;
pub mod webhooks;
pub mod wire;
pub mod workflows;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::AgentRegistry;
use crate::auth::Authenticator;
use crate::config::{AuthConfig, Config, Database};
use crate::session::{Node, Registry, SessionContext};
use crate::store::{LogWriter, NatsBus, PgCluster, PgStore, ShardedStore, SqliteStore, Store};

/// Every connection is a file descriptor: raise the soft limit (often 1,024)
/// to the hard limit the system allows (the server and the load generator).
///
/// # Returns
/// The soft and hard limits after the change (`(0, 0)` if unknown).
pub fn raise_fd_limit() -> (u64, u64) {
    // SAFETY: getrlimit/setrlimit on a local struct; no other preconditions.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return (0, 0);
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        (lim.rlim_cur, lim.rlim_max)
    }
}

/// `agentwire reindex`: rebuilds the search index and the chats' list
/// columns from the log ([`Store::reindex`]) on the configured database.
///
/// # Errors
/// The database cannot be opened (on SQLite: a server holds the file), or
/// the rebuild fails (it then changed nothing).
pub async fn reindex(config: &Config) -> anyhow::Result<store::Reindexed> {
    let store: Arc<dyn Store> = match &config.database {
        Database::Sqlite(path) => Arc::new(
            SqliteStore::open(path)
                .await
                .with_context(|| format!("opening {}", path.display()))?,
        ),
        Database::Postgres { url, spread, .. } if spread.is_empty() => Arc::new(
            PgStore::open(url, 2)
                .await
                .context("opening the PostgreSQL database (database_url)")?,
        ),
        Database::Postgres { spread, .. } => Arc::new(
            ShardedStore::open(&named(spread), 2)
                .await
                .context("opening the databases of [[databases]]")?,
        ),
    };
    store.reindex().await.context("rebuilding the search index")
}

/// `[[databases]]` as (name, URL) pairs.
fn named(spread: &[config::DatabaseEntry]) -> Vec<(String, String)> {
    spread
        .iter()
        .map(|d| (d.name.clone(), d.url.clone()))
        .collect()
}

/// Opens the PostgreSQL store (one database, or chats spread over
/// `[[databases]]`) and joins its cluster: the store, this node, and the
/// databases' stores (where commits are announced).
async fn open_postgres(
    url: &str,
    pool_size: u32,
    spread: &[config::DatabaseEntry],
) -> anyhow::Result<(Arc<dyn Store>, PgCluster, Vec<Arc<PgStore>>)> {
    if spread.is_empty() {
        let pg = Arc::new(
            PgStore::open(url, pool_size)
                .await
                .context("opening the PostgreSQL database (database_url)")?,
        );
        pg.check_alone()
            .await
            .context("opening the PostgreSQL database (database_url)")?;
        // On PostgreSQL every node is one of a cluster (perhaps of one).
        let cluster = PgCluster::join(&pg)
            .await
            .context("joining the nodes on the PostgreSQL database")?;
        return Ok((pg.clone(), cluster, vec![pg]));
    }
    let sharded = ShardedStore::open(&named(spread), pool_size)
        .await
        .context("opening the databases of [[databases]]")?;
    let stores = sharded.stores();
    let parts: Vec<(&str, &PgStore)> = spread
        .iter()
        .zip(&stores)
        .map(|(d, s)| (d.name.as_str(), s.as_ref()))
        .collect();
    let cluster = PgCluster::join_spread(&parts)
        .await
        .context("joining the nodes on the databases of [[databases]]")?;
    tracing::info!(
        databases = stores.len(),
        "chats spread over several databases"
    );
    Ok((Arc::new(sharded), cluster, stores))
}

/// The service keys of the configured store, for `agentwire keys …`: on
/// SQLite beside a server that holds the file (migrated by it), else after
/// opening (and migrating) the store.
///
/// # Errors
/// The store cannot be opened.
pub async fn service_keys(config: &Config) -> anyhow::Result<store::ServiceKeys> {
    match &config.database {
        Database::Sqlite(path) => match SqliteStore::open(path).await {
            Ok(store) => Ok(store.service_keys()),
            Err(e) if path.exists() => {
                tracing::debug!(error = %e, "the store is held: using the file beside its owner");
                store::ServiceKeys::open_sqlite(path)
                    .await
                    .with_context(|| format!("opening {}", path.display()))
            }
            Err(e) => Err(e).with_context(|| format!("opening {}", path.display())),
        },
        Database::Postgres { url, .. } => Ok(PgStore::open(url, 2)
            .await
            .context(
                "opening the PostgreSQL database (database_url, or the first of [[databases]])",
            )?
            .service_keys()),
    }
}

/// Runs the server on `listener` until `shutdown` resolves, then shuts down
/// gracefully: stop accepting, close sockets with 1001, let runs log their
/// `interrupted` completion, flush the log.
///
/// # Errors
/// The store cannot be opened or migrated, an agent file is bad, or the JWT key
/// is unusable.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Everything that can fail without touching the disk goes first: a start
    // that fails on a bad agent file or key leaves no database behind.
    let agents = AgentRegistry::load(
        &config.agents_dir,
        config.agents_dir_explicit,
        &config.models,
    )?;
    agents.limit_upstream_events(config.max_message_bytes);
    let webhook = match &config.webhook {
        Some(hook) => Some((
            hook.clone(),
            webhooks::Secret::parse(&hook.secret)
                .map_err(|e| anyhow::anyhow!("configuration key `webhook_secret`: {e}"))?,
        )),
        None => None,
    };
    let mut auth =
        Authenticator::new(&config.auth).context("configuration key `jwt_public_key`")?;
    if let AuthConfig::Jwt(jwt) = &config.auth
        && matches!(jwt.key, config::JwtKey::Jwks(_))
        && jwt.audience.is_empty()
    {
        tracing::warn!(
            "jwt_audience is not set: any token your identity provider signs for any of its applications signs in here"
        );
    }
    if let Some(every) = config.webhook.as_ref().and_then(|h| h.remind)
        && every >= config.input_timeout.max(config.ui_timeout)
    {
        tracing::warn!(
            "webhook_remind_seconds is not shorter than input_timeout_seconds and ui_timeout_seconds: a wait ends at its timeout before its first reminder"
        );
    }
    if matches!(config.auth, AuthConfig::None) {
        tracing::warn!(
            "auth mode `none`: every request is user `dev`; set AGENTWIRE_AUTH=jwt in production"
        );
    }

    let (store, node): (Arc<dyn Store>, Option<Arc<Node>>) = match &config.database {
        Database::Sqlite(path) => (
            Arc::new(
                SqliteStore::open(path)
                    .await
                    .with_context(|| format!("opening {}", path.display()))?,
            ),
            None,
        ),
        Database::Postgres {
            url,
            pool_size,
            nats,
            spread,
        } => {
            let (store, cluster, stores) = open_postgres(url, *pool_size, spread).await?;
            tracing::info!(node = cluster.node(), "joined the cluster");
            // Commit notices per chat on NATS, if configured (else NOTIFY).
            let bus = match nats {
                Some(nats) => {
                    let name = format!("agentwire-node-{}", cluster.node());
                    let bus = NatsBus::connect(nats, &name)
                        .await
                        .context("connecting to NATS (nats_url)")?;
                    for pg in &stores {
                        pg.announce_on(bus.clone());
                    }
                    Some(bus)
                }
                None => None,
            };
            (store, Some(Node::new(cluster, bus)))
        }
    };
    auth.set_service_keys(store.service_keys());
    if webhook.is_some() {
        // Before anything is appended: every event from now on is kept.
        store.enable_outbox();
    }
    metrics::install();
    let (writer, writer_task) = LogWriter::spawn(store.clone());
    let token = CancellationToken::new();
    let tracker = TaskTracker::new();
    let connections = Arc::new(databases::Connections::new(
        store.clone(),
        config.master_key.as_ref().map(|k| k.0),
        config.connection_files_dir.clone(),
        config.connection_hosts.clone(),
    ));
    let registry = Registry::new(Arc::new(SessionContext {
        connections: Some(connections.clone()),
        store: store.clone(),
        writer,
        agents: agents.clone(),
        input_timeout: config.input_timeout,
        ui_timeout: config.ui_timeout,
        idle: config.idle_chat,
        max_message_bytes: config.max_message_bytes,
        max_versions_per_point: config.max_versions_per_point,
        files: config.files.clone(),
        max_branches_per_chat: config.max_branches_per_chat,
        quotas: session::Quotas::new(&config.limits),
        usage_quotas: config.quotas,
        shutdown: token.clone(),
        tracker: tracker.clone(),
        node: node.clone(),
        continue_runs: config.continue_runs,
        title_model: config.title_model.clone(),
        auto_titles: config.auto_titles,
        continue_delay: config.continue_delay,
        feed: Arc::default(),
    }));
    if let Some(node) = node {
        // Listening before serving: nothing committed by another node is missed.
        session::start_node(node, registry.clone())
            .await
            .context("listening for the other nodes")?;
    }
    tracker.spawn(sweep_staged(store.clone(), token.clone()));
    let scheduler = schedules::Scheduler {
        registry: registry.clone(),
        schedules: store.schedules(),
        tick: std::time::Duration::from_secs(1),
        grace: config.schedules.grace,
    };
    tracker.spawn(scheduler.run(token.clone()));
    if let Some((hook, secret)) = webhook {
        let dispatcher = webhooks::Dispatcher {
            store: store.clone(),
            url: hook.url,
            secret,
            timeout: hook.timeout,
            remind: hook.remind,
        };
        tracker.spawn(dispatcher.run(token.clone()));
    }
    let recovered = registry.recover_interrupted().await?;
    if recovered > 0 {
        tracing::info!(
            chats = recovered,
            "marked runs cut off by the last stop as interrupted"
        );
    }

    let grace = config.shutdown_grace;
    let streams = session::UserSlots::new(config.limits.streams_per_user, "open event streams");
    let sockets = session::UserSlots::new(config.limits.sockets_per_user, "open WebSockets");
    let header_timeout = config.http_header_timeout;
    let sleeping = registry.clone();
    let state = http::AppState {
        config: Arc::new(config),
        registry,
        connections,
        store,
        auth: Arc::new(auth),
        shutdown: token.clone(),
        tracker: tracker.clone(),
        next_conn_id: Arc::new(AtomicU64::new(1)),
        streams,
        sockets,
    };
    tracing::info!(
        addr = %listener.local_addr()?,
        agents = ?agents.ids(),
        "agentwire listening"
    );
    let app = http::router(state);
    let signal_token = token.clone();
    let stop = async move {
        shutdown.await;
        tracing::info!("shutting down");
        signal_token.cancel();
        sleeping.forget_sleeping();
    };
    http::serve(listener, app, header_timeout, stop, grace).await;

    // Sockets and chats watch `token`; wait for them (and the runs they end).
    token.cancel();
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        tracing::warn!(
            "shutdown grace elapsed with tasks still running; their runs will show as interrupted"
        );
    }
    // Every other LogWriter handle lived in the chats and the router's state,
    // both gone now: the writer commits what it holds and ends.
    let _ = tokio::time::timeout(grace, writer_task).await;
    Ok(())
}

/// What an upload staged and never recorded (its node died mid-upload) is
/// swept once a day old, every hour (PostgreSQL; SQLite drops it at
/// opening). A day: an upload is never that long (each piece within
/// `http_body_timeout_seconds`, at any reasonable speed).
async fn sweep_staged(store: Arc<dyn Store>, shutdown: CancellationToken) {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(3600);
    const OLD: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match store.sweep_staged(OLD).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(chunks = n, "dropped what dead uploads had staged"),
            Err(e) => tracing::warn!(error = %e, "cannot sweep what dead uploads staged"),
        }
    }
}
