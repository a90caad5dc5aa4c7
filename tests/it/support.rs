//! The test harness: start a server, connect clients, read envelopes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use agentwire::config::Settings;
use futures_util::{SinkExt, StreamExt};
use jsonschema::Validator;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use uuid::Uuid;

/// How long a test waits for any one message before failing.
pub const WAIT: Duration = Duration::from_secs(20);

static OUTBOUND: LazyLock<HashMap<String, Validator>> = LazyLock::new(|| {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol/outbound");
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            let schema: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let v = jsonschema::options()
                .should_validate_formats(true)
                .build(&schema)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, v)
        })
        .collect()
});

/// Panics unless `msg` is valid against its outbound schema.
pub fn assert_outbound_valid(msg: &Value) {
    let ty = msg["type"]
        .as_str()
        .unwrap_or_else(|| panic!("no type: {msg}"));
    let validator = OUTBOUND
        .get(ty)
        .unwrap_or_else(|| panic!("no outbound schema for {ty}: {msg}"));
    let errors: Vec<String> = validator.iter_errors(msg).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{ty} violates its schema: {errors:?}\n{msg}"
    );
}

/// Whether this run of the suite uses PostgreSQL (`AGENTWIRE_TEST_BACKEND=postgres`).
pub fn on_postgres() -> bool {
    std::env::var("AGENTWIRE_TEST_BACKEND").is_ok_and(|b| b == "postgres")
}

/// The database of a test's data folder: its SQLite file, or (on PostgreSQL)
/// a fresh database whose URL is kept in the folder so a restart reopens it.
pub async fn database_url(dir: &Path) -> String {
    if !on_postgres() {
        return format!("sqlite://{}", dir.join("data/agentwire.db").display());
    }
    let kept = dir.join("postgres_url");
    if let Ok(url) = std::fs::read_to_string(&kept) {
        return url;
    }
    let server =
        agentwire::testing::postgres().expect("AGENTWIRE_TEST_BACKEND=postgres needs PostgreSQL");
    let url = server.fresh_database().await;
    std::fs::write(&kept, &url).unwrap();
    url
}

/// Every folder where the server's data may land (the SQLite folder, or the
/// test PostgreSQL's data directory).
pub fn storage_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![dir.join("data")];
    if on_postgres()
        && let Some(pg) = agentwire::testing::postgres().and_then(|s| s.data_dir.clone())
    {
        dirs.push(pg);
    }
    dirs
}

/// Options of a test server.
#[derive(Default, Clone)]
pub struct Opts {
    pub settings: Settings,
    /// Agent files to write into the agents folder: `(file name, YAML)`.
    pub agents: Vec<(String, String)>,
}

/// A server running inside the test process.
pub struct Server {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Server {
    pub async fn start() -> Self {
        Self::start_with(Opts::default()).await
    }

    pub async fn start_with(opts: Opts) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, opts).await
    }

    /// Starts on an existing data folder (to reopen a database).
    pub async fn start_in(dir: tempfile::TempDir, opts: Opts) -> Self {
        let mut settings = opts.settings;
        // A configuration file that spreads chats over databases names them.
        let spread = settings
            .config
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .is_some_and(|t| t.contains("[[databases]]"));
        if settings.database_url.is_none() && !spread {
            settings.database_url = Some(database_url(dir.path()).await);
        }
        // The cluster suite's NATS pass: every node of a cluster on NATS.
        if settings.nats_url.is_none()
            && (spread
                || settings
                    .database_url
                    .as_deref()
                    .is_some_and(|u| u.starts_with("postgres")))
        {
            settings.nats_url = crate::nats::cluster_nats_url();
        }
        let agents = settings
            .agents_dir
            .get_or_insert_with(|| dir.path().join("agents"));
        std::fs::create_dir_all(&agents).unwrap();
        for (name, yaml) in &opts.agents {
            // A name may have a folder (`workflows/x.yaml`).
            let path = agents.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, yaml).unwrap();
        }
        settings.shutdown_grace_seconds.get_or_insert(5);
        // A title is one more envelope after a chat's first run (and, by a
        // model, one more request to a test's scripted model server): only
        // the tests of titles ask for them (`title_model: Some("")`: the
        // chat's own model, the default).
        settings.auto_titles.get_or_insert(false);
        settings.title_model.get_or_insert_with(|| "none".into());
        let config = settings.resolve().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(agentwire::run(config, listener, async move {
            let _ = stopped.await;
        }));
        // Serving once /healthz answers; a server that failed to start says why.
        loop {
            if task.is_finished() {
                panic!("server failed to start: {:?}", task.await.unwrap());
            }
            if let Ok(Ok((200, _))) =
                tokio::time::timeout(WAIT, http_get_checked(addr, "/healthz")).await
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Self {
            addr,
            dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/v1/ws", self.addr)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub async fn client(&self) -> Client {
        Client::connect(&self.ws_url()).await
    }

    /// Graceful shutdown; returns the data folder for a restart.
    pub async fn stop(mut self) -> tempfile::TempDir {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(WAIT, self.task.take().unwrap())
            .await
            .expect("server stops in time")
            .unwrap()
            .unwrap();
        self.dir
    }
}

