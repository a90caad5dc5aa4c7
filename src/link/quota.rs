//! A run's usage quota, as the run sees it: what its model calls used so
//! far (per speaker), and the gate asked before each model turn. The gate
//! itself — the ledger, the limits, the prices — is the chat's
//! (`session::usage_quota`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::llm::Usage;

/// Why a run may not make another model call.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// For the user: which quota, and when it resets.
    pub message: String,
    /// `{quota, limit, used, resets_at}`.
    pub details: serde_json::Value,
}

/// Decides whether a run that used `used` (per speaker; `""` the run's own
/// agent) may make another model call; `starting`: the run's first ask, a
/// new run's (not one continued after a restart), when what is in flight
/// counts too.
#[async_trait::async_trait]
pub trait QuotaGate: Send + Sync {
    async fn refusal(&self, used: &BTreeMap<String, Usage>, starting: bool) -> Option<Refusal>;
}

/// A run's gate and what it has used.
pub(super) struct Metered {
    gate: Arc<dyn QuotaGate>,
    used: Mutex<BTreeMap<String, Usage>>,
    /// The gate was asked already, or the run is continued: not starting.
    started: AtomicBool,
}

impl std::fmt::Debug for Metered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metered")
            .field("used", &self.used)
            .finish_non_exhaustive()
    }
}

impl Metered {
    pub(super) fn new(gate: Arc<dyn QuotaGate>) -> Self {
        Self {
            gate,
            used: Mutex::default(),
            started: AtomicBool::new(false),
        }
    }

    /// The run is continued after a restart: it started before.
    pub(super) fn continued(&self) {
        self.started.store(true, Ordering::Relaxed);
    }

    /// Counts a model call's `usage` as `speaker`'s.
    pub(super) fn add(&self, speaker: &str, usage: Usage) {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let u = used.entry(speaker.to_owned()).or_default();
        u.prompt_tokens += usage.prompt_tokens;
        u.completion_tokens += usage.completion_tokens;
    }

    pub(super) async fn refusal(&self) -> Option<Refusal> {
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let starting = !self.started.swap(true, Ordering::Relaxed);
        self.gate.refusal(&used, starting).await
    }
}
