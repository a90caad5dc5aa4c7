//! The raw ceiling: the least a WebSocket server can do to send agentwire's
//! envelopes. It speaks just enough of `/v1/ws` for `agentwire-bench stream`
//! and `fanout` (`chat.start`, `user.message`, `client.resume`, `ping`) and
//! sends what a `burst: N` run sends (N `chat.print`s and the five envelopes
//! around them, the same JSON shapes), serialized once and shared by every
//! subscriber; `slow: N` the same with the demo's 20 ms between words, so the
//! paced sweep has a ceiling too. No log, no actor, no validation, no
//! persistence.
//!
//! `raw-ceiling [ADDR]` (default 127.0.0.1:8090).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedSender as Sender, unbounded_channel};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

/// Each connection's queue is unbounded: the ceiling never waits for a
/// subscriber and never drops one (agentwire bounds its queues).
type Subscribers = Arc<Mutex<HashMap<String, Vec<Sender<Utf8Bytes>>>>>;

fn ts() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8090".into());
    let listener = TcpListener::bind(&addr).await?;
    eprintln!("raw-ceiling listening on {addr}");
    let subs: Subscribers = Arc::default();
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(serve(stream, subs.clone()));
    }
}

async fn serve(stream: TcpStream, subs: Subscribers) {
    let _ = stream.set_nodelay(true);
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = unbounded_channel::<Utf8Bytes>();
    let writer = tokio::spawn(async move {
        while let Some(text) = rx.recv().await {
            if sink.feed(Message::Text(text)).await.is_err() {
                return;
            }
            if rx.is_empty() && sink.flush().await.is_err() {
                return;
            }
        }
    });
    while let Some(Ok(msg)) = source.next().await {
        let Message::Text(text) = msg else { continue };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let chat = v["chat_id"].as_str().unwrap_or_default().to_owned();
        match v["type"].as_str() {
            Some("ping") => {
                let _ = tx.send(json!({"type": "pong"}).to_string().into());
            }
            Some("chat.start") => {
                subscribe(&subs, &chat, &tx);
                if let Some(m) = v["message"].as_str() {
                    tokio::spawn(burst(subs.clone(), chat, m.to_owned()));
                }
            }
            Some("client.resume") => {
                subscribe(&subs, &chat, &tx);
                let b = json!({"type": "chat.resume_boundary", "chat_id": chat, "last_seq": 0, "recovered": false, "ts": ts()});
                let _ = tx.send(b.to_string().into());
            }
            Some("user.message") => {
                let m = v["text"].as_str().unwrap_or_default().to_owned();
                tokio::spawn(burst(subs.clone(), chat, m));
            }
            _ => {}
        }
    }
    drop(tx);
    let _ = writer.await;
}

fn subscribe(subs: &Subscribers, chat: &str, tx: &Sender<Utf8Bytes>) {
    let mut subs = subs.lock().expect("lock");
    let list = subs.entry(chat.to_owned()).or_default();
    list.retain(|s| !s.is_closed() && !s.same_channel(tx));
    list.push(tx.clone());
}

/// The demo's pause between the words of `slow: N`.
const SLOW_WORD: std::time::Duration = std::time::Duration::from_millis(20);

/// What `burst: N` (or `slow: N`, a word every 20 ms) logs, sent to every
/// subscriber of the chat.
async fn burst(subs: Subscribers, chat: String, message: String) {
    let (count, pause) = match message.strip_prefix("slow: ") {
        Some(n) => (Some(n), Some(SLOW_WORD)),
        None => (message.strip_prefix("burst: "), None),
    };
    let n: u64 = count.and_then(|n| n.trim().parse().ok()).unwrap_or(1);
    let targets = subs
        .lock()
        .expect("lock")
        .get(&chat)
        .cloned()
        .unwrap_or_default();
    let mut seq = 0;
    let mut send = |mut v: Value| {
        seq += 1;
        v["chat_id"] = json!(chat);
        v["seq"] = json!(seq);
        v["ts"] = json!(ts());
        let text: Utf8Bytes = v.to_string().into();
        for t in &targets {
            let _ = t.send(text.clone());
        }
    };
    send(json!({"type": "chat.text", "agent": "user", "content": message}));
    send(json!({"type": "chat.select_speaker", "agent": "demo"}));
    let mut words = String::new();
    for i in 1..=n {
        if let Some(pause) = pause.filter(|_| i > 1) {
            tokio::time::sleep(pause).await;
        }
        let word = if i == n {
            format!("w{i}")
        } else {
            format!("w{i} ")
        };
        words.push_str(&word);
        send(json!({"type": "chat.print", "agent": "demo", "content": word}));
    }
    send(json!({"type": "chat.text", "agent": "demo", "content": words}));
    send(
        json!({"type": "chat.usage_summary", "agent": "demo", "usage": {"input_tokens": 2, "output_tokens": n}, "cost": 0.0}),
    );
    send(json!({"type": "chat.run_complete", "reason": "completed"}));
}