/// A WebSocket client that validates everything it receives.
pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

/// What a read saw besides a text message.
#[derive(Debug, PartialEq)]
pub enum Ended {
    Closed(Option<u16>),
    Error(String),
}

impl Client {
    pub async fn connect(url: &str) -> Self {
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
            .await
            .unwrap_or_else(|_| panic!("{url} answered the upgrade in time"))
            .expect("connect");
        Self { ws }
    }

    pub fn from_stream(ws: WebSocketStream<MaybeTlsStream<TcpStream>>) -> Self {
        Self { ws }
    }

    /// A client whose socket receive buffer is tiny, to be a slow reader.
    pub async fn connect_small_buffer(addr: SocketAddr) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let stream = socket.connect(addr).await.unwrap();
        let url = format!("ws://{addr}/v1/ws");
        let (ws, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream))
            .await
            .expect("connect");
        Self { ws }
    }

    pub async fn send(&mut self, msg: Value) {
        // A send that waits this long: the server stopped reading us.
        tokio::time::timeout(WAIT, self.ws.send(Message::text(msg.to_string())))
            .await
            .unwrap_or_else(|_| panic!("the server read {msg} in time"))
            .unwrap();
    }

    pub async fn send_raw(&mut self, msg: Message) {
        self.ws.send(msg).await.unwrap();
    }

    /// The next text message (an envelope of the native wire, checked
    /// against its schema), or how the connection ended.
    pub async fn next(&mut self) -> Result<Value, Ended> {
        let v = self.next_json().await?;
        assert_outbound_valid(&v);
        Ok(v)
    }

    /// The next text message as JSON, whatever wire it is, or how the
    /// connection ended.
    pub async fn next_json(&mut self) -> Result<Value, Ended> {
        loop {
            let msg = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("a message within the wait");
            match msg {
                Some(Ok(Message::Text(t))) => {
                    return Ok(serde_json::from_str(&t).expect("server sends JSON"));
                }
                Some(Ok(Message::Close(frame))) => {
                    return Err(Ended::Closed(frame.map(|f| f.code.into())));
                }
                Some(Ok(Message::Binary(_))) => panic!("server sent a binary frame"),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(Ended::Error(e.to_string())),
                None => return Err(Ended::Closed(None)),
            }
        }
    }

    /// The next text message; panics if the connection ends.
    pub async fn recv(&mut self) -> Value {
        self.next()
            .await
            .unwrap_or_else(|e| panic!("connection ended: {e:?}"))
    }

    /// Reads until a message matches; returns everything read, the match last.
    pub async fn recv_until(&mut self, mut pred: impl FnMut(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let v = self.recv().await;
            let done = pred(&v);
            seen.push(v);
            if done {
                return seen;
            }
        }
    }

    /// Reads the chat's envelopes up to and including its `chat.run_complete`.
    pub async fn until_complete(&mut self, chat: Uuid) -> Vec<Value> {
        self.recv_until(|v| v["type"] == "chat.run_complete" && v["chat_id"] == chat.to_string())
            .await
    }

    /// The next message of a type; panics on anything else first.
    pub async fn expect(&mut self, ty: &str) -> Value {
        let v = self.recv().await;
        assert_eq!(v["type"], ty, "expected {ty}, got {v}");
        v
    }

    pub async fn start(&mut self, chat: Uuid, message: &str) {
        self.start_with(chat, "demo", message).await;
    }

    pub async fn start_with(&mut self, chat: Uuid, agent: &str, message: &str) {
        self.send(
            json!({"type": "chat.start", "chat_id": chat, "agent": agent, "message": message}),
        )
        .await;
    }

    pub async fn say(&mut self, chat: Uuid, text: &str) {
        self.send(json!({"type": "user.message", "chat_id": chat, "text": text}))
            .await;
    }

    pub async fn resume(&mut self, chat: Uuid, last: u64) {
        self.send(json!({"type": "client.resume", "chat_id": chat, "lastClientIndex": last}))
            .await;
    }

    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// A message as stored: without its `replay` mark.
