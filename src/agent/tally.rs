//! What a run used, per speaker, at each speaker's price: what its
//! `chat.usage_summary` reports (`runtime::summary`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::build::Agent;
use super::definition::Price;
use crate::llm::Usage;

/// What a run used, per speaker (the agent; in a group each member, and
/// the selector under the group's id), written as it is used so a run cut
/// short still counts what it spent.
#[derive(Default)]
pub(super) struct Tally(pub BTreeMap<String, Spent>);

/// What one speaker used.
#[derive(Default)]
pub(super) struct Spent {
    /// Its own model calls.
    pub model: Usage,
    /// Its tools' model calls (`ask_database`, `ask_analyst`: on its model).
    pub tools: Mutex<Usage>,
    /// Its model's price.
    pub price: Option<Price>,
}

impl Spent {
    /// Both kinds of calls together.
    pub(super) fn total(&self) -> Usage {
        let tools = *self.tools.lock().unwrap_or_else(|e| e.into_inner());
        Usage {
            prompt_tokens: self.model.prompt_tokens + tools.prompt_tokens,
            completion_tokens: self.model.completion_tokens + tools.completion_tokens,
        }
    }
}

impl Tally {
    /// A continued run's tally: what its cut-off self had used (`used`, per
    /// speaker), each at its speaker's price in `agent`.
    /// `own` is the price of the run's own speaker (the chat's model).
    pub(super) fn before(
        agent: &Agent,
        used: &BTreeMap<String, Usage>,
        own: Option<Price>,
    ) -> Self {
        let mut tally = Self::default();
        for (name, u) in used {
            let price = match agent.group {
                None => own,
                Some(_) => agent.price_of(name),
            };
            tally.of(name, price).model = *u;
        }
        tally
    }

    /// The entry of `speaker` (created with `price`).
    pub(super) fn of(&mut self, speaker: &str, price: Option<Price>) -> &mut Spent {
        self.0.entry(speaker.to_owned()).or_insert_with(|| Spent {
            price,
            ..Spent::default()
        })
    }
}
