//! Configuration: `agentwire.toml`, then environment, then flags (each layer
//! overrides the one before), validated once at start-up into [`Config`].
//!
//! Depends on nothing else in the crate. Every key has the same name in the
//! file (`listen`), the environment (`AGENTWIRE_LISTEN`) and on the command
//! line (`--listen`), so an error can name the key whatever layer set it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Deserialize;

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "agentwire",
    version,
    about = "A durable, resumable backend between AI agents and chat UIs"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub settings: Settings,
}

/// What to do. `serve` is the default.
#[derive(Debug, Subcommand, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Run the server (the default when no subcommand is given).
    Serve,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Authentication mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Every request is user `dev` (a warning is logged at start).
    #[default]
    None,
    /// Bearer JWTs; the user is the token's `sub`.
    Jwt,
}

/// Every setting, as flags and environment variables. All optional here: the
/// file and the defaults fill what is missing.
#[derive(Debug, Args, Default, Clone)]
pub struct Settings {
    /// Configuration file [default: ./agentwire.toml if it exists].
    #[arg(long, env = "AGENTWIRE_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "AGENTWIRE_LISTEN", global = true)]
    pub listen: Option<String>,
    /// sqlite://PATH or postgres://… [default: sqlite://./data/agentwire.db].
    #[arg(
        long,
        env = "AGENTWIRE_DATABASE_URL",
        global = true,
        hide_env_values = true
    )]
    pub database_url: Option<String>,
    /// PostgreSQL connections per node [default: 10].
    #[arg(long, env = "AGENTWIRE_DATABASE_POOL_SIZE", global = true)]
    pub database_pool_size: Option<u32>,
    /// Folder of agent YAML files [default: ./agents].
    #[arg(long = "agents", env = "AGENTWIRE_AGENTS_DIR", global = true)]
    pub agents_dir: Option<PathBuf>,
    /// none or jwt [default: none].
    #[arg(long, env = "AGENTWIRE_AUTH", global = true)]
    pub auth: Option<AuthMode>,
    /// HS256 secret for jwt mode.
    #[arg(
        long,
        env = "AGENTWIRE_JWT_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub jwt_secret: Option<String>,
    /// Path to an RS256 public key (PEM) for jwt mode.
    #[arg(long, env = "AGENTWIRE_JWT_PUBLIC_KEY", global = true)]
    pub jwt_public_key: Option<PathBuf>,
    /// Seconds an input request waits for an answer [default: 300].
    #[arg(long, env = "AGENTWIRE_INPUT_TIMEOUT_SECONDS", global = true)]
    pub input_timeout_seconds: Option<u64>,
    /// Seconds a UI tool call waits for the client's result [default: 300].
    #[arg(long, env = "AGENTWIRE_UI_TIMEOUT_SECONDS", global = true)]
    pub ui_timeout_seconds: Option<u64>,
    /// Largest inbound WebSocket message in bytes [default: 1048576].
    #[arg(long, env = "AGENTWIRE_MAX_MESSAGE_BYTES", global = true)]
    pub max_message_bytes: Option<usize>,
    /// Outbound queue per connection, in messages [default: 4096].
    #[arg(long, env = "AGENTWIRE_OUTBOUND_QUEUE", global = true)]
    pub outbound_queue: Option<usize>,
    /// Seconds an idle chat stays in memory [default: 60].
    #[arg(long, env = "AGENTWIRE_IDLE_CHAT_SECONDS", global = true)]
    pub idle_chat_seconds: Option<u64>,
    /// Seconds shutdown waits for runs and sockets [default: 10].
    #[arg(long, env = "AGENTWIRE_SHUTDOWN_GRACE_SECONDS", global = true)]
    pub shutdown_grace_seconds: Option<u64>,
    /// The agent of the SSE routes when the request names none [default: demo].
    #[arg(long, env = "AGENTWIRE_DEFAULT_AGENT", global = true)]
    pub default_agent: Option<String>,
    /// text or json [default: text].
    #[arg(long, env = "AGENTWIRE_LOG_FORMAT", global = true)]
    pub log_format: Option<LogFormat>,
    /// Origins allowed by CORS, comma-separated [default: none].
    #[arg(
        long,
        env = "AGENTWIRE_CORS_ORIGINS",
        global = true,
        value_delimiter = ','
    )]
    pub cors_origins: Option<Vec<String>>,
}

