//! `jwt` mode: refused before the upgrade, and each user sees only their chats.

use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use uuid::Uuid;

use crate::support::*;

pub(crate) const SECRET: &str = "integration-test-secret-0123456789";

pub(crate) fn token(sub: &str, exp_offset: i64, secret: &str) -> String {
    let now = chrono::Utc::now().timestamp();
    signed(
        &json!({"sub": sub, "exp": now + exp_offset, "iat": now}),
        secret,
    )
}

/// `claims` as an HS256 token signed with `secret`.
pub(crate) fn signed(claims: &serde_json::Value, secret: &str) -> String {
    encode(
        &Header::default(),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

pub(crate) async fn jwt_server() -> Server {
    Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await
}

/// The HTTP status of a refused upgrade.
async fn refused(url: &str, bearer: Option<&str>) -> u16 {
    let mut req = url.into_client_request().unwrap();
    if let Some(t) = bearer {
        req.headers_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("upgrade was accepted"),
    }
}

async fn connect_as(server: &Server, token: &str) -> Client {
    let mut req = server.ws_url().into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    Client::from_stream(ws)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_get_401_before_the_upgrade() {
    let server = jwt_server().await;
    let url = server.ws_url();
    assert_eq!(refused(&url, None).await, 401);
    assert_eq!(
        refused(
            &url,
            Some(&token("alice", 60, "some-other-secret-entirely"))
        )
        .await,
        401
    );
    assert_eq!(
        refused(&url, Some(&token("alice", -3600, SECRET))).await,
        401
    );
    assert_eq!(refused(&url, Some("garbage")).await, 401);
    assert_eq!(
        refused(&format!("{url}?access_token=garbage"), None).await,
        401
    );

    // A good token, by header and by query parameter.
    let mut c = connect_as(&server, &token("alice", 60, SECRET)).await;
    c.send(json!({"type": "ping"})).await;
    assert_eq!(c.recv().await["type"], "pong");
    let mut c = Client::connect(&format!(
        "{url}?access_token={}",
        token("alice", 60, SECRET)
    ))
    .await;
    c.send(json!({"type": "ping"})).await;
    assert_eq!(c.recv().await["type"], "pong");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_cannot_reach_another_users_chat() {
    let server = jwt_server().await;
    let mut alice = connect_as(&server, &token("alice", 60, SECRET)).await;
    let mut bob = connect_as(&server, &token("bob", 60, SECRET)).await;
    let chat = Uuid::new_v4();
    alice.start(chat, "private").await;
    alice.until_complete(chat).await;

    let missing = Uuid::new_v4();
    for (target, msg) in [
        (
            chat,
            json!({"type": "client.resume", "chat_id": chat, "lastClientIndex": 0}),
        ),
        (
            chat,
            json!({"type": "chat.start", "chat_id": chat, "agent": "demo", "message": "mine now"}),
        ),
        (
            chat,
            json!({"type": "user.message", "chat_id": chat, "text": "hi"}),
        ),
        (chat, json!({"type": "chat.cancel", "chat_id": chat})),
        (
            missing,
            json!({"type": "client.resume", "chat_id": missing}),
        ),
    ] {
        bob.send(msg).await;
        let err = bob.expect("chat.error").await;
        assert_eq!(err["error_code"], "RESUME_FAILED", "{err}");
        assert_eq!(err["chat_id"], target.to_string());
        // The same words for someone else's chat and for no chat at all.
        assert_eq!(err["message"], "no chat with that id belongs to you");
    }

    // Alice's chat is untouched.
    alice.resume(chat, 0).await;
    let log = alice
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    assert!(log.iter().all(|m| !m.to_string().contains("mine now")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rs256_public_key_mode() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_public_key: Some(fixtures.join("jwt_rs256_test_public.pem")),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let private = std::fs::read(fixtures.join("jwt_rs256_test_private.pem")).unwrap();
    let now = chrono::Utc::now().timestamp();
    let good = encode(
        &Header::new(jsonwebtoken::Algorithm::RS256),
        &json!({"sub": "carol", "exp": now + 60}),
        &EncodingKey::from_rsa_pem(&private).unwrap(),
    )
    .unwrap();
    let mut c = connect_as(&server, &good).await;
    let chat = Uuid::new_v4();
    c.start(chat, "hi").await;
    assert_eq!(last_text(&c.until_complete(chat).await), "You said: hi");
    // An HS256 token is refused, whatever its secret.
    assert_eq!(
        refused(&server.ws_url(), Some(&token("carol", 60, SECRET))).await,
        401
    );
}

/// One HTTP/1.1 response read off a kept-alive connection: status, headers
/// (lower-cased), body.
async fn response(stream: &mut tokio::net::TcpStream) -> (u16, String, String) {
    use tokio::io::AsyncReadExt;
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "{raw:?}");
        raw.push(byte[0]);
    }
    let head = String::from_utf8(raw).unwrap().to_ascii_lowercase();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |n| n.trim().parse().unwrap());
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    (status, head, String::from_utf8(body).unwrap())
}

/// A 401 sent before the request's body arrived says `Connection: close`
/// (the server drops that connection), so a keep-alive client opens a new
/// one for its next request instead of sending it into a closed socket;
/// a request whose body was read keeps its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_before_the_body_says_the_connection_closes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = jwt_server().await;
    let host = server.addr;
    let mut refused = tokio::net::TcpStream::connect(host).await.unwrap();
    let head = format!(
        "POST /v1/chats HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"
    );
    refused.write_all(head.as_bytes()).await.unwrap();
    let (status, headers, _) = response(&mut refused).await;
    assert_eq!(status, 401);
    assert!(headers.contains("\r\nconnection: close\r\n"), "{headers}");
    // …and it is closed, as said.
    refused.write_all(b"{}").await.ok();
    let mut rest = Vec::new();
    let _ = refused.read_to_end(&mut rest).await;
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));

    // Two requests on one connection, each body read: it stays open.
    let bearer = token("alice", 600, SECRET);
    let mut kept = tokio::net::TcpStream::connect(host).await.unwrap();
    let body = json!({"agent": "demo"}).to_string();
    let requests = [
        format!(
            "POST /v1/chats HTTP/1.1\r\nHost: {host}\r\nauthorization: Bearer {bearer}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
        format!("GET /v1/chats HTTP/1.1\r\nHost: {host}\r\nauthorization: Bearer {bearer}\r\n\r\n"),
    ];
    let mut statuses = Vec::new();
    for request in requests {
        kept.write_all(request.as_bytes()).await.unwrap();
        let (status, headers, body) = response(&mut kept).await;
        assert!(!headers.contains("connection: close"), "{headers}");
        statuses.push((status, body.contains("\"chats\"")));
    }
    assert_eq!(statuses, [(201, false), (200, true)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_is_the_claim_the_settings_name() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            jwt_user_claim: Some("email".into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let signed = |claims: serde_json::Value| signed(&claims, SECRET);
    let exp = chrono::Utc::now().timestamp() + 600;
    let ada = signed(json!({"sub": "u-1", "email": "ada@example.com", "exp": exp}));
    let mut c = connect_as(&server, &ada).await;
    let chat = Uuid::new_v4();
    c.start(chat, "hello").await;
    c.until_complete(chat).await;

    // The chat is the email's, whatever `sub` says.
    let lists = |t: String| {
        let addr = server.addr;
        async move {
            let auth = format!("Bearer {t}");
            http_get(addr, "/v1/chats", &[("authorization", &auth)]).await
        }
    };
    let same_email = signed(json!({"sub": "u-2", "email": "ada@example.com", "exp": exp}));
    let (status, body) = lists(same_email).await;
    assert_eq!(status, 200);
    assert!(body.contains(&chat.to_string()), "{body}");
    let same_sub = signed(json!({"sub": "u-1", "email": "eve@example.com", "exp": exp}));
    let (status, body) = lists(same_sub).await;
    assert_eq!(status, 200);
    assert!(!body.contains(&chat.to_string()), "{body}");
    // A token without the claim names nobody.
    let no_email = signed(json!({"sub": "u-1", "exp": exp}));
    assert_eq!(lists(no_email).await.0, 401);
    assert_eq!(
        refused(
            &server.ws_url(),
            Some(&signed(json!({"sub": "u-1", "exp": exp})))
        )
        .await,
        401
    );
}
