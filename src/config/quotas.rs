//! Usage quotas (`quota_user_*`): what one user's runs may use per day and
//! per month (UTC), in tokens or cost, and how many may be in flight.

/// A user's quotas; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Quotas {
    pub tokens_per_day: Option<u64>,
    pub tokens_per_month: Option<u64>,
    /// In the currency of the agents' prices.
    pub cost_per_day: Option<f64>,
    pub cost_per_month: Option<f64>,
    /// Runs in flight at once, on every node together.
    pub concurrent_runs: Option<u32>,
}

impl Quotas {
    /// Whether any quota is set.
    pub fn any(&self) -> bool {
        *self != Self::default()
    }

    /// The settings, checked: 0 is no limit; a cost must be a finite,
    /// non-negative number.
    pub(super) fn resolve(
        tokens_per_day: Option<u64>,
        tokens_per_month: Option<u64>,
        cost_per_day: Option<f64>,
        cost_per_month: Option<f64>,
        concurrent_runs: Option<u32>,
    ) -> Result<Self, (&'static str, String)> {
        let cost = |key: &'static str, v: Option<f64>| match v {
            Some(c) if !c.is_finite() || c < 0.0 => {
                Err((key, "must be a number of 0 or more".to_owned()))
            }
            Some(0.0) => Ok(None),
            c => Ok(c),
        };
        Ok(Self {
            tokens_per_day: tokens_per_day.filter(|&n| n > 0),
            tokens_per_month: tokens_per_month.filter(|&n| n > 0),
            cost_per_day: cost("quota_user_cost_per_day", cost_per_day)?,
            cost_per_month: cost("quota_user_cost_per_month", cost_per_month)?,
            concurrent_runs: concurrent_runs.filter(|&n| n > 0),
        })
    }
}
