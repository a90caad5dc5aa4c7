//! No stalls: a chat's actor answers every request in bounded time, whatever
//! its run is doing, and a connection is never stopped being read by one
//! chat. The soak test runs many connections of mixed valid and invalid
//! messages, random disconnects and a restart of the real binary, on the
//! store under test, and checks that nothing was lost or logged twice.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use uuid::Uuid;

use crate::support::*;

/// A run that streams as fast as the log takes it does not keep its chat
/// from reading commands: each message sent while a long burst streams is
/// answered within a batch of the run's envelopes (before, the actor read
/// its run first while the run had anything queued, so a message waited for
/// most of the burst, and a cancel could find the run over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_reads_commands_while_its_run_streams_without_pause() {
    // A queue that holds the burst: this client reads slower than it streams.
    let settings = agentwire::config::Settings {
        outbound_queue: Some(1 << 20),
        outbound_queue_bytes: Some(1 << 30),
        ..Default::default()
    };
    let server = Server::start_with(Opts {
        settings,
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "burst: 100000").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    const ASKED: usize = 10;
    for _ in 0..ASKED {
        c.say(chat, "meanwhile").await;
    }
    // Each answer is a connection frame queued when the actor answered,
    // among the envelopes it had committed by then.
    let mut words = 0;
    let mut answered = 0;
    while answered < ASKED {
        let m = c.recv().await;
        match m["type"].as_str() {
            Some("chat.print") => words += 1,
            Some("chat.error") => {
                assert_eq!(m["error_code"], "RUN_IN_PROGRESS", "{m}");
                answered += 1;
            }
            Some("chat.run_complete") => panic!("the burst ended first ({words} words)"),
            _ => {}
        }
    }
    // About a batch (at most 256 envelopes) each, at most a few when the
    // connection's reader is slow to send the next; before, 25,000 to all of
    // the burst.
    assert!(words < 12_000, "{ASKED} answers took {words} words");
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    let rest = c.until_complete(chat).await;
    assert_eq!(rest.last().unwrap()["reason"], "cancelled");
}

/// A chat that cannot answer (on PostgreSQL, another session holds its
/// lease row in an open transaction, so loading the chat waits) is a
/// `TRANSPORT_ERROR` after the registry's deadline, and the connection that
/// asked goes on being read (before, its reader waited for ever, and nothing
/// else it sent was read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_that_cannot_answer_is_a_transport_error_not_a_stall() {
    if on_postgres() {
        return; // Run once, in the default pass: it makes its own database.
    }
    let Some(postgres) = agentwire::testing::postgres() else {
        return;
    };
    let url = postgres.fresh_database().await;
    let settings = agentwire::config::Settings {
        database_url: Some(url.clone()),
        ..Default::default()
    };
    let server = Server::start_with(Opts {
        settings,
        ..Default::default()
    })
    .await;
    let chat = Uuid::new_v4();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO chat_leases (chat_id, node_id, epoch) VALUES ($1, 0, 1)")
        .bind(chat)
        .execute(&mut *holder)
        .await
        .unwrap();

    let mut c = server.client().await;
    c.resume(chat, 0).await;
    let refused = c.recv().await;
    assert_eq!(refused["error_code"], "TRANSPORT_ERROR", "{refused}");
    assert_eq!(refused["recoverable"], true);
    assert_eq!(refused["chat_id"], chat.to_string());
    c.send(json!({"type": "ping"})).await;
    assert_eq!(c.recv().await["type"], "pong");

    // Once the row is free the chat answers again (it does not exist).
    holder.rollback().await.unwrap();
    c.resume(chat, 0).await;
    assert_eq!(c.recv().await["error_code"], "RESUME_FAILED");
}

