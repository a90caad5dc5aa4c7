//! Usage quotas at run time (issue 39): the gate a run asks before each
//! model turn. What the user had used before the run is read once from the
//! store's ledger (shared by every node), at the run's first turn; what the
//! run has used since is the link's count, priced as its summary will be.
//! A quota used up stops the run before its next model call, with
//! `QUOTA_EXCEEDED` naming the quota and when it resets.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc};
use serde_json::json;
use tokio::sync::OnceCell;

use crate::agent::Agent;
use crate::config::Quotas;
use crate::link::{QuotaGate, Refusal};
use crate::llm::Usage;
use crate::store::{Spent, Store};

/// The gate of one run of `owner`'s.
pub(super) struct RunQuota {
    store: Arc<dyn Store>,
    owner: String,
    quotas: Quotas,
    agent: Arc<Agent>,
    /// What the user had used before the run: today, and this month.
    before: OnceCell<(Spent, Spent)>,
}

impl RunQuota {
    /// The gate of a run, if any quota is set.
    pub(super) fn of(
        store: &Arc<dyn Store>,
        quotas: Quotas,
        owner: &str,
        agent: &Arc<Agent>,
    ) -> Option<Arc<dyn QuotaGate>> {
        quotas.any().then(|| {
            Arc::new(Self {
                store: store.clone(),
                owner: owner.to_owned(),
                quotas,
                agent: agent.clone(),
                before: OnceCell::new(),
            }) as Arc<dyn QuotaGate>
        })
    }

    async fn before(&self, today: NaiveDate) -> Option<(Spent, Spent)> {
        let read = || async {
            let ledger = self.store.usage();
            let day = today.to_string();
            let month = today.with_day(1).unwrap_or(today).to_string();
            let spent_today = ledger.spent(&self.owner, &day, &day).await?;
            let spent_month = ledger.spent(&self.owner, &month, &day).await?;
            Ok::<_, crate::store::StoreError>((spent_today, spent_month))
        };
        match self.before.get_or_try_init(read).await {
            Ok(before) => Some(*before),
            Err(e) => {
                // Not known: the run goes on (its own failures show elsewhere).
                tracing::warn!(error = %e, user = %self.owner, "cannot read the usage ledger for a quota");
                None
            }
        }
    }

    /// What `used` cost at its speakers' prices (unpriced speakers: 0).
    fn cost(&self, used: &BTreeMap<String, Usage>) -> f64 {
        used.iter()
            .filter_map(|(speaker, u)| {
                let p = self.agent.price_of(speaker)?;
                Some(
                    (u.prompt_tokens as f64 * p.prompt_per_million
                        + u.completion_tokens as f64 * p.completion_per_million)
                        / 1e6,
                )
            })
            .sum()
    }
}

/// One quota's check: its name, limit, what is used (before and in the run)
/// and when it resets.
struct Check {
    quota: &'static str,
    limit: f64,
    used: f64,
    resets: DateTime<Utc>,
    unit: &'static str,
}

#[async_trait::async_trait]
impl QuotaGate for RunQuota {
    async fn refusal(&self, used: &BTreeMap<String, Usage>) -> Option<Refusal> {
        let now = Utc::now();
        let today = now.date_naive();
        let (day, month) = self.before(today).await?;
        let tokens: u64 = used
            .values()
            .map(|u| u.prompt_tokens + u.completion_tokens)
            .sum();
        let cost = self.cost(used);
        let midnight = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map(|t| t.and_utc());
        let tomorrow = midnight(today + Days::new(1))?;
        let next_month = midnight(today.with_day(1)? + Months::new(1))?;
        let q = &self.quotas;
        let tokens_used = |before: Spent| (before.tokens + tokens) as f64;
        let cost_used = |before: Spent| before.cost_nanos as f64 / 1e9 + cost;
        let per = |n: Option<u64>| n.map(|n| n as f64);
        // (quota, limit, used, when it resets, unit)
        let checks = [
            (
                "tokens_per_day",
                per(q.tokens_per_day),
                tokens_used(day),
                tomorrow,
                "tokens",
            ),
            (
                "tokens_per_month",
                per(q.tokens_per_month),
                tokens_used(month),
                next_month,
                "tokens",
            ),
            (
                "cost_per_day",
                q.cost_per_day,
                cost_used(day),
                tomorrow,
                "in cost",
            ),
            (
                "cost_per_month",
                q.cost_per_month,
                cost_used(month),
                next_month,
                "in cost",
            ),
        ];
        let over = checks
            .into_iter()
            .find_map(|(quota, limit, used, resets, unit)| {
                let limit = limit.filter(|&l| used >= l)?;
                Some(Check {
                    quota,
                    limit,
                    used,
                    resets,
                    unit,
                })
            })?;
        let resets = over
            .resets
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        Some(Refusal {
            message: format!(
                "{} has used {} of the {} {} their quota allows (quota_user_{}); it resets at {resets}",
                self.owner,
                round(over.used),
                round(over.limit),
                over.unit,
                over.quota,
            ),
            details: json!({
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
        format!("{:.6}", n).trim_end_matches('0').to_owned()
    }
}
