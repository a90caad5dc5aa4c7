//! Configuration: `agentwire.toml`, then environment, then flags (each layer
//! overrides the one before), validated once at start-up into [`Config`].
//!
//! Depends on nothing else in the crate. Every key has the same name in the
//! file (`listen`), the environment (`AGENTWIRE_LISTEN`) and on the command
//! line (`--listen`), so an error can name the key whatever layer set it.

mod auth;
mod files;
mod quotas;
mod settings;
mod telemetry;
mod validate;
mod webhook;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use auth::{AuthConfig, JwtConfig, JwtKey, KeySource};
pub use files::FileLimits;
pub use quotas::Quotas;
use settings::FileSettings;
pub use settings::{
    AuthMode, Cli, Command, DatabaseEntry, KeysCommand, LogFormat, ModelConfig, Settings,
};
pub use telemetry::{OtlpProtocol, Telemetry};
pub use webhook::Webhook;

/// What schedules may do.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleLimits {
    /// A due time found later than this was missed (no node ran).
    pub grace: Duration,
    /// The shortest time between two due times of one schedule.
    pub min_interval: Duration,
    /// Schedules one user may have.
    pub per_user: u64,
}

/// A configuration error that names the key at fault.
#[derive(Debug, thiserror::Error)]
#[error("configuration key `{key}`: {message}")]
pub struct ConfigError {
    pub key: &'static str,
    pub message: String,
}

/// A sibling module's refusal: the key and why.
impl From<(&'static str, String)> for ConfigError {
    fn from((key, message): (&'static str, String)) -> Self {
        Self { key, message }
    }
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
    /// A PostgreSQL server (the URL may hold a password: never logged), and
    /// the NATS server(s) commit notices travel on, if any (`nats_url`,
    /// likewise never logged).
    Postgres {
        url: String,
        pool_size: u32,
        nats: Option<String>,
        /// The databases chats are spread over (`[[databases]]`), `url`
        /// the first's; empty for one database.
        spread: Vec<DatabaseEntry>,
    },
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Self::Postgres {
                pool_size,
                nats,
                spread,
                ..
            } => f
                .debug_struct("Postgres")
                .field("pool_size", pool_size)
                .field("nats", &nats.is_some())
                .field("spread", spread)
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
    /// Versions one point of a conversation may have (`max_versions_per_point`).
    pub max_versions_per_point: usize,
    /// Versions one chat's edits and regenerates may make (`max_branches_per_chat`;
    /// its switches: ten times as many).
    pub max_branches_per_chat: usize,
    pub outbound_queue: usize,
    pub idle_chat: Duration,
    pub shutdown_grace: Duration,
    /// Schedules' limits and their missed-time grace.
    pub schedules: ScheduleLimits,
    /// What one user's runs may use per day and month.
    pub quotas: Quotas,
    /// Where webhooks go, and how.
    pub webhook: Option<Webhook>,
    /// Traces: on or off, where to, what they hold.
    pub telemetry: Telemetry,
    /// Runs cut off by a restart are continued from the log (issue 19).
    pub continue_runs: bool,
    /// Tests only: how long a continued run waits before it starts.
    pub continue_delay: Duration,
    pub default_agent: String,
    /// The model that titles chats (`None`: the chat's own; `Some("none")`:
    /// their first words).
    pub title_model: Option<String>,
    /// Title chats after their first run.
    pub auto_titles: bool,
    pub log_format: LogFormat,
    /// Models chats may switch to (file only).
    pub models: Vec<ModelConfig>,
    /// Origins allowed by CORS (`*` for any); empty: no CORS headers. In
    /// auth mode `none`, also the only cross-origin pages that may open a
    /// WebSocket or send a state-changing request.
    pub cors_origins: Vec<String>,
    /// Host names served in auth mode `none` besides loopback ones (the
    /// guard against DNS rebinding), lower case, without port.
    pub allowed_hosts: Vec<String>,
    /// The outbound queue of a connection, in bytes (besides `outbound_queue`
    /// messages): a client that lets more pile up is closed with 1013.
    pub outbound_queue_bytes: usize,
    /// How long a client may take to send a request's headers; also how long
    /// an idle keep-alive connection stays open.
    pub http_header_timeout: Duration,
    /// How long a client may take to send a request's body.
    pub http_body_timeout: Duration,
    /// Rate limits and quotas; `None`: no limit.
    pub limits: Limits,
    /// What files users may upload.
    pub files: FileLimits,
    /// Encrypts users' database passwords; `None`: passwords are refused.
    pub master_key: Option<MasterKey>,
    /// The folder SQLite connections may name files in; `None`: none may.
    pub connection_files_dir: Option<PathBuf>,
    /// Loopback or private hosts PostgreSQL connections may name anyway.
    pub connection_hosts: Vec<String>,
}

/// The master key (32 bytes). Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct MasterKey(pub [u8; 32]);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(…)")
    }
}

