//! This node's part in a cluster of nodes on PostgreSQL (one database, or
//! chats spread over several: `[[databases]]`).
//!
//! - **Forwarding** (`forward`, `on_nats`). A request for a chat whose lease
//!   another node holds is sent to that node ([`Node::forward`]): as a NATS
//!   request sealed from node to node, or sealed into `node_commands` and
//!   announced on its channel; run there by the chat's actor, answered. A
//!   node that dies with requests of ours in flight is noticed by the
//!   liveness check: a request it never took is withdrawn and asked again
//!   ([`SessionError::Moved`]); one it took is answered [`SessionError::NodeLost`].
//! - **Listening** ([`start`]): commits of other nodes wake the chats this
//!   node follows; commands for this node run on the registry; replies end
//!   their forward. After a lost listener connection every follower reads the
//!   store again, since notifications may have been lost. With NATS
//!   (`nats_url`), commits come per chat on NATS instead ([`Node::watch`]),
//!   and a node cut off from it has its followers read the store every tick.
//! - **Liveness**, every [`TICK`]: keep this node's lock (take it again if
//!   its session was lost), then wake the followers of chats whose owner died,
//!   so they take them over, and take up the running chats no live node holds
//!   (a run left at a node's graceful stop, or a dead node's that nobody
//!   follows), so their runs go on here.
//!
//! The session's invariants hold across nodes because of the store: only the
//! lease holder can append (the fence), and a takeover waits for the last
//! append of the previous holder, then reads the log.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use uuid::Uuid;

mod forward;
mod on_nats;

use super::SessionError;
use super::handle::{Op, Signal};
use super::registry::Registry;
use crate::store::{LogNotice, NatsBus, NodeMessage, PgCluster, StoreError, Watch};

/// How often a node checks its own lock and the others' liveness.
pub const TICK: Duration = Duration::from_secs(1);
/// How long a forwarded request may take on the owner before the client
/// gets [`SessionError::NodeLost`].
const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

/// A request of ours another node is running.
struct InFlight {
    to: i64,
    done: oneshot::Sender<Result<(), SessionError>>,
}

/// A request as it travels.
#[derive(serde::Serialize, serde::Deserialize)]
struct Forwarded {
    chat_id: Uuid,
    op: Op,
}

/// This node in the cluster. Shared by the registry, the actors and the
/// node's two background tasks.
pub struct Node {
    cluster: PgCluster,
    in_flight: Mutex<HashMap<Uuid, InFlight>>,
    /// Commands run that came on NATS, so a replay is not run again.
    seen: Mutex<forward::Seen>,
    /// When (Unix ms) a sender's key was last looked up outside the tick.
    looked_up: std::sync::atomic::AtomicI64,
    /// Commit notices per chat over NATS, when configured (`store::nats`).
    bus: Option<Arc<NatsBus>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.cluster.node())
            .finish_non_exhaustive()
    }
}

impl Node {
    pub fn new(cluster: PgCluster, bus: Option<Arc<NatsBus>>) -> Arc<Self> {
        Arc::new(Self {
            cluster,
            in_flight: Mutex::new(HashMap::new()),
            seen: Mutex::new(forward::Seen::default()),
            looked_up: std::sync::atomic::AtomicI64::new(0),
            bus,
        })
    }

    /// The NATS connection, if commits travel on NATS.
    pub fn bus(&self) -> Option<&Arc<NatsBus>> {
        self.bus.as_ref()
    }

    /// On NATS, subscribes to chat `chat_id`'s commit notices until the
    /// returned guard is dropped: another node's wakes `signal` as a
    /// `NOTIFY` would, and the subscription's start does too (what was
    /// committed before it is read from the store).
    pub(super) fn watch(&self, chat_id: Uuid, signal: &Arc<Signal>) -> Option<Watch> {
        let bus = self.bus.as_ref()?;
        let me = self.id();
        let (on, ready) = (signal.clone(), signal.clone());
        let on = move |n: LogNotice| {
            if n.node != me {
                on.committed(n.seq);
            }
        };
        Some(bus.watch(chat_id, on, move || ready.wake.notify_one()))
    }

    /// This node's id.
    pub fn id(&self) -> i64 {
        self.cluster.node()
    }

