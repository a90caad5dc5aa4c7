//! The HTTP providers an agent file or `[[models]]` entry can name.

use std::sync::Arc;

use super::definition::ProviderKind;
use crate::llm::{Anthropic, Endpoint, Gemini, Ollama, OpenAi, Provider};

/// The default endpoint of each HTTP provider.
pub(super) fn default_base_url(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "https://api.openai.com/v1",
        ProviderKind::Anthropic => "https://api.anthropic.com",
        ProviderKind::Gemini => "https://generativelanguage.googleapis.com",
        ProviderKind::Ollama | ProviderKind::Scripted => "http://127.0.0.1:11434",
    }
}

/// An HTTP provider of `kind` for model `name`.
///
/// # Errors
/// A message naming the field (`base_url: …`).
pub fn build_provider(
    kind: ProviderKind,
    name: String,
    base_url: Option<String>,
    api_key_env: Option<String>,
    http: &reqwest::Client,
) -> Result<Arc<dyn Provider>, String> {
    let base = base_url.unwrap_or_else(|| default_base_url(kind).to_owned());
    reqwest::Url::parse(&base).map_err(|e| format!("base_url: {e}"))?;
    let endpoint = Endpoint {
        client: http.clone(),
        base_url: base.trim_end_matches('/').to_owned(),
        model: name,
        api_key_env,
    };
    Ok(match kind {
        ProviderKind::Openai => Arc::new(OpenAi::new(endpoint)),
        ProviderKind::Anthropic => Arc::new(Anthropic::new(endpoint)),
        ProviderKind::Gemini => Arc::new(Gemini::new(endpoint)),
        ProviderKind::Ollama => Arc::new(Ollama::new(endpoint)),
        ProviderKind::Scripted => {
            return Err("provider: scripted needs an agent file's script".into());
        }
    })
}
