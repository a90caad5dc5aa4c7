//! One benchmark connection, speaking agentwire's protocol or Socket.IO's
//! (Engine.IO v4 over a WebSocket), so every server is driven by the same
//! client code and measured the same way.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use uuid::Uuid;

/// Which server protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// agentwire's `/v1/ws` (also the raw ceiling server's).
    Agentwire,
    /// Socket.IO 4 (`/socket.io/?EIO=4&transport=websocket`).
    Socketio,
}

/// What the bench reads from an envelope.
#[derive(Debug, Clone)]
pub struct Received {
    pub kind: String,
    pub seq: Option<u64>,
    /// Milliseconds from the envelope's `ts` to its receipt.
    pub latency_ms: Option<f64>,
    pub replay: bool,
}

/// A connection.
pub struct Conn {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    protocol: Protocol,
}

/// Now, in Unix milliseconds (fractional).
pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn ts_ms(ts: &str) -> Option<f64> {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.timestamp_millis() as f64)
}

impl Conn {
    /// Connects to `url` (agentwire: `ws://host:port/v1/ws`; Socket.IO:
    /// `ws://host:port`, the path is added) and, for Socket.IO, joins the
    /// default namespace.
    pub async fn connect(url: &str, protocol: Protocol) -> anyhow::Result<Self> {
        let url = match protocol {
            Protocol::Agentwire => url.to_owned(),
            Protocol::Socketio => format!(
                "{}/socket.io/?EIO=4&transport=websocket",
                url.trim_end_matches('/')
            ),
        };
        let (ws, _) = tokio_tungstenite::connect_async(&url)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        let mut conn = Self { ws, protocol };
        if protocol == Protocol::Socketio {
            // Engine.IO open packet, then connect to the default namespace.
            let open = conn.next_text().await?;
            if !open.starts_with('0') {
                bail!("unexpected Engine.IO open packet: {open}");
            }
            conn.ws.send(Message::text("40")).await?;
            loop {
                let t = conn.next_text().await?;
                if t.starts_with("40") {
                    break;
                }
            }
        }
        Ok(conn)
    }

    async fn next_text(&mut self) -> anyhow::Result<String> {
        loop {
            match self.ws.next().await {
                Some(Ok(Message::Text(t))) => return Ok(t.to_string()),
                Some(Ok(Message::Close(_))) | None => bail!("connection closed"),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
            }
        }
    }

    async fn send_json(&mut self, v: Value) -> anyhow::Result<()> {
        let text = match self.protocol {
            Protocol::Agentwire => v.to_string(),
            Protocol::Socketio => {
                let event = v["type"].as_str().unwrap_or_default().to_owned();
                format!("42{}", json!([event, v]))
            }
        };
        self.ws.send(Message::text(text)).await?;
        Ok(())
    }

    /// Starts (or joins) a chat; with a message, a run.
    pub async fn start(&mut self, chat: Uuid, message: Option<&str>) -> anyhow::Result<()> {
        self.start_agent(chat, "demo", message).await
    }

    /// Starts (or joins) a chat of `agent`; with a message, a run.
    pub async fn start_agent(
        &mut self,
        chat: Uuid,
        agent: &str,
        message: Option<&str>,
    ) -> anyhow::Result<()> {
        let mut v = json!({"type": "chat.start", "chat_id": chat, "agent": agent});
        if let Some(m) = message {
            v["message"] = json!(m);
        }
        self.send_json(v).await
    }

    /// Sends a user message to a chat.
    pub async fn say(&mut self, chat: Uuid, text: &str) -> anyhow::Result<()> {
        self.send_json(json!({"type": "user.message", "chat_id": chat, "text": text}))
            .await
    }

    /// A new answer to the user's message at `seq` (agentwire only).
    pub async fn regenerate(&mut self, chat: Uuid, seq: u64) -> anyhow::Result<()> {
        self.send_json(json!({"type": "chat.regenerate", "chat_id": chat, "seq": seq}))
            .await
    }

    /// Asks for everything after `after`.
    pub async fn resume(&mut self, chat: Uuid, after: u64) -> anyhow::Result<()> {
        self.send_json(json!({"type": "client.resume", "chat_id": chat, "lastClientIndex": after}))
            .await
    }

    /// Round trip: `ping`, then everything up to its `pong` (so what was sent
    /// before has been taken by the server).
    pub async fn ping(&mut self) -> anyhow::Result<()> {
        self.send_json(json!({"type": "ping"})).await?;
        self.until("pong", |_| {}).await
    }

    /// The next message, decoded; Socket.IO pings are answered on the way.
    pub async fn recv(&mut self) -> anyhow::Result<Received> {
        let (received, v) = self.recv_value().await?;
        let kind = v["type"].as_str().unwrap_or_default().to_owned();
        if kind == "chat.error" && v.get("seq").is_none() {
            bail!("the server refused a request: {v}");
        }
        Ok(Received {
            latency_ms: v["ts"]
                .as_str()
                .and_then(ts_ms)
                .map(|t| (received - t).max(0.0)),
            seq: v["seq"].as_u64(),
            replay: v["replay"].as_bool() == Some(true),
            kind,
        })
    }

    /// The next message as JSON, with when it was received (Unix ms).
    pub async fn recv_value(&mut self) -> anyhow::Result<(f64, Value)> {
        loop {
            let text = self.next_text().await?;
            let body = match self.protocol {
                Protocol::Agentwire => text,
                Protocol::Socketio => {
                    if text == "2" {
                        self.ws.send(Message::text("3")).await?;
                        continue;
                    }
                    let Some(event) = text.strip_prefix("42") else {
                        continue;
                    };
                    // ["env", "<envelope JSON>"]
                    let arr: Value = serde_json::from_str(event)?;
                    match &arr[1] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    }
                }
            };
            let received = now_ms();
            let v: Value = serde_json::from_str(&body).context("a JSON message")?;
            return Ok((received, v));
        }
    }

    /// Reads up to and including the next message of type `kind`; calls `each`
    /// on every message read.
    pub async fn until(
        &mut self,
        kind: &str,
        mut each: impl FnMut(&Received),
    ) -> anyhow::Result<()> {
        loop {
            let r = self.recv().await?;
            each(&r);
            if r.kind == kind {
                return Ok(());
            }
        }
    }

    /// Closes the connection politely.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}