/// Connections of the soak test.
const CONNECTIONS: usize = 40;
/// What each connection does before the test checks the log.
const STEPS: usize = 14;
/// The longest any one answer may take: past it the server stalled.
const BOUND: Duration = Duration::from_secs(10);
/// How long a connection may take to find the restarted server.
const RECONNECT: Duration = Duration::from_secs(30);
/// The random choices of connection `i` come from `SEED + i`.
const SEED: u64 = 33;
/// Connections whose run waits for an answer when the server is killed:
/// they answer the moment they find the restarted server, whose continued
/// runs start late (`--test-continue-delay-ms`), so the answers come before
/// the runs wait again.
const PARKED: usize = 4;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The connection broke (the server was killed, or the client dropped it).
struct Broken;

/// One connection's client: its own chat, what it has seen of it, and the
/// user messages it sent.
struct Session {
    i: usize,
    chat: Uuid,
    rng: StdRng,
    addr: watch::Receiver<SocketAddr>,
    ws: Option<Ws>,
    /// Every envelope of its chat it received, by seq (without `replay`).
    seen: BTreeMap<u64, Value>,
    /// The user messages it sent, and those it saw logged.
    sent: Vec<String>,
    confirmed: HashSet<String>,
    /// An input request of its chat not answered yet.
    open: Option<String>,
    /// How many of each kind of step it took.
    steps: BTreeMap<&'static str, usize>,
}

impl Session {
    fn last_seq(&self) -> u64 {
        self.seen.keys().next_back().copied().unwrap_or(0)
    }

    /// Whether its chat's last run is over (as far as it has seen).
    fn idle(&self) -> bool {
        self.seen
            .values()
            .rfind(|m| m["type"] != "chat.state")
            .is_none_or(|m| m["type"] == "chat.run_complete")
    }

    /// Takes one message in: checks it, and notes what it says of the chat.
    fn take(&mut self, m: &Value) {
        assert_outbound_valid(m);
        let Some(seq) = m["seq"].as_u64() else { return };
        assert_eq!(m["chat_id"], self.chat.to_string(), "{m}");
        let m = without_replay(m);
        if let Some(before) = self.seen.get(&seq) {
            assert_eq!(*before, m, "seq {seq} came twice, different");
        }
        match m["type"].as_str().unwrap() {
            "chat.text" if m["agent"] == "user" => {
                self.confirmed
                    .insert(m["content"].as_str().unwrap().to_owned());
            }
            "chat.input_request" => self.open = Some(m["request_id"].as_str().unwrap().into()),
            "chat.input_ack" | "chat.input_timeout"
                if self.open.as_deref() == m["request_id"].as_str() =>
            {
                self.open = None;
            }
            _ => {}
        }
        self.seen.insert(seq, m);
    }

