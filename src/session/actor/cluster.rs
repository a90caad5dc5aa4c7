//! The actor on several nodes: taking, losing and giving back the chat's
//! lease, following the owner's log, and forwarding requests to it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Actor, Role};
use crate::protocol::RunEndReason;
use crate::session::SessionError;
use crate::session::handle::{Command, Op, Origin, Reply};
use crate::store::{Lease, StoreError};

/// How many times a request follows a chat that keeps moving.
const MAX_ATTEMPTS: u8 = 3;
/// Envelopes a follower reads from the store per query.
const PAGE: u32 = 500;

impl Actor {
    /// Takes the role a lease request granted.
    pub(super) fn set_lease(&mut self, lease: Lease) {
        match lease {
            Lease::Owned { epoch } => {
                self.role = Role::Owner { epoch };
                self.signal.following.store(false, Ordering::Release);
            }
            Lease::Held { node } => self.follow(node),
        }
    }

    fn follow(&mut self, holder: i64) {
        self.role = Role::Follower;
        self.signal.holder.store(holder, Ordering::Release);
        self.signal.following.store(true, Ordering::Release);
    }

    /// Woken by the node: another node committed, the owner died, or this
    /// node's lock came back after a loss.
    pub(super) async fn on_wake(&mut self) {
        self.check_gone().await;
        if self.purged {
            return;
        }
        if let Role::Owner { epoch } = self.role {
            let check = self.signal.check_lease.swap(false, Ordering::AcqRel);
            // Another node says it wrote where this one would have: the
            // chat moved, if the lease says so too (a notice is a hint).
            let overtaken = self.signal.seen.load(Ordering::Acquire) >= self.next_seq;
            if (overtaken || check) && !self.lease_is(epoch).await {
                self.demote().await;
            }
        }
        if self.role != Role::Follower {
            return;
        }
        if self.signal.take_over.swap(false, Ordering::AcqRel)
            && let Err(e) = self.try_take_over().await
        {
            tracing::warn!(error = %e, "cannot take over the chat of a node that is gone");
        }
        if self.role != Role::Follower || self.subscribers.all_gone() {
            // Nobody to deliver to: a subscription reads the store first anyway.
            return;
        }
        if let Err(e) = self.catch_up().await {
            tracing::warn!(error = %e, "cannot read the owner's log");
        }
    }

    /// Whether the chat's lease is still this node's, with `epoch` (assumed so
    /// if the store cannot say: the next append will tell).
    async fn lease_is(&self, epoch: i64) -> bool {
        let Some(node) = &self.ctx.node else {
            return true;
        };
        match node.cluster().lease(self.chat_id).await {
            Ok(lease) => lease == Some((node.id(), epoch)),
            Err(_) => true,
        }
    }

    /// Asks for the lease; on success becomes the owner.
    async fn try_take_over(&mut self) -> Result<bool, StoreError> {
        let Some(node) = self.ctx.node.clone() else {
            return Ok(true);
        };
        match node.cluster().acquire(self.chat_id).await? {
            Lease::Owned { epoch } => {
                self.promote(epoch).await?;
                Ok(true)
            }
            Lease::Held { node } => {
                self.follow(node);
                Ok(false)
            }
        }
    }