    /// Sends a feed event of `user`'s to the other nodes (a lost one is a
    /// lost hint: the list stays right).
    pub async fn announce(&self, user: &str, event: &str) {
        let payload = super::feed::wire(self.id(), user, event);
        if payload.len() >= 7_900 {
            tracing::warn!(
                bytes = payload.len(),
                "a feed event too large to cross nodes"
            );
            return;
        }
        if let Err(e) = self.cluster.notify_feed(&payload).await {
            tracing::warn!(error = %e, "cannot send a feed event to the other nodes");
        }
    }

    pub(super) fn cluster(&self) -> &PgCluster {
        &self.cluster
    }

    /// Ends the requests in flight on nodes that are gone.
    async fn on_live_nodes(&self, live: &HashSet<i64>) {
        let lost: Vec<(Uuid, InFlight)> = {
            let mut in_flight = self.in_flight.lock().expect("in-flight lock");
            let ids: Vec<Uuid> = in_flight
                .iter()
                .filter(|(_, f)| !live.contains(&f.to))
                .map(|(id, _)| *id)
                .collect();
            ids.into_iter()
                .filter_map(|id| Some((id, in_flight.remove(&id)?)))
                .collect()
        };
        for (id, flight) in lost {
            // Never taken: it never ran, so it can go to the new owner.
            let result = match self.cluster.withdraw_command(id).await {
                Ok(true) => Err(SessionError::Moved),
                _ => Err(SessionError::NodeLost),
            };
            let _ = flight.done.send(result);
        }
    }
}

/// Starts the node's listener and liveness tasks. Returns once the listener
/// is subscribed, so nothing committed after this is missed.
///
/// # Errors
/// The database cannot be reached.
pub async fn start(node: Arc<Node>, registry: Registry) -> Result<(), StoreError> {
    let tracker = registry.context().tracker.clone();
    // One listener per database chats are spread over: each one's chats'
    // commits and purges are announced there.
    for part in 0..node.cluster.databases() {
        let listener = node.cluster.listen_on(part).await?;
        tracker.spawn(listen(node.clone(), registry.clone(), part, listener));
    }
    if let Some(bus) = node.bus.clone() {
        tracker.spawn(after_reconnects(
            node.clone(),
            bus.clone(),
            registry.clone(),
        ));
        tracker.spawn(on_nats::serve(node.clone(), bus, registry.clone()));
    }
    tracker.spawn(liveness(node, registry));
    Ok(())
}

/// After each NATS reconnect (once the server has this node's
/// subscriptions again) every follower reads the store, now and a tick
/// later, and every other node is told to do the same: what this node
/// published before its connection was seen to drop may never have left.
async fn after_reconnects(node: Arc<Node>, bus: Arc<NatsBus>, registry: Registry) {
    let shutdown = registry.context().shutdown.clone();
    let mut connects = bus.connects();
    connects.borrow_and_update();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = connects.changed() => if changed.is_err() { return },
        }
        bus.flush().await;
        registry.wake_followers(false);
        if let Err(e) = node.cluster.resync().await {
            tracing::warn!(error = %e, "cannot tell the other nodes this one reconnected to NATS");
        }
        tokio::time::sleep(TICK).await;
        registry.wake_followers(false);
    }
}

