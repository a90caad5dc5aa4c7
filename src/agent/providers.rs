//! The HTTP providers an agent file or `[[models]]` entry can name.

use std::sync::Arc;

use super::definition::ProviderKind;
use crate::llm::{Anthropic, Endpoint, Gemini, Inputs, Ollama, OpenAi, Provider};

/// The default endpoint of each HTTP provider.
pub(super) fn default_base_url(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "https://api.openai.com/v1",
        ProviderKind::Anthropic => "https://api.anthropic.com",
        ProviderKind::Gemini => "https://generativelanguage.googleapis.com",
        ProviderKind::Ollama | ProviderKind::Scripted => "http://127.0.0.1:11434",
    }
}

/// The kinds of file a model reads besides text: `inputs` as configured
/// (`image`, `pdf`), else its vendor's usual: Anthropic's and Gemini's
/// models read both; an OpenAI-compatible or Ollama server may serve a
/// model that reads neither, so it is told (`inputs = ["image"]`).
///
/// # Errors
/// A kind that is neither (named).
pub(super) fn inputs(kind: ProviderKind, configured: Option<&[String]>) -> Result<Inputs, String> {
    let max_image_bytes = match kind {
        ProviderKind::Anthropic => 5 << 20,
        _ => 20 << 20,
    };
    let Some(kinds) = configured else {
        let both = matches!(kind, ProviderKind::Anthropic | ProviderKind::Gemini);
        return Ok(Inputs {
            image: both,
            pdf: both,
            max_image_bytes,
        });
    };
    let mut inputs = Inputs {
        max_image_bytes,
        ..Inputs::default()
    };
    for k in kinds {
        match k.as_str() {
            "image" => inputs.image = true,
            "pdf" => inputs.pdf = true,
            "text" => {}
            other => {
                return Err(format!(
                    "inputs: `{other}` is not a kind of file a model reads (image, pdf, text)"
                ));
            }
        }
    }
    Ok(inputs)
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
    inputs: Option<&[String]>,
    http: &reqwest::Client,
) -> Result<Arc<dyn Provider>, String> {
    let base = base_url.unwrap_or_else(|| default_base_url(kind).to_owned());
    reqwest::Url::parse(&base).map_err(|e| format!("base_url: {e}"))?;
    let endpoint = Endpoint {
        client: http.clone(),
        base_url: base.trim_end_matches('/').to_owned(),
        model: name,
        api_key_env,
        inputs: self::inputs(kind, inputs)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_default_by_vendor_and_an_unknown_kind_is_named() {
        let both = Inputs {
            image: true,
            pdf: true,
            ..Inputs::default()
        };
        let anthropic = Inputs {
            max_image_bytes: 5 << 20,
            ..both
        };
        assert_eq!(inputs(ProviderKind::Anthropic, None), Ok(anthropic));
        assert_eq!(inputs(ProviderKind::Gemini, None), Ok(both));
        assert_eq!(inputs(ProviderKind::Openai, None), Ok(Inputs::default()));
        assert_eq!(inputs(ProviderKind::Ollama, None), Ok(Inputs::default()));
        let image = ["image".to_owned(), "text".to_owned()];
        assert_eq!(
            inputs(ProviderKind::Openai, Some(&image)),
            Ok(Inputs {
                image: true,
                ..Inputs::default()
            })
        );
        let video = ["video".to_owned()];
        let err = inputs(ProviderKind::Openai, Some(&video)).unwrap_err();
        assert!(err.contains("inputs: `video`"), "{err}");
    }
}