    /// Delivers what was committed after the last envelope this follower
    /// delivered, in order, reading the store a page at a time. With nobody
    /// to deliver to, it only moves its position to the end of the log.
    pub(super) async fn catch_up(&mut self) -> Result<(), StoreError> {
        if self.subscribers.all_gone() {
            if let Some((last, _)) = self.ctx.store.last(self.chat_id).await? {
                self.next_seq = self.next_seq.max(last + 1);
                if self.chat.is_none() {
                    self.chat = self.ctx.store.chat(self.chat_id).await?;
                }
            }
            return Ok(());
        }
        loop {
            let page = self
                .ctx
                .store
                .load_after(self.chat_id, self.next_seq - 1, PAGE)
                .await?;
            let full = page.len() == PAGE as usize;
            if page.is_empty() {
                return Ok(());
            }
            if self.chat.is_none() {
                self.chat = self.ctx.store.chat(self.chat_id).await?;
            }
            for env in page {
                self.next_seq = env.seq + 1;
                self.subscribers.deliver(&Arc::from(env.json));
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Becomes the chat's owner: delivers what the last owner committed, then
    /// ends the run it left cut off.
    async fn promote(&mut self, epoch: i64) -> Result<(), StoreError> {
        self.set_lease(Lease::Owned { epoch });
        tracing::info!(epoch, "took the chat over");
        self.catch_up().await?;
        self.chat = self.ctx.store.chat(self.chat_id).await?;
        self.recover_cut_run().await
    }

    /// The chat's lease moved to another node: this actor may no longer
    /// write. Its run stops (the new owner logs it as interrupted); its
    /// subscribers stay, fed from the new owner's log.
    pub(super) async fn demote(&mut self) {
        tracing::warn!("lost the chat's lease to another node; following it from now on");
        if let Some(run) = self.run.take() {
            run.control.cancel(RunEndReason::Interrupted);
        }
        self.inputs.clear();
        self.components.clear();
        // The new owner restores what waits from the log (and titles the
        // chat: a title being made here is dropped when it comes back).
        self.queue.clear();
        self.titling = false;
        self.refuse_held(true, |_| SessionError::Moved);
        let holder = match &self.ctx.node {
            Some(node) => node.cluster().holder(self.chat_id).await.ok().flatten(),
            None => None,
        };
        self.follow(holder.unwrap_or(0));
        // Read what the new owner has written so far.
        self.signal.wake.notify_one();
    }

    /// Gives the lease back as the actor stops, so another node can take the
    /// chat at once.
    pub(super) async fn release(&mut self) {
        if let (Role::Owner { epoch }, Some(node)) = (self.role, &self.ctx.node)
            && let Err(e) = node.cluster().release(self.chat_id, epoch).await
        {
            tracing::warn!(error = %e, "cannot release the chat's lease; it lapses with this node");
        }
    }

    /// A request that changes the chat, received by a follower: take the
    /// chat if it is free (or its owner is dead) and run it here, else send it
    /// to the owner. The answer comes back without holding up this actor.
    pub(super) async fn forward(&mut self, op: Op, origin: Origin, reply: Reply) {
        let Origin::Local { attempt } = origin else {
            // The sender thought this node owned the chat: let it look again.
            let _ = reply.send(Err(SessionError::Moved));
            return;
        };
        if let (Some(user), Some(_)) = (op.user(), &self.chat)
            && let Err(e) = self.owned(user)
        {
            let _ = reply.send(Err(e));
            return;
        }
        let Some(node) = self.ctx.node.clone() else {
            let _ = reply.send(Err(SessionError::Moved));
            return;
        };
        let holder = match node.cluster().acquire(self.chat_id).await {
            Err(e) => {
                let _ = reply.send(Err(e.into()));
                return;
            }
            Ok(Lease::Owned { epoch }) => {
                if let Err(e) = self.promote(epoch).await {
                    let _ = reply.send(Err(e.into()));
                    return;
                }
                // The run promoting continued has not waited on its requests
                // again yet: an answer to one is held until it does.
                if let Some((op, reply)) = self.hold(op, reply) {
                    let result = self.handle_op(op).await;
                    let _ = reply.send(result);
                }
                return;
            }
            Ok(Lease::Held { node }) => node,
        };
        self.follow(holder);
        if matches!(op, Op::Touch) {
            // Loading is all a touch asks; the owner has the chat loaded.
            let _ = reply.send(Ok(()));
            return;
        }
        let me = self.me.clone();
        let chat_id = self.chat_id;
        self.ctx.tracker.spawn(async move {
            match node.forward(holder, chat_id, op.clone()).await {
                Err(SessionError::Moved) if attempt + 1 < MAX_ATTEMPTS => {
                    // Ask this actor again: it looks the owner up afresh.
                    let again = Command::Op {
                        op: Box::new(op),
                        origin: Origin::Local {
                            attempt: attempt + 1,
                        },
                        reply,
                    };
                    if let Some(me) = me.upgrade()
                        && let Err(lost) = me.send(Box::new(again)).await
                        && let Command::Op { reply, .. } = *lost.0
                    {
                        let _ = reply.send(Err(SessionError::ShuttingDown));
                    }
                }
                result => {
                    let _ = reply.send(result);
                }
            }
        });
    }
}