impl MasterKey {
    /// 32 bytes as 64 hex digits or as base64.
    ///
    /// # Errors
    /// Any other length or alphabet (the value is not repeated).
    pub fn parse(text: &str) -> Result<Self, String> {
        use base64::Engine as _;
        let text = text.trim();
        let bytes: Vec<u8> = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex digits"))
                .collect()
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(text))
                .map_err(|_| "must be 32 bytes as 64 hex digits or as base64".to_owned())?
        };
        let n = bytes.len();
        bytes
            .try_into()
            .map(Self)
            .map_err(|_| format!("must be 32 bytes, not {n}"))
    }
}

/// Rate limits and quotas (`RATE_LIMIT_EXCEEDED`); `None` turns one off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// New chats per user per minute.
    pub chats_per_minute: Option<u32>,
    /// User turns per user per minute.
    pub messages_per_minute: Option<u32>,
    /// Inbound WebSocket messages per connection per second.
    pub frames_per_second: Option<u32>,
    /// Open SSE streams per user.
    pub streams_per_user: Option<u32>,
    /// Open WebSocket connections per user.
    pub sockets_per_user: Option<u32>,
    /// Runs in flight per user, on one node.
    pub runs_per_user: Option<u32>,
    /// Requests per service key per minute, on one node.
    pub key_requests_per_minute: Option<u32>,
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

        let spread = validate::databases(&file.databases)?;
        if !spread.is_empty() && pick!(database_url).is_some() {
            return Err(bad(
                "database_url",
                "set it or [[databases]], not both (the first of [[databases]] is the main one)",
            ));
        }
        let url = match spread.first() {
            Some(first) => first.url.clone(),
            None => pick!(database_url).unwrap_or_else(|| "sqlite://./data/agentwire.db".into()),
        };
        let pool_size = pick!(database_pool_size).unwrap_or(10);
        if !(1..=1000).contains(&pool_size) {
            return Err(bad("database_pool_size", "must be between 1 and 1000"));
        }
        let nats = pick!(nats_url).filter(|u| !u.trim().is_empty());
        let database = if let Some(path) = url.strip_prefix("sqlite://") {
            let path = path.split('?').next().unwrap_or_default();
            if path.is_empty() {
                return Err(bad("database_url", "sqlite:// needs a file path"));
            }
            if nats.is_some() {
                return Err(bad(
                    "nats_url",
                    "carries several nodes' commit notices: it needs a PostgreSQL database_url",
                ));
            }
            Database::Sqlite(PathBuf::from(path))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            if let Some(n) = &nats
                && !n.split(',').all(|u| {
                    let u = u.trim();
                    u.starts_with("nats://") || u.starts_with("tls://")
                })
            {
                return Err(bad(
                    "nats_url",
                    "each address must start with nats:// or tls:// (the value is not shown: it may hold a password)",
                ));
            }
            Database::Postgres {
                url,
                pool_size,
                nats,
                spread,
            }
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
            AuthMode::Jwt => AuthConfig::Jwt(
                auth::JwtSettings {
                    secret: pick!(jwt_secret),
                    public_key: pick!(jwt_public_key),
                    issuer: pick!(jwt_issuer),
                    jwks_url: pick!(jwt_jwks_url),
                    audience: pick!(jwt_audience),
                    user_claim: pick!(jwt_user_claim),
                }
                .resolve()
                .map_err(|(key, message)| bad(key, message))?,
            ),
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
        let webhook = webhook::resolve(
            pick!(webhook_url),
            pick!(webhook_secret),
            pick!(webhook_timeout_seconds),
            pick!(webhook_remind_seconds),
        )
        .map_err(|(key, message)| bad(key, message))?;
        let quotas = Quotas::resolve(
            pick!(quota_user_tokens_per_day),
            pick!(quota_user_tokens_per_month),
            pick!(quota_user_cost_per_day),
            pick!(quota_user_cost_per_month),
            pick!(quota_user_concurrent_runs),
        )
        .map_err(|(key, message)| bad(key, message))?;
        let schedules = ScheduleLimits {
            grace: Duration::from_secs(positive(
                "schedule_grace_seconds",
                pick!(schedule_grace_seconds),
                60,
            )?),
            min_interval: Duration::from_secs(positive(
                "schedule_min_interval_seconds",
                pick!(schedule_min_interval_seconds),
                60,
            )?),
            per_user: positive("max_schedules_per_user", pick!(max_schedules_per_user), 100)?,
        };
        let max_message_bytes = pick!(max_message_bytes).unwrap_or(1 << 20);
        if !(1024..=64 << 20).contains(&max_message_bytes) {
            return Err(bad(
                "max_message_bytes",
                "must be between 1024 and 67108864",
            ));
        }
        let max_versions_per_point = pick!(max_versions_per_point).unwrap_or(32);
        if !(2..=1000).contains(&max_versions_per_point) {
            return Err(bad("max_versions_per_point", "must be between 2 and 1000"));
        }
        let max_branches_per_chat = pick!(max_branches_per_chat).unwrap_or(1000);
        if !(1..=100_000).contains(&max_branches_per_chat) {
            return Err(bad("max_branches_per_chat", "must be between 1 and 100000"));
        }
        let outbound_queue = pick!(outbound_queue).unwrap_or(4096);
        if !(16..=1 << 20).contains(&outbound_queue) {
            return Err(bad("outbound_queue", "must be between 16 and 1048576"));
        }
        let default_agent = pick!(default_agent).unwrap_or_else(|| "demo".into());
        let outbound_queue_bytes = pick!(outbound_queue_bytes).unwrap_or(8 << 20);
        if !(64 << 10..=1 << 30).contains(&outbound_queue_bytes) {
            return Err(bad(
                "outbound_queue_bytes",
                "must be between 65536 and 1073741824",
            ));
        }
        let header_timeout = positive(
            "http_header_timeout_seconds",
            pick!(http_header_timeout_seconds),
            15,
        )?;
        let body_timeout = positive(
            "http_body_timeout_seconds",
            pick!(http_body_timeout_seconds),
            30,
        )?;
        let on = |v: Option<u32>, default: u32| Some(v.unwrap_or(default)).filter(|&n| n > 0);
        let limits = Limits {
            chats_per_minute: on(pick!(rate_chats_per_minute), 120),
            messages_per_minute: on(pick!(rate_messages_per_minute), 600),
            frames_per_second: on(pick!(rate_frames_per_second), 100),
            streams_per_user: on(pick!(max_streams_per_user), 64),
            sockets_per_user: on(pick!(max_sockets_per_user), 256),
            runs_per_user: on(pick!(max_runs_per_user), 32),
            key_requests_per_minute: on(pick!(rate_key_requests_per_minute), 6000),
        };

        let master_key = pick!(master_key)
            .or_else(|| std::env::var("MASTER_ENCRYPTION_KEY").ok())
            .map(|k| MasterKey::parse(&k).map_err(|m| bad("master_key", m)))
            .transpose()?;

        let connection_files_dir = pick!(connection_files_dir);
        if let (Some(dir), Database::Sqlite(db)) = (&connection_files_dir, &database) {
            let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
            if abs(db).starts_with(abs(dir)) {
                return Err(bad(
                    "connection_files_dir",
                    "must not hold the server's own database (database_url): users could read it",
                ));
            }
        }

        let files = FileLimits::resolve(
            pick!(max_file_bytes),
            pick!(max_user_file_bytes),
            pick!(max_files_per_message),
            pick!(max_inline_file_bytes),
            pick!(file_fetch_origins),
            pick!(file_media_types),
        )
        .map_err(|(key, why)| bad(key, why))?;
        Ok(Config {
            files,
            listen,
            database,
            agents_dir,
            agents_dir_explicit,
            auth,
            input_timeout: Duration::from_secs(input_timeout),
            ui_timeout: Duration::from_secs(ui_timeout),
            max_message_bytes,
            max_versions_per_point,
            max_branches_per_chat,
            outbound_queue,
            idle_chat: Duration::from_secs(idle_chat),
            shutdown_grace: Duration::from_secs(shutdown_grace),
            schedules,
            quotas,
            webhook,
            telemetry: telemetry::resolve(file.telemetry.as_ref(), |k| std::env::var(k).ok())?,
            continue_runs: pick!(continue_runs_after_restart).unwrap_or(true),
            continue_delay: Duration::from_millis(self.test_continue_delay_ms.unwrap_or(0)),
            default_agent,
            title_model: pick!(title_model).filter(|m| !m.is_empty()),
            auto_titles: pick!(auto_titles).unwrap_or(true),
            log_format: pick!(log_format).unwrap_or_default(),
            models: validate::models(file.models.clone())?,
            cors_origins: validate::origins(pick!(cors_origins).unwrap_or_default())?,
            allowed_hosts: validate::hosts(pick!(allowed_hosts).unwrap_or_default())?,
            outbound_queue_bytes,
            http_header_timeout: Duration::from_secs(header_timeout),
            http_body_timeout: Duration::from_secs(body_timeout),
            limits,
            master_key,
            connection_files_dir,
            connection_hosts: pick!(connection_hosts).unwrap_or_default(),
        })
    }
}

fn read_file(path: &Path) -> Result<FileSettings, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad("config", format!("cannot read {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| bad("config", format!("{}: {e}", path.display())))
}

/// The `*.yaml` / `*.yml` files directly in `dir`, sorted by path (the order
/// agent and workflow files load in, so a duplicate is reported the same way
/// every time).
///
/// # Errors
/// `dir` cannot be read (`NotFound` when it does not exist).
pub fn yaml_files(dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    paths.sort();
    Ok(paths)
}

#[cfg(test)]
mod tests;
