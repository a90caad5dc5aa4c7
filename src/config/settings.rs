//! The settings as the user writes them: flags and environment variables
//! (clap) and `agentwire.toml` (serde), every key optional; `mod.rs`
//! resolves them into a [`super::Config`].

use std::path::PathBuf;

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
#[derive(Debug, Subcommand, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the server (the default when no subcommand is given).
    Serve,
    /// Rebuild the search index and every chat's title, preview and last
    /// activity from the log, then exit. SQLite: with the server stopped
    /// (the file is refused while a server holds it). PostgreSQL: at a
    /// quiet time or with the nodes stopped (commits that log a text wait
    /// until the rebuild commits).
    Reindex,
    /// Manage service keys: bearer credentials for backends, with scopes,
    /// for the server API (`/v1/server/…`). Works beside a running server.
    Keys {
        #[command(subcommand)]
        action: KeysCommand,
    },
}

/// `agentwire keys …`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum KeysCommand {
    /// Make a key and print it (once: only its hash is stored).
    Create {
        /// A name for the key (one live key per name).
        #[arg(long)]
        name: String,
        /// What it may do, comma-separated: publish, read, admin.
        #[arg(long)]
        scopes: String,
    },
    /// List the keys (never the keys themselves).
    List,
    /// Revoke a key, by id or name.
    Revoke {
        /// The key's id or name.
        key: String,
    },
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
    /// NATS server(s) for several nodes' commit notices, `nats://host:4222`
    /// (comma-separated) [default: none: PostgreSQL's NOTIFY].
    #[arg(
        long,
        env = "AGENTWIRE_NATS_URL",
        global = true,
        hide_env_values = true
    )]
    pub nats_url: Option<String>,
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
    /// The identity provider's issuer URL for jwt mode: `iss` must equal
    /// it, and its keys come from OpenID Connect discovery unless
    /// `jwt_jwks_url` names them.
    #[arg(long, env = "AGENTWIRE_JWT_ISSUER", global = true)]
    pub jwt_issuer: Option<String>,
    /// The URL of the identity provider's JWKS (keys fetched, cached,
    /// refreshed on an unknown `kid`).
    #[arg(long, env = "AGENTWIRE_JWT_JWKS_URL", global = true)]
    pub jwt_jwks_url: Option<String>,
    /// The audiences a token may name in `aud`, comma-separated (one must
    /// match); unset, `aud` is not checked.
    #[arg(long, env = "AGENTWIRE_JWT_AUDIENCE", global = true)]
    pub jwt_audience: Option<String>,
    /// The claim that holds the user id [default: sub].
    #[arg(long, env = "AGENTWIRE_JWT_USER_CLAIM", global = true)]
    pub jwt_user_claim: Option<String>,
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
    /// A schedule's due time found later than this many seconds was missed
    /// (no node ran): its `missed` policy applies [default: 60].
    #[arg(long, env = "AGENTWIRE_SCHEDULE_GRACE_SECONDS", global = true)]
    pub schedule_grace_seconds: Option<u64>,
    /// The shortest time between a schedule's due times [default: 60].
    #[arg(long, env = "AGENTWIRE_SCHEDULE_MIN_INTERVAL_SECONDS", global = true)]
    pub schedule_min_interval_seconds: Option<u64>,
    /// The endpoint webhooks are sent to (none: no webhooks).
    #[arg(long, env = "AGENTWIRE_WEBHOOK_URL", global = true)]
    pub webhook_url: Option<String>,
    /// The webhooks' signing secret: `whsec_` and base64, or any text of at
    /// least 16 bytes.
    #[arg(
        long,
        env = "AGENTWIRE_WEBHOOK_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub webhook_secret: Option<String>,
    /// Seconds one webhook request may take; a node holds an event it sends
    /// for twice that, then another may send it [default: 15].
    #[arg(long, env = "AGENTWIRE_WEBHOOK_TIMEOUT_SECONDS", global = true)]
    pub webhook_timeout_seconds: Option<u64>,
    /// Send `input.requested` and `approval.requested` again every this many
    /// seconds while the person has not answered, with how long they have
    /// waited [default: none, sent once].
    #[arg(long, env = "AGENTWIRE_WEBHOOK_REMIND_SECONDS", global = true)]
    pub webhook_remind_seconds: Option<u64>,
    /// Tokens one user's runs may use per day (UTC); 0: no limit [default: 0].
    #[arg(long, env = "AGENTWIRE_QUOTA_USER_TOKENS_PER_DAY", global = true)]
    pub quota_user_tokens_per_day: Option<u64>,
    /// Tokens one user's runs may use per month (UTC) [default: 0, none].
    #[arg(long, env = "AGENTWIRE_QUOTA_USER_TOKENS_PER_MONTH", global = true)]
    pub quota_user_tokens_per_month: Option<u64>,
    /// What one user's runs may cost per day, in the prices' currency
    /// [default: 0, none].
    #[arg(long, env = "AGENTWIRE_QUOTA_USER_COST_PER_DAY", global = true)]
    pub quota_user_cost_per_day: Option<f64>,
    /// What one user's runs may cost per month [default: 0, none].
    #[arg(long, env = "AGENTWIRE_QUOTA_USER_COST_PER_MONTH", global = true)]
    pub quota_user_cost_per_month: Option<f64>,
    /// Runs one user may have in flight at once, on every node together
    /// [default: 0, none].
    #[arg(long, env = "AGENTWIRE_QUOTA_USER_CONCURRENT_RUNS", global = true)]
    pub quota_user_concurrent_runs: Option<u32>,
    /// Schedules one user may have [default: 100].
    #[arg(long, env = "AGENTWIRE_MAX_SCHEDULES_PER_USER", global = true)]
    pub max_schedules_per_user: Option<u64>,
    /// Continue the runs a restart cut off from the log instead of ending
    /// them `interrupted` (agent, group and template runs; a workflow cut
    /// off during its action is not run again) [default: true].
    #[arg(long, env = "AGENTWIRE_CONTINUE_RUNS_AFTER_RESTART", global = true)]
    pub continue_runs_after_restart: Option<bool>,
    /// The agent of the SSE routes when the request names none [default: demo].
    #[arg(long, env = "AGENTWIRE_DEFAULT_AGENT", global = true)]
    pub default_agent: Option<String>,
    /// The model (of `[[models]]`) that titles chats after their first
    /// exchange; `none`: their first words [default: the chat's own model].
    #[arg(long, env = "AGENTWIRE_TITLE_MODEL", global = true)]
    pub title_model: Option<String>,
    /// Title chats after their first run (`false`: only renames title them)
    /// [default: true].
    #[arg(long, env = "AGENTWIRE_AUTO_TITLES", global = true)]
    pub auto_titles: Option<bool>,
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
    /// Host names served besides loopback ones in auth mode none,
    /// comma-separated [default: none].
    #[arg(
        long,
        env = "AGENTWIRE_ALLOWED_HOSTS",
        global = true,
        value_delimiter = ','
    )]
    pub allowed_hosts: Option<Vec<String>>,
    /// Outbound queue per connection, in bytes [default: 8388608].
    #[arg(long, env = "AGENTWIRE_OUTBOUND_QUEUE_BYTES", global = true)]
    pub outbound_queue_bytes: Option<usize>,
    /// Seconds a client has to send a request's headers (and an idle
    /// keep-alive connection stays open) [default: 15].
    #[arg(long, env = "AGENTWIRE_HTTP_HEADER_TIMEOUT_SECONDS", global = true)]
    pub http_header_timeout_seconds: Option<u64>,
    /// Seconds a client has to send a request's body [default: 30].
    #[arg(long, env = "AGENTWIRE_HTTP_BODY_TIMEOUT_SECONDS", global = true)]
    pub http_body_timeout_seconds: Option<u64>,
    /// New chats per user per minute; 0: no limit [default: 120].
    #[arg(long, env = "AGENTWIRE_RATE_CHATS_PER_MINUTE", global = true)]
    pub rate_chats_per_minute: Option<u32>,
    /// User turns per user per minute; 0: no limit [default: 600].
    #[arg(long, env = "AGENTWIRE_RATE_MESSAGES_PER_MINUTE", global = true)]
    pub rate_messages_per_minute: Option<u32>,
    /// Requests per service key per minute, on each node (besides the
    /// limits of the users it acts for); 0: no limit [default: 6000].
    #[arg(long, env = "AGENTWIRE_RATE_KEY_REQUESTS_PER_MINUTE", global = true)]
    pub rate_key_requests_per_minute: Option<u32>,
    /// Inbound WebSocket messages (pings included) per connection per
    /// second; 0: no limit [default: 100].
    #[arg(long, env = "AGENTWIRE_RATE_FRAMES_PER_SECOND", global = true)]
    pub rate_frames_per_second: Option<u32>,
    /// Open SSE streams per user; 0: no limit [default: 64].
    #[arg(long, env = "AGENTWIRE_MAX_STREAMS_PER_USER", global = true)]
    pub max_streams_per_user: Option<u32>,
    /// Open WebSocket connections per user; 0: no limit [default: 256].
    #[arg(long, env = "AGENTWIRE_MAX_SOCKETS_PER_USER", global = true)]
    pub max_sockets_per_user: Option<u32>,
    /// Runs in flight per user (per node); 0: no limit [default: 32].
    #[arg(long, env = "AGENTWIRE_MAX_RUNS_PER_USER", global = true)]
    pub max_runs_per_user: Option<u32>,
    /// Versions that may follow one point of a conversation (edits and
    /// regenerates there) [default: 32].
    #[arg(long, env = "AGENTWIRE_MAX_VERSIONS_PER_POINT", global = true)]
    pub max_versions_per_point: Option<usize>,
    /// Versions a chat's edits and regenerates may make; its switches, ten
    /// times as many [default: 1000].
    #[arg(long, env = "AGENTWIRE_MAX_BRANCHES_PER_CHAT", global = true)]
    pub max_branches_per_chat: Option<usize>,
    /// The key that encrypts users' database passwords: 32 bytes, hex or
    /// base64 (seed 003's MASTER_ENCRYPTION_KEY is read too).
    #[arg(
        long,
        env = "AGENTWIRE_MASTER_KEY",
        global = true,
        hide_env_values = true
    )]
    pub master_key: Option<String>,
    /// The folder SQLite connections may name files in [default: none: no
    /// SQLite connections].
    #[arg(long, env = "AGENTWIRE_CONNECTION_FILES_DIR", global = true)]
    pub connection_files_dir: Option<PathBuf>,
    /// Loopback or private hosts PostgreSQL connections may name anyway
    /// [default: none].
    #[arg(
        long,
        env = "AGENTWIRE_CONNECTION_HOSTS",
        global = true,
        value_delimiter = ','
    )]
    pub connection_hosts: Option<Vec<String>>,
    /// Largest file a user may upload, in bytes [default: 52428800].
    #[arg(long, env = "AGENTWIRE_MAX_FILE_BYTES", global = true)]
    pub max_file_bytes: Option<u64>,
    /// Bytes of files one user may keep (each content once) [default:
    /// 1073741824].
    #[arg(long, env = "AGENTWIRE_MAX_USER_FILE_BYTES", global = true)]
    pub max_user_file_bytes: Option<u64>,
    /// Files one message may attach (1 to 32) [default: 10].
    #[arg(long, env = "AGENTWIRE_MAX_FILES_PER_MESSAGE", global = true)]
    pub max_files_per_message: Option<usize>,
    /// Bytes of files a message may carry inline (the AI SDK's data URLs,
    /// AG-UI's base64), on top of `max_message_bytes` for the body of
    /// those routes [default: 8388608].
    #[arg(long, env = "AGENTWIRE_MAX_INLINE_FILE_BYTES", global = true)]
    pub max_inline_file_bytes: Option<usize>,
    /// Origins (`https://cdn.example.com`) whose URLs a message's file may
    /// name for the server to fetch, comma separated [default: none: the
    /// server fetches no URL].
    #[arg(
        long,
        env = "AGENTWIRE_FILE_FETCH_ORIGINS",
        global = true,
        value_delimiter = ','
    )]
    pub file_fetch_origins: Option<Vec<String>>,
    /// Media types a file may have, as sniffed from its content, comma
    /// separated [default: images (PNG, JPEG, GIF, WebP), PDF, and text:
    /// plain, CSV, Markdown, JSON].
    #[arg(
        long,
        env = "AGENTWIRE_FILE_MEDIA_TYPES",
        global = true,
        value_delimiter = ','
    )]
    pub file_media_types: Option<Vec<String>>,
    /// Tests only (no file key): milliseconds a run continued after a
    /// restart waits before it starts, so a test can answer one of its
    /// requests before it waits on it again.
    #[arg(
        long,
        env = "AGENTWIRE_TEST_CONTINUE_DELAY_MS",
        global = true,
        hide = true
    )]
    pub test_continue_delay_ms: Option<u64>,
}