    async fn send(&mut self, msg: String) -> Result<(), Broken> {
        let ws = self.ws.as_mut().ok_or(Broken)?;
        match tokio::time::timeout(BOUND, ws.send(Message::text(msg.clone()))).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Broken),
            Err(_) => panic!("connection {}: the server stopped reading: {msg}", self.i),
        }
    }

    /// Reads until a message matches `want`; every read within [`BOUND`].
    async fn until(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Result<Value, Broken> {
        loop {
            let ws = self.ws.as_mut().ok_or(Broken)?;
            let read = tokio::time::timeout(BOUND, ws.next()).await;
            let msg = match read {
                Err(_) => panic!("connection {}: no {what} within {BOUND:?}: a stall", self.i),
                Ok(Some(Ok(Message::Text(t)))) => serde_json::from_str::<Value>(&t).unwrap(),
                Ok(Some(Ok(Message::Close(_)) | Err(_)) | None) => {
                    self.ws = None;
                    return Err(Broken);
                }
                Ok(Some(Ok(_))) => continue,
            };
            self.take(&msg);
            if want(&msg) {
                return Ok(msg);
            }
        }
    }

    /// A fresh connection to the server now running, subscribed to the
    /// chat from the last seq it saw (or the chat made, at first).
    async fn connect(&mut self) {
        let deadline = tokio::time::Instant::now() + RECONNECT;
        loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "connection {}: no server to reconnect to",
                self.i
            );
            let addr = *self.addr.borrow();
            let url = format!("ws://{addr}/v1/ws");
            let connected =
                tokio::time::timeout(BOUND, tokio_tungstenite::connect_async(url)).await;
            let Ok(Ok((ws, _))) = connected else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            self.ws = Some(ws);
            if self.subscribe().await.is_ok() {
                return;
            }
        }
    }

    async fn subscribe(&mut self) -> Result<(), Broken> {
        let chat = self.chat;
        if self.seen.is_empty() {
            // Made here (again, if the first try was lost): a start of an
            // existing chat of ours is a resume.
            let start = json!({"type": "chat.start", "chat_id": chat, "agent": "demo"});
            self.send(start.to_string()).await?;
        }
        let resume =
            json!({"type": "client.resume", "chat_id": chat, "lastClientIndex": self.last_seq()});
        self.send(resume.to_string()).await?;
        let boundary = |m: &Value| {
            m["chat_id"] == chat.to_string()
                && (m["type"] == "chat.resume_boundary" || m["error_code"] == "RESUME_FAILED")
        };
        let got = self.until("resume boundary", boundary).await?;
        if got["type"] == "chat.error" {
            // The start had not reached the chat before a restart.
            return Err(Broken);
        }
        Ok(())
    }

    /// A user message, sent until the log has it (again after a broken
    /// connection, with the same `client_msg_id`), then its run to its end
    /// (answering what it asks).
    async fn say(&mut self, text: String) -> Result<(), Broken> {
        let chat = self.chat;
        if !self.sent.contains(&text) {
            self.sent.push(text.clone());
        }
        while !self.confirmed.contains(&text) {
            self.finish_run().await?;
            let msg = json!({"type": "user.message", "chat_id": chat, "text": text, "client_msg_id": text});
            self.send(msg.to_string()).await?;
            let t = text.clone();
            let got = self
                .until("the message's echo", move |m| {
                    (m["type"] == "chat.text" && m["agent"] == "user" && m["content"] == t.as_str())
                        || (m["type"] == "chat.error" && m.get("seq").is_none())
                })
                .await?;
            if got["type"] == "chat.error" {
                assert_eq!(got["error_code"], "RUN_IN_PROGRESS", "{got}");
            }
        }
        self.finish_run().await
    }

    /// Waits for the chat's run to end, answering what it asks.
    async fn finish_run(&mut self) -> Result<(), Broken> {
        while !self.idle() {
            if let Some(id) = self.open.clone() {
                let submit = json!({"type": "user.input.submit", "chat_id": self.chat, "request_id": id, "text": format!("a{}", self.i)});
                self.send(submit.to_string()).await?;
                let got = self
                    .until("the answer's ack", move |m| {
                        (m["type"] == "chat.input_ack" && m["request_id"] == id.as_str())
                            || (m["type"] == "chat.error" && m.get("seq").is_none())
                    })
                    .await?;
                if got["type"] == "chat.error" {
                    // Answered already (its ack arrives in the log).
                    assert_eq!(got["error_code"], "INPUT_REQUEST_NOT_FOUND", "{got}");
                }
                self.open = None;
                continue;
            }
            self.until("the run's next step", |m| {
                m["type"] == "chat.run_complete" || m["type"] == "chat.input_request"
            })
            .await?;
        }
        Ok(())
    }

    /// A message the server must refuse, and the codes it may refuse it with.
    fn invalid(&mut self) -> (String, &'static [&'static str]) {
        let chat = self.chat;
        let k = self.rng.random_range(0..6);
        let nobody = Uuid::new_v4();
        match k {
            0 => ("{not json".into(), &["SCHEMA_VALIDATION_FAILED"]),
            1 => (
                json!({"type": "no.such", "chat_id": chat}).to_string(),
                &["SCHEMA_VALIDATION_FAILED"],
            ),
            2 => (
                json!({"type": "user.input.submit", "chat_id": chat, "request_id": format!("nope-{k}"), "text": "x"}).to_string(),
                &["INPUT_REQUEST_NOT_FOUND"],
            ),
            3 => (
                json!({"type": "inline_component.result", "chat_id": chat, "corr": "nope", "data": {}}).to_string(),
                &["INPUT_REQUEST_NOT_FOUND"],
            ),
            4 => (
                json!({"type": "user.message", "chat_id": nobody, "text": "lost"}).to_string(),
                &["RESUME_FAILED"],
            ),
            _ => (
                json!({"type": "artifact_patch", "chat_id": chat, "corr": "nope", "patch": [{"op": "remove", "path": "/x"}]}).to_string(),
                &["INPUT_REQUEST_NOT_FOUND", "SCHEMA_VALIDATION_FAILED"],
            ),
        }
    }

    /// One random step.
    async fn step(&mut self, k: usize) -> Result<(), Broken> {
        let i = self.i;
        let roll = self.rng.random_range(0..100);
        let kind = match roll {
            0..35 => "message",
            35..45 => "ask",
            45..75 => "invalid",
            75..87 => "ping",
            _ => "disconnect",
        };
        *self.steps.entry(kind).or_default() += 1;
        match kind {
            "message" => self.say(format!("c{i} m{k}")).await,
            "ask" => self.say(format!("ask: c{i} q{k}")).await,
            "invalid" => {
                let (msg, codes) = self.invalid();
                self.send(msg.clone()).await?;
                let got = self
                    .until("a refusal", |m| {
                        m["type"] == "chat.error" && m.get("seq").is_none()
                    })
                    .await?;
                let code = got["error_code"].as_str().unwrap();
                assert!(codes.contains(&code), "{msg} → {got}");
                Ok(())
            }
            "ping" => {
                self.send(json!({"type": "ping"}).to_string()).await?;
                self.until("pong", |m| m["type"] == "pong").await.map(drop)
            }
            _ => {
                // Dropped without a close frame, as a closed laptop does.
                self.ws = None;
                Err(Broken)
            }
        }
    }

    /// Halfway, one of the first [`PARKED`] connections leaves a run
    /// waiting for its answer until the server is killed.
    async fn park(&mut self, parked: &AtomicUsize) {
        let chat = self.chat;
        let text = format!("ask: c{} parked", self.i);
        self.sent.push(text.clone());
        let ask =
            json!({"type": "user.message", "chat_id": chat, "text": text, "client_msg_id": text});
        let asked = async {
            self.finish_run().await?;
            self.send(ask.to_string()).await?;
            self.until("the parked request", |m| m["type"] == "chat.input_request")
                .await
        };
        if asked.await.is_ok() {
            parked.fetch_add(1, Ordering::Relaxed);
            let ws = self.ws.as_mut().expect("connected");
            // Everything else it reads until the kill is its own chat's.
            let killed = tokio::time::timeout(RECONNECT, async {
                while let Some(Ok(m)) = ws.next().await {
                    if let Message::Text(t) = m {
                        let v: Value = serde_json::from_str(&t).unwrap();
                        assert_ne!(v["type"], "chat.input_ack", "answered by nobody: {v}");
                    }
                }
            });
            killed
                .await
                .expect("the server is killed while the run waits");
            self.ws = None;
        }
        self.connect().await;
    }

    /// Its steps, finding the server again whenever the connection breaks;
    /// then the chat's run to its end.
    async fn run(mut self, done: Arc<AtomicUsize>, parked: Arc<AtomicUsize>) -> Self {
        self.connect().await;
        for k in 0..STEPS {
            if self.i < PARKED && k == STEPS / 2 {
                self.park(&parked).await;
            }
            if self.step(k).await.is_err() {
                self.connect().await;
            }
            done.fetch_add(1, Ordering::Relaxed);
        }
        // What it sent last may have been lost with a connection.
        loop {
            let unconfirmed: Vec<String> = self
                .sent
                .iter()
                .filter(|t| !self.confirmed.contains(*t))
                .cloned()
                .collect();
            let mut ok = true;
            for text in unconfirmed {
                ok &= self.say(text).await.is_ok();
            }
            if ok && self.finish_run().await.is_ok() {
                return self;
            }
            self.connect().await;
        }
    }
}

