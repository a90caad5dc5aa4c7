//! Per-user rate limits and quotas, applied where every wire meets the chats
//! (the [`Registry`](super::Registry) and the actor), so no transport can
//! forget them: new chats and user turns per minute (GCRA, `governor`), and
//! runs in flight.
//!
//! Runs are counted per node: on several nodes a user may have up to
//! `runs_per_user` on each. [`UserSlots`] also counts the transports' open
//! streams.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::SessionError;
use crate::config::Limits;

/// How often (in checks) the limiters forget users who have been quiet.
const SWEEP_EVERY: u64 = 4096;

/// The limits of one process.
pub struct Quotas {
    chats: Option<DefaultKeyedRateLimiter<String>>,
    messages: Option<DefaultKeyedRateLimiter<String>>,
    keys: Option<DefaultKeyedRateLimiter<String>>,
    runs: UserSlots,
    checks: AtomicU64,
}

fn per_minute(n: Option<u32>) -> Option<DefaultKeyedRateLimiter<String>> {
    let n = NonZeroU32::new(n?)?;
    Some(RateLimiter::keyed(Quota::per_minute(n)))
}

impl Quotas {
    pub fn new(limits: &Limits) -> Self {
        Self {
            chats: per_minute(limits.chats_per_minute),
            messages: per_minute(limits.messages_per_minute),
            keys: per_minute(limits.key_requests_per_minute),
            runs: UserSlots::new(limits.runs_per_user, "runs in flight"),
            checks: AtomicU64::new(0),
        }
    }

    /// No limits at all (tests of other things).
    pub fn unlimited() -> Self {
        Self::new(&Limits {
            chats_per_minute: None,
            messages_per_minute: None,
            frames_per_second: None,
            streams_per_user: None,
            sockets_per_user: None,
            runs_per_user: None,
            key_requests_per_minute: None,
        })
    }

    /// One more new chat for `user`.
    ///
    /// # Errors
    /// [`SessionError::RateLimited`] past `rate_chats_per_minute`.
    pub fn new_chat(&self, user: &str) -> Result<(), SessionError> {
        self.check(self.chats.as_ref(), user, "new chats per minute")
    }

    /// One more user turn for `user`.
    ///
    /// # Errors
    /// [`SessionError::RateLimited`] past `rate_messages_per_minute`.
    pub fn message(&self, user: &str) -> Result<(), SessionError> {
        self.check(self.messages.as_ref(), user, "messages per minute")
    }

    /// One more request of the service key `key` (its id).
    ///
    /// # Errors
    /// [`SessionError::RateLimited`] past `rate_key_requests_per_minute`.
    pub fn key_request(&self, key: &str) -> Result<(), SessionError> {
        self.check(
            self.keys.as_ref(),
            key,
            "requests per service key per minute",
        )
    }

    fn check(
        &self,
        limiter: Option<&DefaultKeyedRateLimiter<String>>,
        user: &str,
        what: &str,
    ) -> Result<(), SessionError> {
        let Some(limiter) = limiter else {
            return Ok(());
        };
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            limiter.retain_recent();
        }
        limiter.check_key(&user.to_owned()).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            SessionError::RateLimited {
                what: what.to_owned(),
                retry_after_ms: wait.as_millis().max(1) as u64,
            }
        })
    }

    /// A run slot for `user`, held as long as the permit lives.
    ///
    /// # Errors
    /// [`SessionError::RateLimited`] when `max_runs_per_user` runs are in flight.
    pub fn run(&self, user: &str) -> Result<Slot, SessionError> {
        self.runs.take(user)
    }
}

type Counts = Arc<Mutex<HashMap<String, u32>>>;

/// How many things of one kind (runs, streams) each user has in flight, with
/// a cap. Cheap to clone: clones share the counts.
#[derive(Clone)]
pub struct UserSlots {
    max: Option<u32>,
    /// What is counted, for the error ("runs in flight").
    what: &'static str,
    counts: Counts,
}

impl UserSlots {
    /// At most `max` per user (`None`: no cap, only counted).
    pub fn new(max: Option<u32>, what: &'static str) -> Self {
        Self {
            max,
            what,
            counts: Counts::default(),
        }
    }

    /// One more for `user`, given back when the slot is dropped.
    ///
    /// # Errors
    /// [`SessionError::RateLimited`] when `user` has `max` already.
    pub fn take(&self, user: &str) -> Result<Slot, SessionError> {
        let mut map = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(user.to_owned()).or_insert(0);
        if let Some(max) = self.max
            && *n >= max
        {
            return Err(SessionError::RateLimited {
                what: format!("{} (at most {max})", self.what),
                retry_after_ms: 1000,
            });
        }
        *n += 1;
        Ok(Slot {
            user: user.to_owned(),
            counts: self.counts.clone(),
        })
    }
}

/// One slot of a [`UserSlots`], given back on drop.
pub struct Slot {
    user: String,
    counts: Counts,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut map = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(chats: u32, runs: u32) -> Limits {
        Limits {
            chats_per_minute: Some(chats),
            messages_per_minute: None,
            frames_per_second: None,
            streams_per_user: None,
            sockets_per_user: None,
            runs_per_user: Some(runs),
            key_requests_per_minute: None,
        }
    }

    #[test]
    fn chats_per_minute_are_per_user() {
        let q = Quotas::new(&limits(3, 1));
        for _ in 0..3 {
            q.new_chat("alice").unwrap();
        }
        let e = q.new_chat("alice").unwrap_err();
        assert_eq!(e.code(), crate::protocol::ErrorCode::RateLimitExceeded);
        assert!(
            matches!(e, SessionError::RateLimited { retry_after_ms, .. } if retry_after_ms > 1000)
        );
        q.new_chat("bob").unwrap();
        q.message("alice").unwrap();
    }

    #[test]
    fn run_permits_are_given_back() {
        let q = Quotas::new(&limits(3, 2));
        let a = q.run("alice").unwrap();
        let _b = q.run("alice").unwrap();
        assert!(q.run("alice").is_err());
        let _c = q.run("bob").unwrap();
        drop(a);
        let _d = q.run("alice").unwrap();
    }
}
