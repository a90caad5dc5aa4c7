//! [`CallEnv`]: what one call may use of its run; [`Database`]: the chat's
//! database access, for `ask_database` and `ask_analyst`.

use serde_json::Value;

use crate::link::RunLink;

/// What one call may use of its run.
pub struct CallEnv<'a> {
    /// The run's channel to its chat.
    pub link: &'a RunLink,
    /// The client of HTTP tools.
    pub http: &'a reqwest::Client,
    /// The chat's `context` object (for `inject`).
    pub context: Option<&'a Value>,
    /// Seed 000's `context_type`: only tools declared for it are offered.
    pub context_type: Option<&'a str>,
    /// The bearer of the connection that started the run (HTTP tools).
    pub bearer: Option<&'a str>,
    /// Characters of a result the model sees at most.
    pub max_result_chars: usize,
    /// Where tools that ask a model themselves add what it used (the run's
    /// `chat.usage_summary` counts it).
    pub usage: &'a std::sync::Mutex<crate::llm::Usage>,
    /// The run's model (for tools that ask it, like `ask_database`).
    pub provider: &'a dyn crate::llm::Provider,
    /// The chat's database access, where the server has users' databases.
    pub database: Option<Database<'a>>,
}

impl CallEnv<'_> {
    /// Adds what a tool's own model calls used to the run's usage, and
    /// reports it to the chat (which logs it for a restart).
    pub(super) async fn add_usage(&self, used: &crate::llm::Usage) {
        {
            let mut total = self.usage.lock().unwrap_or_else(|e| e.into_inner());
            total.prompt_tokens += used.prompt_tokens;
            total.completion_tokens += used.completion_tokens;
        }
        // A chat gone: the run stops at its next message anyway.
        let _ = self.link.used(None, Default::default(), *used).await;
    }

    /// The chat's database access, or why there is none.
    pub(super) fn database(&self) -> Result<Database<'_>, String> {
        self.database
            .ok_or_else(|| "this server keeps no user databases".to_owned())
    }
}

/// What `ask_database` may use: the user's connections, for this chat.
#[derive(Clone, Copy)]
pub struct Database<'a> {
    pub connections: &'a crate::databases::Connections,
    pub user: &'a str,
    pub chat_id: uuid::Uuid,
}
