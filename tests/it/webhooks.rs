//! Webhooks out (issue 38): the events of users' chats reach a backend's
//! endpoint signed as Standard Webhooks says, from a durable outbox:
//! retried with the same id until taken, in order per chat, after a
//! restart and on another node.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One request the receiver got: its webhook headers and body, and what it
/// answered.
#[derive(Debug, Clone)]
struct Got {
    id: String,
    timestamp: String,
    signature: String,
    body: Value,
    raw: String,
    taken: bool,
}

/// A backend's endpoint: it refuses (503) its first `fail` requests, then
/// takes them; or refuses all while `down`.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Got>>>,
    fail: Arc<Mutex<u32>>,
}

impl Receiver {
    async fn start(fail: u32) -> (Self, String) {
        let receiver = Self::default();
        *receiver.fail.lock().unwrap() = fail;
        let state = receiver.clone();
        let app = axum::Router::new().route(
            "/hooks",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
                let state = state.clone();
                async move {
                    let header = |n: &str| {
                        headers
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let taken = {
                        let mut fail = state.fail.lock().unwrap();
                        if *fail > 0 {
                            *fail -= 1;
                            false
                        } else {
                            true
                        }
                    };
                    state.got.lock().unwrap().push(Got {
                        id: header("webhook-id"),
                        timestamp: header("webhook-timestamp"),
                        signature: header("webhook-signature"),
                        body: serde_json::from_str(&body).unwrap_or(Value::Null),
                        raw: body,
                        taken,
                    });
                    match taken {
                        true => axum::http::StatusCode::NO_CONTENT,
                        false => axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, url)
    }

    fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until `n` events were taken.
    async fn taken(&self, n: usize) -> Vec<Got> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.got();
            if got.iter().filter(|g| g.taken).count() >= n {
                return got;
            }
            assert!(tokio::time::Instant::now() < deadline, "taken: {got:#?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Checks a request's signature as a receiver does (Standard Webhooks).
fn verify(g: &Got) {
    let key = base64::engine::general_purpose::STANDARD
        .decode(SECRET.strip_prefix("whsec_").unwrap())
        .unwrap();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    let signed = format!("{}.{}.{}", g.id, g.timestamp, g.raw);
    let sig = g.signature.strip_prefix("v1,").expect("a v1 signature");
    let sig = base64::engine::general_purpose::STANDARD
        .decode(sig)
        .unwrap();
    ring::hmac::verify(&key, signed.as_bytes(), &sig).expect("the signature verifies");
    let ts: i64 = g.timestamp.parse().unwrap();
    assert!((chrono::Utc::now().timestamp() - ts).abs() < 120);
}

fn settings(url: &str) -> agentwire::config::Settings {
    agentwire::config::Settings {
        webhook_url: Some(url.to_owned()),
        webhook_secret: Some(SECRET.to_owned()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_signed_retried_with_one_id_and_sent_in_order() {
    let (receiver, url) = Receiver::start(2).await;
    let server = Server::start_with(Opts {
        settings: settings(&url),
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "ask: Your name?").await;
    let seen = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let request = seen.last().unwrap().clone();
    c.send(json!({"type": "user.input.submit", "chat_id": chat,
                  "request_id": request["request_id"], "text": "Ada"}))
        .await;
    c.until_complete(chat).await;
    c.say(chat, "fail").await;
    c.until_complete(chat).await;

    // chat.created (refused twice, taken the third time), input.requested,
    // run.completed, run.failed: in the order they were logged.
    let got = receiver.taken(4).await;
    for g in &got {
        verify(g);
    }
    let first = &got[0];
    assert_eq!(first.id, format!("msg_{}_1", chat.simple()));
    assert!(
        got[..3]
            .iter()
            .all(|g| g.id == first.id && g.raw == first.raw)
    );
    assert_eq!(
        (got[0].taken, got[1].taken, got[2].taken),
        (false, false, true)
    );
    let taken: Vec<&Got> = got.iter().filter(|g| g.taken).collect();
    let types: Vec<&str> = taken
        .iter()
        .map(|g| g.body["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "chat.created",
            "input.requested",
            "run.completed",
            "run.failed"
        ]
    );
    // Nothing of the chat was sent before what came before it was taken.
    let first_taken = got.iter().position(|g| g.taken).unwrap();
    assert!(got[..first_taken].iter().all(|g| g.id == first.id));
    let asked = &taken[1].body["data"];
    assert_eq!(
        (asked["user"].as_str(), asked["agent"].as_str()),
        (Some("dev"), Some("demo"))
    );
    assert_eq!(asked["envelope"]["prompt"], "Your name?");
    assert!(asked["requested_at"].is_string());
    assert_eq!(taken[3].body["data"]["envelope"]["reason"], "error");
    let seqs: Vec<u64> = taken
        .iter()
        .map(|g| g.body["data"]["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");

    // The failures are in /metrics.
    let (_, metrics) = http_get(server.addr, "/metrics", &[]).await;
    let failed = metrics
        .lines()
        .find(|l| l.starts_with("agentwire_webhook_deliveries_total") && l.contains("failed"))
        .unwrap_or_else(|| panic!("{metrics}"));
    // (Other tests' servers count in the same process.)
    let n: f64 = failed.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= 2.0, "{failed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_waiting_when_the_server_stops_is_sent_after_it_starts_again() {
    // The endpoint refuses everything while the first server runs.
    let (receiver, url) = Receiver::start(1000).await;
    let server = Server::start_with(Opts {
        settings: settings(&url),
        ..Default::default()
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "hello").await;
    c.until_complete(chat).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dir = server.stop().await;
    assert!(receiver.got().iter().all(|g| !g.taken));
    *receiver.fail.lock().unwrap() = 0;
    let server = Server::start_in(
        dir,
        Opts {
            settings: settings(&url),
            ..Default::default()
        },
    )
    .await;
    let got = receiver.taken(2).await;
    let taken: Vec<&Got> = got.iter().filter(|g| g.taken).collect();
    assert_eq!(taken[0].id, format!("msg_{}_1", chat.simple()));
    assert_eq!(taken[1].body["type"], "run.completed");
    // Each taken once.
    assert_eq!(taken.len(), 2, "{taken:#?}");
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_node_sends_what_a_stopped_one_left() {
    let Some(db) = crate::cluster::cluster_database().await else {
        return;
    };
    let (receiver, url) = Receiver::start(1000).await;
    let node = |db: String| {
        let url = url.clone();
        async move {
            Server::start_with(Opts {
                settings: agentwire::config::Settings {
                    database_url: Some(db),
                    ..settings(&url)
                },
                ..Default::default()
            })
            .await
        }
    };
    let a = node(db.clone()).await;
    let mut c = a.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "hello").await;
    c.until_complete(chat).await;
    drop(c);
    a.stop().await;
    *receiver.fail.lock().unwrap() = 0;
    let _b = node(db).await;
    let got = receiver.taken(2).await;
    let taken: Vec<&Got> = got.iter().filter(|g| g.taken).collect();
    assert_eq!(
        taken
            .iter()
            .map(|g| g.body["type"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["chat.created", "run.completed"]
    );
}