async fn listen(
    node: Arc<Node>,
    registry: Registry,
    part: usize,
    mut listener: sqlx::postgres::PgListener,
) {
    let shutdown = registry.context().shutdown.clone();
    loop {
        let received = tokio::select! {
            () = shutdown.cancelled() => {
                // No answer can arrive any more.
                if part == 0 {
                    node.on_live_nodes(&HashSet::new()).await;
                }
                return;
            }
            r = listener.try_recv() => r,
        };
        match received {
            Ok(Some(n)) => match PgCluster::parse(n.channel(), n.payload()) {
                Some(NodeMessage::Log(notices)) => {
                    metrics::counter!(crate::metrics::CLUSTER_NOTICES, "via" => "notify")
                        .increment(notices.len() as u64);
                    for notice in notices.iter().filter(|n| n.node != node.id()) {
                        if notice.chat_id.is_nil() {
                            // A node reconnected to NATS: its notices may be lost.
                            registry.wake_followers(false);
                        } else {
                            registry.on_commit(notice.chat_id, notice.seq);
                        }
                    }
                }
                Some(NodeMessage::Command(id)) => {
                    let (node, on) = (node.clone(), registry.clone());
                    registry
                        .context()
                        .tracker
                        .spawn(async move { node.run_command(&on, id).await });
                }
                Some(NodeMessage::Reply { id, body }) => node.on_reply(id, &body),
                Some(NodeMessage::Feed(payload)) => match super::feed::unwire(&payload) {
                    Some((from, user, event)) if from != node.id() => {
                        registry.context().feed.deliver(user, &event.into());
                    }
                    Some(_) => {}
                    None => tracing::warn!("unreadable feed notification"),
                },
                None => tracing::warn!(channel = n.channel(), "unexpected notification"),
            },
            // The connection was lost, and notifications with it: listen
            // again, then let every follower read the store.
            Ok(None) | Err(_) => {
                tracing::warn!("lost the notification connection; listening again");
                listener = loop {
                    match node.cluster.listen_on(part).await {
                        Ok(l) => break l,
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot listen yet");
                            tokio::select! {
                                () = shutdown.cancelled() => return,
                                () = tokio::time::sleep(TICK) => {}
                            }
                        }
                    }
                };
                registry.wake_followers(true);
            }
        }
    }
}

async fn liveness(node: Arc<Node>, registry: Registry) {
    let shutdown = registry.context().shutdown.clone();
    let mut tick = tokio::time::interval(TICK);
    // Running chats whose holder was not alive at the last tick.
    let mut held_by_dead = HashSet::new();
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        // Cut off from NATS: no notice reaches this node's followers, so
        // they read the store every tick until it is back.
        if node.bus.as_ref().is_some_and(|b| b.is_down()) {
            registry.wake_followers(false);
        }
        match node.cluster.keep_alive().await {
            Ok(true) => {
                tracing::warn!(
                    node = node.id(),
                    "this node's lock session was lost and is back; checking which chats moved"
                );
                registry.check_leases();
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "cannot keep this node's lock"),
        }
        match node.cluster.live_nodes().await {
            Ok(live) => {
                registry.on_live_nodes(&live);
                node.on_live_nodes(&live).await;
                if node.bus.is_some() {
                    // Commands on NATS are checked against these keys.
                    node.cluster.learn(&live).await;
                }
                held_by_dead = adopt_orphans(&node, &registry, &live, &held_by_dead).await;
            }
            Err(e) => tracing::warn!(error = %e, "cannot read which nodes are alive"),
        }
    }
}

/// Most orphaned runs one tick takes up.
const ORPHANS_PER_TICK: i64 = 64;

/// Takes up the runs no live node holds — left by a node's graceful stop, or
/// cut by its death — so a rolling restart moves each run to a live node
/// within about a tick: loading the chat takes its lease, and its owner
/// continues the run (or ends it `interrupted`). Nodes race; the lease
/// decides, and the others just follow the chat a while. A chat whose
/// holder is not alive waits one more tick (a node whose lock session
/// blinked takes its lock back at its next tick, and keeps its runs).
///
/// # Returns
/// The chats seen held by a dead node this tick, for the next.
async fn adopt_orphans(
    node: &Node,
    registry: &Registry,
    live: &HashSet<i64>,
    held_by_dead: &HashSet<Uuid>,
) -> HashSet<Uuid> {
    let orphans = match node.cluster.orphaned_runs(live, ORPHANS_PER_TICK).await {
        Ok(orphans) => orphans,
        Err(e) => {
            tracing::warn!(error = %e, "cannot look for runs no node holds");
            return HashSet::new();
        }
    };
    let mut seen = HashSet::new();
    for (chat_id, leased) in orphans {
        if leased && !held_by_dead.contains(&chat_id) {
            seen.insert(chat_id);
            continue;
        }
        tracing::info!(%chat_id, "taking up a run no live node holds");
        let (tracker, registry) = (registry.context().tracker.clone(), registry.clone());
        // Not awaited here: loading a chat must not hold up the tick.
        tracker.spawn(async move {
            if let Err(e) = registry.touch(chat_id).await {
                tracing::warn!(%chat_id, error = %e, "could not take up the run");
            }
        });
    }
    seen
}