/// `agentwire.toml`: the same keys as the flags, snake_case.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    listen: Option<String>,
    database_url: Option<String>,
    database_pool_size: Option<u32>,
    agents_dir: Option<PathBuf>,
    auth: Option<AuthMode>,
    jwt_secret: Option<String>,
    jwt_public_key: Option<PathBuf>,
    input_timeout_seconds: Option<u64>,
    ui_timeout_seconds: Option<u64>,
    max_message_bytes: Option<usize>,
    outbound_queue: Option<usize>,
    idle_chat_seconds: Option<u64>,
    shutdown_grace_seconds: Option<u64>,
    default_agent: Option<String>,
    log_format: Option<LogFormat>,
    cors_origins: Option<Vec<String>>,
    #[serde(default)]
    models: Vec<ModelConfig>,
}

/// A model a chat can switch to (`[[models]]` in `agentwire.toml`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The name clients use.
    pub name: String,
    /// `openai`, `anthropic`, `gemini` or `ollama`.
    pub provider: String,
    /// The vendor's model name [default: `name`].
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Other names for it (`qwen` for `qwen3-8b`).
    #[serde(default)]
    pub aliases: Vec<String>,
}

/// The key that carries a JWT verification key.
#[derive(Debug, Clone)]
pub enum JwtKey {
    /// HS256 shared secret.
    Secret(String),
    /// RS256 public key, PEM bytes (read at start-up).
    RsaPem(Vec<u8>),
}

/// Authentication, resolved.
#[derive(Debug, Clone)]
pub enum AuthConfig {
    None,
    Jwt(JwtKey),
}

/// A configuration error that names the key at fault.
#[derive(Debug, thiserror::Error)]
#[error("configuration key `{key}`: {message}")]
pub struct ConfigError {
    pub key: &'static str,
    pub message: String,
}

fn bad(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key,
        message: message.into(),
    }
}

/// Where the log lives.
#[derive(Clone)]
pub enum Database {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL server (the URL may hold a password: never logged).
    Postgres { url: String, pool_size: u32 },
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Self::Postgres { pool_size, .. } => f
                .debug_struct("Postgres")
                .field("pool_size", pool_size)
                .finish_non_exhaustive(),
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Where the log lives.
    pub database: Database,
    pub agents_dir: PathBuf,
    /// Whether `agents_dir` was set explicitly (then it must exist).
    pub agents_dir_explicit: bool,
    pub auth: AuthConfig,
    pub input_timeout: Duration,
    pub ui_timeout: Duration,
    pub max_message_bytes: usize,
    pub outbound_queue: usize,
    pub idle_chat: Duration,
    pub shutdown_grace: Duration,
    pub default_agent: String,
    pub log_format: LogFormat,
    /// Models chats may switch to (file only).
    pub models: Vec<ModelConfig>,
    /// Origins allowed by CORS (`*` for any); empty: no CORS headers.
    pub cors_origins: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Settings::default()
            .resolve()
            .expect("the defaults are valid")
    }
}

