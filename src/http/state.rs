//! [`AppState`]: what every handler shares.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Authenticator;
use crate::config::Config;
use crate::session::Registry;
use crate::store::Store;

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub registry: Registry,
    /// Users' database connections (seed 003).
    pub connections: Arc<crate::databases::Connections>,
    pub store: Arc<dyn Store>,
    pub auth: Arc<Authenticator>,
    /// Cancelled when the server shuts down: sockets close with 1001.
    pub shutdown: CancellationToken,
    /// WebSocket tasks are tracked here (axum's graceful shutdown does not wait for them).
    pub tracker: TaskTracker,
    pub(crate) next_conn_id: Arc<AtomicU64>,
    /// Open SSE streams per user (`max_streams_per_user`).
    pub streams: crate::session::UserSlots,
    /// Open WebSocket connections per user (`max_sockets_per_user`).
    pub sockets: crate::session::UserSlots,
}
