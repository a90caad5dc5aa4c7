//! Webhooks out (issue 38): the events of users' chats reach a backend's
//! endpoint signed as Standard Webhooks says, from a durable outbox:
//! retried with the same id until taken, in order per chat, after a
//! restart and on another node (refused on one node, taken from another
//! with the same id; a node killed mid-send); an approval is told with its
//! tool and input.

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

/// A backend's endpoint: it holds its first `hold` requests without an
/// answer (a sender killed meanwhile never hears back), refuses (503) its
/// next `fail` ones, then takes them.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Got>>>,
    fail: Arc<Mutex<u32>>,
    hold: Arc<Mutex<u32>>,
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
                    let held = {
                        let mut hold = state.hold.lock().unwrap();
                        let held = *hold > 0;
                        *hold = hold.saturating_sub(1);
                        held
                    };
                    let taken = !held && {
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
                    if held {
                        tokio::time::sleep(Duration::from_secs(300)).await;
                    }
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

    /// Waits until `n` requests came (taken or not).
    async fn requests(&self, n: usize) -> Vec<Got> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.got();
            if got.len() >= n {
                return got;
            }
            assert!(tokio::time::Instant::now() < deadline, "requests: {got:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
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

/// A node on the cluster's database `db`, sending to `url`.
async fn node(db: &str, url: &str) -> Server {
    Server::start_with(Opts {
        settings: agentwire::config::Settings {
            database_url: Some(db.to_owned()),
            ..settings(url)
        },
        ..Default::default()
    })
    .await
}

/// A chat of the demo agent's asking for a name: the client, the chat and
/// its `chat.input_request`.
async fn asking(server: &Server) -> (Client, Uuid, Value) {
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "ask: Your name?").await;
    let seen = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let request = seen.last().unwrap().clone();
    (c, chat, request)
}

async fn answer(c: &mut Client, chat: Uuid, request: &Value) {
    c.send(json!({"type": "user.input.submit", "chat_id": chat,
                  "request_id": request["request_id"], "text": "Ada"}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_signed_retried_with_one_id_and_sent_in_order() {
    let (receiver, url) = Receiver::start(2).await;
    let server = Server::start_with(Opts {
        settings: settings(&url),
        ..Default::default()
    })
    .await;
    let (mut c, chat, request) = asking(&server).await;
    answer(&mut c, chat, &request).await;
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
async fn an_approval_is_told_with_its_tool_and_input() {
    use crate::mock_llm::{MockServer, Reply};
    use crate::vendors::{OpenAiWire, Wire};
    let call = [("call_1", "get_weather", r#"{"city":"Paris"}"#)];
    let llm = MockServer::start(vec![
        OpenAiWire.tools(None, &call, (1, 1)),
        OpenAiWire.text(&["Done."], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![Reply::json(200, r#"{"temp":21}"#)]).await;
    let (receiver, url) = Receiver::start(0).await;
    crate::providers::set_key();
    let server = Server::start_with(Opts {
        settings: settings(&url),
        agents: vec![(
            "real.yaml".into(),
            crate::agent_loop::approval_agent(&llm, &tool),
        )],
    })
    .await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", "Weather?").await;
    let gate = c
        .recv_until(|m| m["type"] == "chat.tool_call" && m["component_type"] == "approval")
        .await
        .pop()
        .unwrap();

    // Told while it waits: which tool, with what, since when.
    let got = receiver.taken(2).await;
    let asked = got
        .iter()
        .find(|g| g.body["type"] == "approval.requested")
        .unwrap_or_else(|| panic!("{got:#?}"));
    verify(asked);
    let data = &asked.body["data"];
    assert_eq!(data["agent"], "real");
    assert_eq!(data["envelope"]["corr"], gate["corr"]);
    assert_eq!(data["envelope"]["payload"]["tool_name"], "get_weather");
    assert_eq!(
        data["envelope"]["payload"]["input"],
        json!({"city": "Paris"})
    );
    assert_eq!(data["requested_at"], gate["ts"]);
    assert_eq!(
        (data["waited_seconds"].as_i64(), data["reminder"].as_i64()),
        (Some(0), Some(0))
    );
    assert_eq!(tool.requests().len(), 0, "nothing ran before the answer");

    c.send(
        json!({"type": "inline_component.result", "chat_id": chat, "corr": gate["corr"],
                  "data": {"approved": true}}),
    )
    .await;
    c.until_complete(chat).await;
    assert_eq!(
        tool.requests().len(),
        1,
        "the tool ran once it was approved"
    );
    let types: Vec<String> = receiver
        .taken(3)
        .await
        .iter()
        .map(|g| g.body["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        types,
        ["chat.created", "approval.requested", "run.completed"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_twice_on_one_node_and_taken_from_another_with_one_id() {
    let Some(db) = crate::cluster::cluster_database().await else {
        return;
    };
    let (receiver, url) = Receiver::start(1000).await;
    let a = node(&db, &url).await;
    let mut c = a.client().await;
    let chat = Uuid::new_v4();
    c.start(chat, "hello").await;
    c.until_complete(chat).await;
    drop(c);
    // A's two attempts at the chat's first event fail (a second apart);
    // then A stops, the endpoint recovers, and B sends.
    receiver.requests(2).await;
    a.stop().await;
    *receiver.fail.lock().unwrap() = 0;
    let _b = node(&db, &url).await;
    let got = receiver.taken(2).await;
    for g in &got {
        verify(g);
    }
    let first: Vec<&Got> = got.iter().filter(|g| g.id == got[0].id).collect();
    assert_eq!(got[0].id, format!("msg_{}_1", chat.simple()));
    assert!(first.len() >= 3, "{got:#?}");
    assert!(
        first.iter().all(|g| g.raw == got[0].raw),
        "the same body each time"
    );
    assert_eq!(
        first.iter().map(|g| g.taken).collect::<Vec<_>>(),
        [vec![false; first.len() - 1], vec![true]].concat(),
        "refused until B's attempt was taken, then never sent again"
    );
    let taken: Vec<&str> = got
        .iter()
        .filter(|g| g.taken)
        .map(|g| g.body["type"].as_str().unwrap())
        .collect();
    assert_eq!(taken, ["chat.created", "run.completed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_who_has_not_answered_is_reminded_until_they_do() {
    let (receiver, url) = Receiver::start(0).await;
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            webhook_remind_seconds: Some(1),
            ..settings(&url)
        },
        ..Default::default()
    })
    .await;
    let (mut c, chat, request) = asking(&server).await;
    let seq = request["seq"].as_u64().unwrap();
    // Told when asked, then again each second it stays unanswered.
    let asked = |got: &[Got]| -> Vec<Got> {
        got.iter()
            .filter(|g| g.body["type"] == "input.requested")
            .cloned()
            .collect()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while asked(&receiver.got()).len() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:#?}",
            receiver.got()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let told = asked(&receiver.got());
    let base = format!("msg_{}_{seq}", chat.simple());
    assert_eq!(told[0].id, base);
    let mut last = None;
    for g in &told {
        verify(g);
        let data = &g.body["data"];
        // (A sweep held up past a whole interval skips to the reminder the
        // time has reached.)
        let n = data["reminder"].as_u64().unwrap();
        assert!(last.is_none_or(|l| n > l), "{told:#?}");
        last = Some(n);
        let id = match n {
            0 => base.clone(),
            n => format!("{base}_r{n}"),
        };
        assert_eq!(g.id, id);
        // (From the request's time to the reminder's: one more if the
        // request took over a second to be logged.)
        let waited = data["waited_seconds"].as_u64().unwrap();
        assert!(waited == n || waited == n + 1, "{data}");
        assert_eq!(data["seq"], seq);
        assert_eq!(data["envelope"]["request_id"], request["request_id"]);
        assert_eq!(data["requested_at"], told[0].body["data"]["requested_at"]);
    }

    // Answered: told no more.
    answer(&mut c, chat, &request).await;
    c.until_complete(chat).await;
    let got = receiver.taken(1 + told.len() + 1).await;
    let done = got
        .iter()
        .position(|g| g.body["type"] == "run.completed")
        .unwrap_or_else(|| panic!("{got:#?}"));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after: Vec<Got> = receiver.got()[done..]
        .iter()
        .filter(|g| g.body["type"] == "input.requested")
        .cloned()
        .collect();
    assert!(after.is_empty(), "reminded after the answer: {after:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_while_it_sends_an_event_leaves_it_to_another() {
    let Some(db) = crate::cluster::cluster_database().await else {
        return;
    };
    // The endpoint never answers the first request: the node sending it is
    // killed (SIGKILL) while it waits; the other node sends it again, with
    // the same id, once the first one's hold on it (twice the 2 s request
    // timeout) has run out.
    let (receiver, url) = Receiver::start(0).await;
    *receiver.hold.lock().unwrap() = 1;
    let agents = tempfile::tempdir().unwrap();
    let flags = [
        "--webhook-url",
        &url,
        "--webhook-secret",
        SECRET,
        "--webhook-timeout-seconds",
        "2",
    ];
    let (mut a, addr) = spawn_agentwire(&db, agents.path(), &flags).await;
    let mut c = Client::connect(&format!("ws://{addr}/v1/ws")).await;
    let chat = Uuid::new_v4();
    c.start(chat, "hello").await;
    c.until_complete(chat).await;
    let held = receiver.requests(1).await;
    assert_eq!(held[0].id, format!("msg_{}_1", chat.simple()));
    a.start_kill().unwrap();
    a.wait().await.unwrap();
    let (_b, _) = spawn_agentwire(&db, agents.path(), &flags).await;

    let got = receiver.taken(2).await;
    verify(&got[1]);
    let taken: Vec<&Got> = got.iter().filter(|g| g.taken).collect();
    assert_eq!(taken[0].id, held[0].id);
    assert_eq!(taken[0].raw, held[0].raw, "the same event, byte for byte");
    assert_eq!(
        taken
            .iter()
            .map(|g| g.body["type"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["chat.created", "run.completed"]
    );
}