pub fn without_replay(m: &Value) -> Value {
    let mut m = m.clone();
    m.as_object_mut().unwrap().remove("replay");
    m
}

/// The `type`s of a list of messages.
pub fn types(msgs: &[Value]) -> Vec<&str> {
    msgs.iter().map(|m| m["type"].as_str().unwrap()).collect()
}

/// The `seq`s of a list of messages (those that have one).
/// The user's texts and the agents' answers (`chat.text`), as `who: text`.
pub fn turns(msgs: &[Value]) -> Vec<String> {
    msgs.iter()
        .filter(|m| m["type"] == "chat.text")
        .map(|m| {
            format!(
                "{}: {}",
                m["agent"].as_str().unwrap(),
                m["content"].as_str().unwrap()
            )
        })
        .collect()
}

pub fn seqs(msgs: &[Value]) -> Vec<u64> {
    msgs.iter().filter_map(|m| m["seq"].as_u64()).collect()
}

/// The last `chat.text` of a list of messages.
pub fn last_text(msgs: &[Value]) -> String {
    msgs.iter()
        .rev()
        .find(|m| m["type"] == "chat.text")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Asserts that `seqs` is exactly `1..=n`.
pub fn assert_gap_free(seqs: &[u64]) {
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(
        seqs,
        expected.as_slice(),
        "seqs are not 1..=N without gaps or duplicates"
    );
}

async fn http_get_checked(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    TcpStream::connect(addr).await?;
    Ok(http_get(addr, path, &[]).await)
}

/// A JSON request; returns the status and the parsed body (`null` if none).
pub async fn http_json(server: &Server, method: &str, path: &str, body: &str) -> (u16, Value) {
    let headers = [("content-type", "application/json")];
    let (status, text) = http_request(server.addr, method, path, &headers, body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A plain HTTP GET; returns the status code and body.
pub async fn http_get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    http_request(addr, "GET", path, headers, "").await
}

/// A plain HTTP/1.1 request; returns the status code and body.
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    let status = out.split(' ').nth(1).unwrap().parse().unwrap();
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

/// A free port on 127.0.0.1 (free when asked; good enough for tests).
pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// An address that refuses connections for as long as the socket lives:
/// bound, never listened on, so no other test's server can take its port
/// meanwhile (a free port let go could be).
pub fn refused_addr() -> (tokio::net::TcpSocket, SocketAddr) {
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = held.local_addr().unwrap();
    (held, addr)
}

/// Waits until something accepts connections on `addr`.
pub async fn wait_for(addr: SocketAddr) {
    for _ in 0..200 {
        if TcpStream::connect(addr).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on {addr}");
}

/// What a child wrote on its (piped) stdout, once it is killed.
pub async fn log_when_killed(mut child: tokio::process::Child) -> String {
    use tokio::io::AsyncReadExt;
    child.start_kill().unwrap();
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_to_string(&mut out).await.unwrap();
    out
}

/// The real `agentwire` binary (killed when dropped) on `database_url`, with
/// its agents in `agents` and `extra` flags; returns once `/healthz` is 200.
pub async fn spawn_agentwire(
    database_url: &str,
    agents: &Path,
    extra: &[&str],
) -> (tokio::process::Child, SocketAddr) {
    spawn_agentwire_with(database_url, agents, extra, |_| {}).await
}

/// [`spawn_agentwire`], its command changed by `configure` first (more
/// environment, its log piped).
pub async fn spawn_agentwire_with(
    database_url: &str,
    agents: &Path,
    extra: &[&str],
    configure: impl FnOnce(&mut tokio::process::Command),
) -> (tokio::process::Child, SocketAddr) {
    let addr = free_addr();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"));
    command
        .args([
            "serve",
            "--listen",
            &addr.to_string(),
            "--database-url",
            database_url,
        ])
        .arg("--agents")
        .arg(agents)
        .args(extra)
        .env("RUST_LOG", "error")
        // As `Server`: no titles unless a test asks.
        .env("AGENTWIRE_AUTO_TITLES", "false")
        .env("AGENTWIRE_TITLE_MODEL", "none")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    // The cluster suite's NATS pass: every node of a cluster on NATS.
    if database_url.starts_with("postgres")
        && let Some(nats) = crate::nats::cluster_nats_url()
    {
        command.env("AGENTWIRE_NATS_URL", nats);
    }
    configure(&mut command);
    let child = command.spawn().expect("start agentwire");
    for _ in 0..200 {
        if TcpStream::connect(addr).await.is_ok() && http_get(addr, "/healthz", &[]).await.0 == 200
        {
            return (child, addr);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("agentwire did not become healthy on {addr}");
}
