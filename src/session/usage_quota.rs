//! Usage quotas at run time (issue 39): the gate a run asks before each
//! model turn. What was used before the run — by the user
//! (`quota_user_*`), by every run of the agent (its file's `quota:`) — is
//! read from the store's ledger (shared by every node) at the run's start,
//! and again if it goes on into another day; what the run has used since is the link's count, priced as
//! its summary will be. A quota reached stops the run before its next
//! model call, with `QUOTA_EXCEEDED` naming the quota and when it resets.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc};
use serde_json::json;
use tokio::sync::Mutex;

use crate::agent::Agent;
use crate::agent::definition::Price;
use crate::config::Quotas;
use crate::link::{QuotaGate, Refusal};
use crate::llm::Usage;
use crate::store::{Spent, Store, StoreError};

/// What was used before the run, today and this month: by the user, and
/// by the agent's runs.
#[derive(Debug, Clone, Copy, Default)]
struct Before {
    user: (Spent, Spent),
    agent: (Spent, Spent),
}

/// The gate of one run of `owner`'s.
pub(super) struct RunQuota {
    store: Arc<dyn Store>,
    owner: String,
    /// The run's chat (not counted among the others in flight).
    chat: uuid::Uuid,
    user: Quotas,
    agent: Arc<Agent>,
    /// The price of the run's own speaker (the chat's model, if switched).
    own_price: Option<Price>,
    /// Read once a day: a run that goes on past midnight (UTC) reads the
    /// new day's again.
    before: Mutex<Option<(NaiveDate, Before)>>,
}

/// The gate of a run of `owner`'s with `agent` (on the chat's model
/// `switched`, if it switched), if any quota is set for the user or the agent.
pub(super) fn gate(
    ctx: &super::SessionContext,
    (owner, chat): (&str, uuid::Uuid),
    agent: &Arc<Agent>,
    switched: Option<&crate::agent::ModelEntry>,
) -> Option<Arc<dyn QuotaGate>> {
    let gate = RunQuota::of(&ctx.store, ctx.usage_quotas, (owner, chat), agent, switched)?;
    Some(Arc::new(gate))
}

impl RunQuota {
    /// The gate of a run, if any quota is set for its user or its agent.
    fn of(
        store: &Arc<dyn Store>,
        user: Quotas,
        (owner, chat): (&str, uuid::Uuid),
        agent: &Arc<Agent>,
        switched: Option<&crate::agent::ModelEntry>,
    ) -> Option<Self> {
        let own_price = agent
            .own_model(switched.map(|m| (m.name.as_str(), m.price)))
            .1;
        (user.any() || agent.quota.any()).then(|| Self {
            store: store.clone(),
            owner: owner.to_owned(),
            chat,
            user,
            agent: agent.clone(),
            own_price,
            before: Mutex::new(None),
        })
    }

    async fn before(&self, today: NaiveDate) -> Option<Before> {
        let read = || async {
            let ledger = self.store.usage();
            let day = today.to_string();
            let month = today.with_day(1).unwrap_or(today).to_string();
            let of = |owner: Option<&'_ str>, agent: Option<&'_ str>| {
                let (ledger, day, month) = (&ledger, &day, &month);
                let (owner, agent) = (owner.map(str::to_owned), agent.map(str::to_owned));
                async move {
                    let (o, a) = (owner.as_deref(), agent.as_deref());
                    let today = ledger.spent(o, a, day, day).await?;
                    let this_month = ledger.spent(o, a, month, day).await?;
                    Ok::<_, StoreError>((today, this_month))
                }
            };
            let mut before = Before::default();
            if self.user.any() {
                before.user = of(Some(&self.owner), None).await?;
            }
            if self.agent.quota.any() {
                before.agent = of(None, Some(&self.agent.id)).await?;
            }
            Ok::<_, StoreError>(before)
        };
        let mut cached = self.before.lock().await;
        if let Some((day, before)) = *cached
            && day == today
        {
            return Some(before);
        }
        match read().await {
            Ok(before) => {
                *cached = Some((today, before));
                Some(before)
            }
            Err(e) => {
                // Not known: the run goes on (its own failures show elsewhere).
                tracing::warn!(error = %e, user = %self.owner, "cannot read the usage ledger for a quota");
                None
            }
        }
    }

