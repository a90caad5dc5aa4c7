//! The limit that belongs to a connection rather than to the chats: inbound
//! WebSocket messages per second. (New chats, turns and runs per user are
//! counted where every wire meets the chats, `session::Quotas`; open SSE
//! streams per user with `session::UserSlots`.)

use std::num::NonZeroU32;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::session::SessionError;

/// Inbound messages of one WebSocket connection (pings included).
pub(super) struct FrameLimiter(Option<DefaultDirectRateLimiter>);

impl FrameLimiter {
    /// `per_second` messages a second, in bursts of up to twice that.
    pub(super) fn new(per_second: Option<u32>) -> Self {
        Self(per_second.and_then(NonZeroU32::new).map(|n| {
            let burst = n.saturating_mul(NonZeroU32::new(2).expect("2 is not zero"));
            RateLimiter::direct(Quota::per_second(n).allow_burst(burst))
        }))
    }

    /// One more message.
    ///
    /// # Errors
    /// [`SessionError::RateLimited`], with how long to wait.
    pub(super) fn check(&self) -> Result<(), SessionError> {
        let Some(limiter) = &self.0 else {
            return Ok(());
        };
        limiter
            .check()
            .map_err(|not_until| SessionError::RateLimited {
                what: "messages on this connection".into(),
                retry_after_ms: not_until
                    .wait_time_from(DefaultClock::default().now())
                    .as_millis()
                    .max(1) as u64,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_past_the_burst_are_refused() {
        let limiter = FrameLimiter::new(Some(5));
        let passed = (0..50).filter(|_| limiter.check().is_ok()).count();
        assert!((10..=12).contains(&passed), "{passed}");
        assert!(FrameLimiter::new(None).check().is_ok());
    }
}
