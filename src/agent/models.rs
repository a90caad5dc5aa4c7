//! Models a chat can switch to (seed 003): `[[models]]` in `agentwire.toml`,
//! each with a provider, and aliases (`qwen` → `qwen3-8b`).

use std::sync::Arc;
use std::time::Duration;

use super::definition::ProviderKind;
use super::providers::build_provider;
use crate::config::ModelConfig;
use crate::llm::Provider;

/// How long an availability probe waits for the model server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A configured model.
pub struct ModelEntry {
    pub name: String,
    /// `openai`, `anthropic`, `gemini` or `ollama`.
    pub provider_name: String,
    pub aliases: Vec<String>,
    pub provider: Arc<dyn Provider>,
    /// The vendor's name for the model.
    pub vendor_model: String,
    pub base_url: String,
    /// The environment variable holding the API key, if any.
    pub api_key_env: Option<String>,
    /// What it costs, per million tokens.
    pub price: Option<super::definition::Price>,
    http: reqwest::Client,
}

impl std::fmt::Debug for ModelEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelEntry")
            .field("name", &self.name)
            .field("provider", &self.provider_name)
            .finish_non_exhaustive()
    }
}

impl ModelEntry {
    /// Forwards an OpenAI Chat Completions body, unchanged but for the model
    /// name, to this model's server (seed 002's passthrough).
    ///
    /// # Errors
    /// Not an OpenAI-compatible model, a missing key variable, or an
    /// unreachable server (a message for the client).
    pub async fn forward_chat_completions(
        &self,
        mut body: serde_json::Value,
    ) -> Result<reqwest::Response, String> {
        if self.provider_name != "openai" {
            return Err(format!(
                "model `{}` is not served by an OpenAI-compatible server",
                self.name
            ));
        }
        body["model"] = serde_json::Value::String(self.vendor_model.clone());
        let url = format!("{}/chat/completions", self.base_url.trim_end_matches('/'));
        let mut req = self.http.post(url).json(&body);
        if let Some(var) = &self.api_key_env {
            let key = std::env::var(var)
                .map_err(|_| format!("the environment variable {var} is not set"))?;
            req = req.bearer_auth(key);
        }
        req.send()
            .await
            .map_err(|_| format!("the server of model `{}` cannot be reached", self.name))
    }

    /// Whether the model can be used now: its API key (if it names one) is in
    /// the environment and its server answers HTTP at all within two seconds.
    pub async fn available(&self) -> bool {
        if let Some(var) = &self.api_key_env
            && std::env::var_os(var).is_none()
        {
            return false;
        }
        self.http
            .get(&self.base_url)
            .timeout(PROBE_TIMEOUT)
            .send()
            .await
            .is_ok()
    }
}

/// Every configured model, by name and alias.
#[derive(Debug, Clone, Default)]
pub struct ModelRegistry {
    entries: Vec<Arc<ModelEntry>>,
}

impl ModelRegistry {
    /// # Errors
    /// A model whose provider cannot be built (named).
    pub fn from_config(models: &[ModelConfig], http: &reqwest::Client) -> Result<Self, String> {
        let mut entries = Vec::with_capacity(models.len());
        for m in models {
            let kind = match m.provider.as_str() {
                "openai" => ProviderKind::Openai,
                "anthropic" => ProviderKind::Anthropic,
                "gemini" => ProviderKind::Gemini,
                "ollama" => ProviderKind::Ollama,
                other => return Err(format!("model `{}`: unknown provider `{other}`", m.name)),
            };
            let provider = build_provider(
                kind,
                m.model.clone().unwrap_or_else(|| m.name.clone()),
                m.base_url.clone(),
                m.api_key_env.clone(),
                m.inputs.as_deref(),
                http,
            )
            .map_err(|e| format!("model `{}`: {e}", m.name))?;
            entries.push(Arc::new(ModelEntry {
                name: m.name.clone(),
                provider_name: m.provider.clone(),
                aliases: m.aliases.clone(),
                provider,
                base_url: m
                    .base_url
                    .clone()
                    .unwrap_or_else(|| super::providers::default_base_url(kind).to_owned()),
                api_key_env: m.api_key_env.clone(),
                vendor_model: m.model.clone().unwrap_or_else(|| m.name.clone()),
                price: m.price.map(|p| super::definition::Price {
                    prompt_per_million: p.prompt_per_million,
                    completion_per_million: p.completion_per_million,
                }),
                http: http.clone(),
            }));
        }
        Ok(Self { entries })
    }

    /// The model called `name`, or with `name` as an alias.
    pub fn resolve(&self, name: &str) -> Option<Arc<ModelEntry>> {
        self.entries
            .iter()
            .find(|e| e.name == name || e.aliases.iter().any(|a| a == name))
            .cloned()
    }

    /// Every model, in configuration order.
    pub fn all(&self) -> &[Arc<ModelEntry>] {
        &self.entries
    }
}