    /// A new run past `concurrent_runs` (the user's, the agent's): the
    /// other runs in flight, on every node, are the store's other chats in
    /// state `running` (this run's own may or may not be yet).
    async fn in_flight(&self) -> Option<Refusal> {
        let ledger = self.store.usage();
        let checks = [
            (
                "user",
                self.user.concurrent_runs,
                Some(self.owner.as_str()),
                None,
            ),
            (
                "agent",
                self.agent.quota.concurrent_runs,
                None,
                Some(self.agent.id.as_str()),
            ),
        ];
        for (scope, limit, owner, agent) in checks {
            let Some(limit) = limit else { continue };
            let others = match ledger.running(owner, agent, self.chat).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, user = %self.owner, "cannot count the runs in flight for a quota");
                    continue;
                }
            };
            if others < u64::from(limit) {
                continue;
            }
            let whose = match scope {
                "user" => format!(
                    "{} has {others} other runs in flight, the {limit} their quota allows (quota_user_concurrent_runs)",
                    self.owner
                ),
                _ => format!(
                    "agent `{}` has {others} other runs in flight, the {limit} its quota allows (its file's quota.concurrent_runs)",
                    self.agent.id
                ),
            };
            return Some(Refusal {
                message: format!("{whose}; one must end first"),
                details: json!({
                    "scope": scope,
                    "quota": "concurrent_runs",
                    "limit": limit,
                    "used": others,
                    "resets_at": null,
                }),
            });
        }
        None
    }

    /// What `used` cost at its speakers' prices (unpriced speakers: 0).
    fn cost(&self, used: &BTreeMap<String, Usage>) -> f64 {
        used.iter()
            .filter_map(|(speaker, u)| {
                // One agent speaks on the run's own model; a group's
                // members on theirs.
                let p = match self.agent.group {
                    None => self.own_price?,
                    Some(_) => self.agent.price_of(speaker)?,
                };
                Some(
                    (u.prompt_tokens as f64 * p.prompt_per_million
                        + u.completion_tokens as f64 * p.completion_per_million)
                        / 1e6,
                )
            })
            .sum()
    }
}

/// A quota reached: whose, which, its limit, what is used (before and in
/// the run), when it resets, in what.
struct Over {
    scope: &'static str,
    quota: &'static str,
    limit: f64,
    used: f64,
    resets: DateTime<Utc>,
    unit: &'static str,
}

/// The first of `quotas` that `before` and the run's `tokens` and `cost`
/// reach.
fn reached(
    scope: &'static str,
    quotas: &Quotas,
    (day, month): (Spent, Spent),
    (tokens, cost): (u64, f64),
    (tomorrow, next_month): (DateTime<Utc>, DateTime<Utc>),
) -> Option<Over> {
    let tokens_used = |before: Spent| (before.tokens + tokens) as f64;
    let cost_used = |before: Spent| before.cost_nanos as f64 / 1e9 + cost;
    let per = |n: Option<u64>| n.map(|n| n as f64);
    // (quota, limit, used, when it resets, unit)
    let checks = [
        (
            "tokens_per_day",
            per(quotas.tokens_per_day),
            tokens_used(day),
            tomorrow,
            "tokens",
        ),
        (
            "tokens_per_month",
            per(quotas.tokens_per_month),
            tokens_used(month),
            next_month,
            "tokens",
        ),
        (
            "cost_per_day",
            quotas.cost_per_day,
            cost_used(day),
            tomorrow,
            "in cost",
        ),
        (
            "cost_per_month",
            quotas.cost_per_month,
            cost_used(month),
            next_month,
            "in cost",
        ),
    ];
    checks
        .into_iter()
        .find_map(|(quota, limit, used, resets, unit)| {
            let limit = limit.filter(|&l| used >= l)?;
            Some(Over {
                scope,
                quota,
                limit,
                used,
                resets,
                unit,
            })
        })
}

#[async_trait::async_trait]
impl QuotaGate for RunQuota {
    async fn refusal(&self, used: &BTreeMap<String, Usage>, starting: bool) -> Option<Refusal> {
        if starting && let Some(refusal) = self.in_flight().await {
            return Some(refusal);
        }
        let today = Utc::now().date_naive();
        let before = self.before(today).await?;
        let run = (
            used.values()
                .map(|u| u.prompt_tokens + u.completion_tokens)
                .sum(),
            self.cost(used),
        );
        let midnight = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map(|t| t.and_utc());
        let resets = (
            midnight(today + Days::new(1))?,
            midnight(today.with_day(1)? + Months::new(1))?,
        );
        let over = reached("user", &self.user, before.user, run, resets)
            .or_else(|| reached("agent", &self.agent.quota, before.agent, run, resets))?;
        let resets = over
            .resets
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let (used, limit) = (round(over.used), round(over.limit));
        let whose = match over.scope {
            "user" => format!(
                "{} has used {used} of the {limit} {} their quota allows (quota_user_{})",
                self.owner, over.unit, over.quota
            ),
            _ => format!(
                "agent `{}` has used {used} of the {limit} {} its quota allows (its file's quota.{})",
                self.agent.id, over.unit, over.quota
            ),
        };
        Some(Refusal {
            message: format!("{whose}; it resets at {resets}"),
            details: json!({
                "scope": over.scope,
                "quota": over.quota,
                "limit": over.limit,
                "used": over.used,
                "resets_at": resets,
            }),
        })
    }
}

/// A figure as a person reads it: whole, or to six places.
fn round(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.6}").trim_end_matches('0').to_owned()
    }
}