/// `agentwire.toml`: the same keys as the flags, snake_case.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSettings {
    pub(super) listen: Option<String>,
    pub(super) database_url: Option<String>,
    pub(super) database_pool_size: Option<u32>,
    pub(super) nats_url: Option<String>,
    pub(super) agents_dir: Option<PathBuf>,
    pub(super) auth: Option<AuthMode>,
    pub(super) jwt_secret: Option<String>,
    pub(super) jwt_public_key: Option<PathBuf>,
    pub(super) jwt_issuer: Option<String>,
    pub(super) jwt_jwks_url: Option<String>,
    pub(super) jwt_audience: Option<String>,
    pub(super) jwt_user_claim: Option<String>,
    pub(super) input_timeout_seconds: Option<u64>,
    pub(super) ui_timeout_seconds: Option<u64>,
    pub(super) max_message_bytes: Option<usize>,
    pub(super) outbound_queue: Option<usize>,
    pub(super) idle_chat_seconds: Option<u64>,
    pub(super) schedule_grace_seconds: Option<u64>,
    pub(super) schedule_min_interval_seconds: Option<u64>,
    pub(super) max_schedules_per_user: Option<u64>,
    pub(super) quota_user_tokens_per_day: Option<u64>,
    pub(super) quota_user_tokens_per_month: Option<u64>,
    pub(super) quota_user_cost_per_day: Option<f64>,
    pub(super) quota_user_cost_per_month: Option<f64>,
    pub(super) quota_user_concurrent_runs: Option<u32>,
    pub(super) webhook_url: Option<String>,
    pub(super) webhook_secret: Option<String>,
    pub(super) webhook_timeout_seconds: Option<u64>,
    pub(super) webhook_remind_seconds: Option<u64>,
    pub(super) shutdown_grace_seconds: Option<u64>,
    pub(super) continue_runs_after_restart: Option<bool>,
    pub(super) default_agent: Option<String>,
    pub(super) title_model: Option<String>,
    pub(super) auto_titles: Option<bool>,
    pub(super) log_format: Option<LogFormat>,
    pub(super) cors_origins: Option<Vec<String>>,
    pub(super) allowed_hosts: Option<Vec<String>>,
    pub(super) outbound_queue_bytes: Option<usize>,
    pub(super) http_header_timeout_seconds: Option<u64>,
    pub(super) http_body_timeout_seconds: Option<u64>,
    pub(super) rate_chats_per_minute: Option<u32>,
    pub(super) rate_messages_per_minute: Option<u32>,
    pub(super) rate_key_requests_per_minute: Option<u32>,
    pub(super) rate_frames_per_second: Option<u32>,
    pub(super) max_streams_per_user: Option<u32>,
    pub(super) max_sockets_per_user: Option<u32>,
    pub(super) max_runs_per_user: Option<u32>,
    pub(super) max_versions_per_point: Option<usize>,
    pub(super) max_branches_per_chat: Option<usize>,
    pub(super) master_key: Option<String>,
    pub(super) connection_files_dir: Option<PathBuf>,
    pub(super) connection_hosts: Option<Vec<String>>,
    pub(super) max_file_bytes: Option<u64>,
    pub(super) max_user_file_bytes: Option<u64>,
    pub(super) max_files_per_message: Option<usize>,
    pub(super) max_inline_file_bytes: Option<usize>,
    pub(super) file_fetch_origins: Option<Vec<String>>,
    pub(super) file_media_types: Option<Vec<String>>,
    #[serde(default)]
    pub(super) models: Vec<ModelConfig>,
    /// Chats spread over several PostgreSQL databases (`[[databases]]`).
    #[serde(default)]
    pub(super) databases: Vec<DatabaseEntry>,
    /// Traces (`[telemetry]`).
    pub(super) telemetry: Option<super::telemetry::TelemetryFile>,
}

/// One of the PostgreSQL databases chats are spread over (`[[databases]]`
/// in `agentwire.toml`; the first holds what belongs to no chat).
#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatabaseEntry {
    /// What places chats (never change it: a chat's database is chosen by
    /// its id and the names).
    pub name: String,
    /// `postgres://…` (may hold a password: never logged).
    pub url: String,
}

impl std::fmt::Debug for DatabaseEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseEntry")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
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
    /// The kinds of file it reads besides text (`image`, `pdf`) [default:
    /// both for `anthropic` and `gemini`, neither for `openai` and `ollama`].
    #[serde(default)]
    pub inputs: Option<Vec<String>>,
    /// Other names for it (`qwen` for `qwen3-8b`).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// What it costs, per million tokens (a chat switched to it is priced
    /// at it) [default: none, unpriced].
    #[serde(default)]
    pub price: Option<ModelPrice>,
}

/// A `[[models]]` entry's price, per million tokens.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    pub prompt_per_million: f64,
    pub completion_per_million: f64,
}