impl Settings {
    /// Reads the configuration file (if any) and resolves every key.
    ///
    /// # Errors
    /// An unreadable or malformed file, or a key with a bad value; the error
    /// names the key (or the file).
    pub fn resolve(&self) -> Result<Config, ConfigError> {
        let file = match &self.config {
            Some(path) => read_file(path)?,
            None if Path::new("agentwire.toml").exists() => read_file(Path::new("agentwire.toml"))?,
            None => FileSettings::default(),
        };
        macro_rules! pick {
            ($k:ident) => {
                self.$k.clone().or(file.$k.clone())
            };
        }

        let listen_text = pick!(listen).unwrap_or_else(|| "127.0.0.1:8080".into());
        let listen: SocketAddr = listen_text
            .parse()
            .map_err(|e| bad("listen", format!("`{listen_text}` is not an address: {e}")))?;

        let url = pick!(database_url).unwrap_or_else(|| "sqlite://./data/agentwire.db".into());
        let pool_size = pick!(database_pool_size).unwrap_or(10);
        if !(1..=1000).contains(&pool_size) {
            return Err(bad("database_pool_size", "must be between 1 and 1000"));
        }
        let database = if let Some(path) = url.strip_prefix("sqlite://") {
            let path = path.split('?').next().unwrap_or_default();
            if path.is_empty() {
                return Err(bad("database_url", "sqlite:// needs a file path"));
            }
            Database::Sqlite(PathBuf::from(path))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Database::Postgres { url, pool_size }
        } else {
            return Err(bad(
                "database_url",
                "must start with sqlite:// or postgres:// (the value is not shown: it may hold a password)",
            ));
        };

        let agents_dir_explicit = pick!(agents_dir).is_some();
        let agents_dir = pick!(agents_dir).unwrap_or_else(|| PathBuf::from("agents"));

        let auth = match pick!(auth).unwrap_or_default() {
            AuthMode::None => AuthConfig::None,
            AuthMode::Jwt => match (pick!(jwt_secret), pick!(jwt_public_key)) {
                (Some(_), Some(_)) => {
                    return Err(bad(
                        "jwt_secret",
                        "set either jwt_secret or jwt_public_key, not both",
                    ));
                }
                (Some(secret), None) if secret.len() < 16 => {
                    return Err(bad("jwt_secret", "must be at least 16 bytes"));
                }
                (Some(secret), None) => AuthConfig::Jwt(JwtKey::Secret(secret)),
                (None, Some(path)) => {
                    let pem = std::fs::read(&path).map_err(|e| {
                        bad(
                            "jwt_public_key",
                            format!("cannot read {}: {e}", path.display()),
                        )
                    })?;
                    AuthConfig::Jwt(JwtKey::RsaPem(pem))
                }
                (None, None) => {
                    return Err(bad(
                        "auth",
                        "jwt mode needs jwt_secret (HS256) or jwt_public_key (RS256 PEM path)",
                    ));
                }
            },
        };

        let positive = |key: &'static str, v: Option<u64>, default: u64| match v {
            Some(0) => Err(bad(key, "must be greater than 0")),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        let input_timeout = positive("input_timeout_seconds", pick!(input_timeout_seconds), 300)?;
        let ui_timeout = positive("ui_timeout_seconds", pick!(ui_timeout_seconds), 300)?;
        let idle_chat = positive("idle_chat_seconds", pick!(idle_chat_seconds), 60)?;
        let shutdown_grace = positive("shutdown_grace_seconds", pick!(shutdown_grace_seconds), 10)?;
        let max_message_bytes = pick!(max_message_bytes).unwrap_or(1 << 20);
        if !(1024..=64 << 20).contains(&max_message_bytes) {
            return Err(bad(
                "max_message_bytes",
                "must be between 1024 and 67108864",
            ));
        }
        let outbound_queue = pick!(outbound_queue).unwrap_or(4096);
        if !(16..=1 << 20).contains(&outbound_queue) {
            return Err(bad("outbound_queue", "must be between 16 and 1048576"));
        }
        let default_agent = pick!(default_agent).unwrap_or_else(|| "demo".into());

        Ok(Config {
            listen,
            database,
            agents_dir,
            agents_dir_explicit,
            auth,
            input_timeout: Duration::from_secs(input_timeout),
            ui_timeout: Duration::from_secs(ui_timeout),
            max_message_bytes,
            outbound_queue,
            idle_chat: Duration::from_secs(idle_chat),
            shutdown_grace: Duration::from_secs(shutdown_grace),
            default_agent,
            log_format: pick!(log_format).unwrap_or_default(),
            models: validate_models(file.models.clone())?,
            cors_origins: validate_origins(pick!(cors_origins).unwrap_or_default())?,
        })
    }
}

fn validate_origins(origins: Vec<String>) -> Result<Vec<String>, ConfigError> {
    for o in &origins {
        let ok = o == "*"
            || ((o.starts_with("http://") || o.starts_with("https://")) && !o.ends_with('/'));
        if !ok {
            return Err(bad(
                "cors_origins",
                format!("`{o}` must be `*` or an origin like https://app.example.com (no path)"),
            ));
        }
    }
    Ok(origins)
}

fn validate_models(models: Vec<ModelConfig>) -> Result<Vec<ModelConfig>, ConfigError> {
    let mut names = std::collections::HashSet::new();
    for m in &models {
        if !matches!(
            m.provider.as_str(),
            "openai" | "anthropic" | "gemini" | "ollama"
        ) {
            return Err(bad(
                "models",
                format!(
                    "model `{}`: provider `{}` is not openai, anthropic, gemini or ollama",
                    m.name, m.provider
                ),
            ));
        }
        for name in std::iter::once(&m.name).chain(&m.aliases) {
            if name.is_empty() || !names.insert(name.clone()) {
                return Err(bad(
                    "models",
                    format!("the name `{name}` is empty or used twice"),
                ));
            }
        }
    }
    Ok(models)
}

fn read_file(path: &Path) -> Result<FileSettings, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad("config", format!("cannot read {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| bad("config", format!("{}: {e}", path.display())))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