/// Many connections sending valid and invalid messages, dropping their
/// connections at random (seeded), while the server is killed and started
/// again once (with runs waiting for answers that come before the continued
/// runs wait again): every answer comes within a bound, and afterwards each
/// chat's log is 1..N without a gap, holds each user message once, and
/// holds every envelope a client saw as it saw it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_connections_with_disconnects_and_a_restart_lose_nothing() {
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let url = database_url(dir.path()).await;
    // Every per-user rate and quota off (one user has all 40 connections),
    // and continued runs that start late (see `PARKED`).
    let flags: Vec<&str> = [
        ("--rate-frames-per-second", "0"),
        ("--rate-chats-per-minute", "0"),
        ("--rate-messages-per-minute", "0"),
        ("--max-runs-per-user", "0"),
        ("--test-continue-delay-ms", "2000"),
    ]
    .into_iter()
    .flat_map(|(key, value)| [key, value])
    .collect();
    let (child, addr) = spawn_agentwire(&url, &agents, &flags).await;
    let (to_clients, addresses) = watch::channel(addr);
    let done = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let sessions: Vec<_> = (0..CONNECTIONS)
        .map(|i| {
            let session = Session {
                i,
                chat: Uuid::new_v4(),
                rng: StdRng::seed_from_u64(SEED + i as u64),
                addr: addresses.clone(),
                ws: None,
                seen: BTreeMap::new(),
                sent: Vec::new(),
                confirmed: HashSet::new(),
                open: None,
                steps: BTreeMap::new(),
            };
            tokio::spawn(session.run(done.clone(), parked.clone()))
        })
        .collect();

    // Halfway through, with runs waiting for their answers, the server is
    // killed and started again.
    while done.load(Ordering::Relaxed) < CONNECTIONS * STEPS / 2
        || parked.load(Ordering::Relaxed) < PARKED
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child_kill(child).await;
    let (_child, addr) = spawn_agentwire(&url, &agents, &flags).await;
    to_clients.send(addr).unwrap();

    let mut steps: BTreeMap<&str, usize> = BTreeMap::new();
    for session in sessions {
        let s = session.await.unwrap();
        for (kind, n) in &s.steps {
            *steps.entry(kind).or_default() += n;
        }
        let log = whole_log(addr, s.chat).await;
        let seqs: Vec<u64> = log.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
        assert_gap_free(&seqs);
        for (seq, m) in &s.seen {
            assert_eq!(
                log[*seq as usize - 1],
                *m,
                "chat {}: seq {seq} changed",
                s.i
            );
        }
        let said: Vec<&str> = log
            .iter()
            .filter(|m| m["type"] == "chat.text" && m["agent"] == "user")
            .map(|m| m["content"].as_str().unwrap())
            .filter(|t| {
                t.starts_with(&format!("c{} ", s.i)) || t.starts_with(&format!("ask: c{} ", s.i))
            })
            .collect();
        let mut sent: Vec<&str> = s.sent.iter().map(String::as_str).collect();
        let mut logged = said.clone();
        sent.sort_unstable();
        logged.sort_unstable();
        assert_eq!(logged, sent, "chat {}: each message logged once", s.i);
        assert_eq!(log.last().unwrap()["type"], "chat.run_complete");
    }
    // Every kind of step was taken, and the whole test stayed well in time.
    for kind in ["message", "ask", "invalid", "ping", "disconnect"] {
        assert!(
            steps.get(kind).is_some_and(|n| *n > 0),
            "no {kind}: {steps:?}"
        );
    }
    eprintln!("soak: {steps:?} in {:?}", started.elapsed());
}

/// SIGKILLs the server.
async fn child_kill(mut child: tokio::process::Child) {
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}

/// The whole log of `chat`, replayed from seq 1.
async fn whole_log(addr: SocketAddr, chat: Uuid) -> Vec<Value> {
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    c.resume(chat, 0).await;
    let mut log = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    log.pop();
    log.iter().map(without_replay).collect()
}
