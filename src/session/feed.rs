//! Users' feeds: what each user's own connections learn about their chats
//! without following them — a chat made for them (by a backend, a
//! schedule), a run that ended, a post, a chat read elsewhere — as
//! `feed.chat` events. Announced by the chat's actor after the commit;
//! carried to the other nodes on PostgreSQL's feed channel.
//!
//! A hint, not a log: a subscriber that falls behind is dropped (its
//! connection says so), and a client reads `GET /v1/chats` for where every
//! chat stands.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Events one subscriber may have waiting.
const QUEUE: usize = 256;
/// Feed subscriptions one user may have on a node.
const PER_USER: usize = 64;

/// One user's subscribers: their ids and queues.
type Subscribers = Vec<(u64, flume::Sender<Arc<str>>)>;

/// Every user's feed subscribers on this node.
#[derive(Default)]
pub struct Feed {
    subs: Mutex<HashMap<String, Subscribers>>,
    next: AtomicU64,
}

/// A subscription: its events, until dropped.
pub struct FeedRx {
    pub events: flume::Receiver<Arc<str>>,
    id: u64,
    user: String,
    feed: Arc<Feed>,
}

impl Drop for FeedRx {
    fn drop(&mut self) {
        let mut subs = self.feed.subs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = subs.get_mut(&self.user) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                subs.remove(&self.user);
            }
        }
    }
}

impl Feed {
    /// Subscribes to `user`'s feed; `None` past [`PER_USER`] subscriptions.
    pub fn subscribe(self: &Arc<Self>, user: &str) -> Option<FeedRx> {
        let (tx, events) = flume::bounded(QUEUE);
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut subs = self.subs.lock().unwrap_or_else(|e| e.into_inner());
        let list = subs.entry(user.to_owned()).or_default();
        if list.len() >= PER_USER {
            return None;
        }
        list.push((id, tx));
        Some(FeedRx {
            events,
            id,
            user: user.to_owned(),
            feed: self.clone(),
        })
    }

    /// Whether `user` has a subscriber on this node.
    pub fn follows(&self, user: &str) -> bool {
        let subs = self.subs.lock().unwrap_or_else(|e| e.into_inner());
        subs.contains_key(user)
    }

    /// Hands `event` to `user`'s subscribers on this node. One whose queue
    /// is full is dropped: its receiver ends, and its client reads the list.
    pub fn deliver(&self, user: &str, event: &Arc<str>) {
        let mut subs = self.subs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(list) = subs.get_mut(user) else {
            return;
        };
        list.retain(|(_, tx)| tx.try_send(event.clone()).is_ok());
        if list.is_empty() {
            subs.remove(user);
        }
    }
}

/// A feed event as it crosses to the other nodes: `<node> <user
/// length>:<user><event>`.
pub(super) fn wire(node: i64, user: &str, event: &str) -> String {
    format!("{node} {}:{user}{event}", user.len())
}

/// [`wire`] read back: the node, the user and the event.
pub(super) fn unwire(payload: &str) -> Option<(i64, &str, &str)> {
    let (node, rest) = payload.split_once(' ')?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let user = rest.get(..len)?;
    Some((node.parse().ok()?, user, rest.get(len..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_reach_the_users_subscribers_and_a_slow_one_is_dropped() {
        let feed = Arc::new(Feed::default());
        let a = feed.subscribe("alice").unwrap();
        let b = feed.subscribe("bob").unwrap();
        feed.deliver("alice", &Arc::from("1"));
        assert_eq!(&*a.events.try_recv().unwrap(), "1");
        assert!(b.events.try_recv().is_err());
        for _ in 0..=QUEUE {
            feed.deliver("alice", &Arc::from("x"));
        }
        assert!(!feed.follows("alice"));
        drop(b);
        assert!(!feed.follows("bob"));
    }

    #[test]
    fn a_user_has_at_most_per_user_subscriptions_on_a_node() {
        let feed = Arc::new(Feed::default());
        let mut held: Vec<FeedRx> = (0..PER_USER)
            .map(|_| feed.subscribe("alice").unwrap())
            .collect();
        assert!(feed.subscribe("alice").is_none(), "one past the cap");
        let bob = feed.subscribe("bob");
        assert!(bob.is_some(), "another user is not held back");
        held.pop();
        assert!(feed.subscribe("alice").is_some(), "a place freed is taken");
    }

    #[test]
    fn a_wired_event_reads_back_whatever_the_user_id_holds() {
        for user in ["alice", "a b:c", "ü 7:x"] {
            let w = wire(3, user, "{\"type\":\"feed.chat\"}");
            assert_eq!(unwire(&w), Some((3, user, "{\"type\":\"feed.chat\"}")));
        }
        assert_eq!(unwire("x"), None);
        assert_eq!(unwire("1 99:short"), None);
    }
}
