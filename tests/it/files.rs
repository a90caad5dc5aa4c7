//! Files in and out over HTTP (issue 36): an upload streamed into the store
//! with its media type sniffed, served back whole or by range as a download
//! that cannot run in the page's origin; limits refused with nothing
//! stored; only the owner reaches a file; a file outlives a restart and
//! goes with its chat.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::auth::{SECRET, token};
use crate::support::*;

/// A user's HTTP client on a JWT server.
struct User {
    http: reqwest::Client,
    base: String,
    bearer: String,
}

impl User {
    fn new(server: &Server, name: &str) -> Self {
        Self {
            http: agentwire::llm::http_client(),
            base: format!("http://{}", server.addr),
            bearer: token(name, 600, SECRET),
        }
    }

    async fn chat(&self) -> Uuid {
        let chat = Uuid::new_v4();
        let r = self
            .http
            .post(format!("{}/v1/chats", self.base))
            .bearer_auth(&self.bearer)
            .json(&json!({"agent": "demo", "chat_id": chat}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        chat
    }

    async fn upload(&self, chat: Uuid, name: &str, kind: &str, bytes: Vec<u8>) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}/v1/chats/{chat}/files", self.base))
            .query(&[("name", name)])
            .bearer_auth(&self.bearer)
            .header("content-type", kind)
            .body(bytes)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn download(&self, id: &Value, range: Option<&str>) -> reqwest::Response {
        let mut req = self
            .http
            .get(format!("{}/v1/files/{}", self.base, id.as_str().unwrap()))
            .bearer_auth(&self.bearer);
        if let Some(r) = range {
            req = req.header("range", r);
        }
        req.send().await.unwrap()
    }
}

async fn server(settings: agentwire::config::Settings) -> Server {
    Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            ..settings
        },
        ..Default::default()
    })
    .await
}

fn png(len: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    bytes.extend((0..len).map(|i| (i * 7 % 251) as u8));
    bytes
}

fn header(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_file_is_uploaded_sniffed_and_served_back_whole_or_by_range() {
    let server = server(Default::default()).await;
    let gina = User::new(&server, "gina");
    let chat = gina.chat().await;
    // Over two chunks of the store, so a range crosses one.
    let bytes = png(1_300_000);
    let (status, file) = gina
        .upload(chat, "cat.png", "image/png", bytes.clone())
        .await;
    assert_eq!(status, 201, "{file}");
    assert_eq!(file["media_type"], "image/png");
    assert_eq!(file["size"], bytes.len());
    assert_eq!(file["name"], "cat.png");
    assert_eq!(file["chat_id"], chat.to_string());
    assert_eq!(file["sha256"], hex::encode(Sha256::digest(&bytes)));

    let r = gina.download(&file["id"], None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type"), "image/png");
    assert_eq!(
        header(&r, "content-disposition"),
        "attachment; filename=\"cat.png\"; filename*=UTF-8''cat.png"
    );
    assert_eq!(header(&r, "x-content-type-options"), "nosniff");
    assert_eq!(
        header(&r, "content-security-policy"),
        "default-src 'none'; sandbox"
    );
    assert_eq!(header(&r, "accept-ranges"), "bytes");
    assert_eq!(r.bytes().await.unwrap().to_vec(), bytes);

    // A read ignores a body, even one over every limit.
    let big = gina
        .http
        .get(format!(
            "{}/v1/files/{}",
            gina.base,
            file["id"].as_str().unwrap()
        ))
        .bearer_auth(&gina.bearer)
        .body(vec![b'x'; 2 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 200);
    // The server answers without reading the body, then closes the
    // connection: its kernel may reset it under the unread bytes before
    // the whole answer is read. Whatever arrives is the file's start.
    if let Ok(got) = big.bytes().await {
        assert_eq!(got.to_vec(), bytes);
    }

    let r = gina
        .download(&file["id"], Some("bytes=524280-524300"))
        .await;
    assert_eq!(r.status(), 206);
    let total = bytes.len();
    assert_eq!(
        header(&r, "content-range"),
        format!("bytes 524280-524300/{total}")
    );
    assert_eq!(r.bytes().await.unwrap().to_vec(), bytes[524_280..=524_300]);
    let r = gina.download(&file["id"], Some("bytes=-5")).await;
    assert_eq!(r.bytes().await.unwrap().to_vec(), bytes[total - 5..]);
    let r = gina
        .download(&file["id"], Some(&format!("bytes={total}-")))
        .await;
    assert_eq!(r.status(), 416);
    assert_eq!(header(&r, "content-range"), format!("bytes */{total}"));

    // What a browser would run: HTML is refused, an SVG kept as text and
    // served as a download.
    let page = b"<html><script>fetch('https://evil.example/')</script></html>".to_vec();
    let (status, err) = gina.upload(chat, "x.html", "text/plain", page).await;
    assert_eq!(status, 400, "{err}");
    let svg =
        b"<svg xmlns='http://www.w3.org/2000/svg' onload=\"fetch('https://evil.example/')\"/>"
            .to_vec();
    let (status, kept) = gina
        .upload(chat, "<b>x</b>.svg", "image/svg+xml", svg.clone())
        .await;
    assert_eq!(
        (status, &kept["media_type"]),
        (201, &json!("text/plain")),
        "{kept}"
    );
    assert_eq!(kept["name"], "<b>x<_b>.svg", "no path in a name");
    let r = gina.download(&kept["id"], None).await;
    assert_eq!(header(&r, "content-type"), "text/plain");
    assert!(header(&r, "content-disposition").starts_with("attachment;"));
    assert_eq!(r.bytes().await.unwrap().to_vec(), svg);
    let (status, csv) = gina
        .upload(chat, "a.csv", "text/csv", b"a,b\n1,2\n".to_vec())
        .await;
    assert_eq!((status, &csv["media_type"]), (201, &json!("text/csv")));

    // Outlives a restart.
    let dir = server.stop().await;
    let server = Server::start_in(
        dir,
        Opts {
            settings: agentwire::config::Settings {
                auth: Some(agentwire::config::AuthMode::Jwt),
                jwt_secret: Some(SECRET.into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    let gina = User::new(&server, "gina");
    let r = gina.download(&file["id"], None).await;
    assert_eq!(r.bytes().await.unwrap().to_vec(), bytes);
}

#[tokio::test]
async fn limits_are_refused_with_nothing_stored_and_only_the_owner_reaches_a_file() {
    let server = server(agentwire::config::Settings {
        max_file_bytes: Some(600_000),
        max_user_file_bytes: Some(1_000_000),
        ..Default::default()
    })
    .await;
    let (gina, hank) = (User::new(&server, "gina"), User::new(&server, "hank"));
    let chat = gina.chat().await;
    let too_big = gina
        .upload(chat, "big.png", "image/png", png(700_000))
        .await;
    assert_eq!(too_big.0, 413, "{}", too_big.1);
    assert_eq!(too_big.1["error"]["code"], "SCHEMA_VALIDATION_FAILED");
    let binary = gina
        .upload(
            chat,
            "a.bin",
            "application/octet-stream",
            vec![0, 1, 2, 255],
        )
        .await;
    assert_eq!(binary.0, 400, "{}", binary.1);
    assert!(
        binary.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("file_media_types")
    );
    // Nothing of either counts against the quota: two files of 500 KB fit.
    let (status, first) = gina.upload(chat, "a.png", "image/png", png(500_000)).await;
    assert_eq!(status, 201, "{first}");
    // The same content again is stored once.
    let (status, again) = gina.upload(chat, "b.png", "image/png", png(500_000)).await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(again["sha256"], first["sha256"]);
    assert_ne!(again["id"], first["id"]);
    let (status, over) = gina.upload(chat, "c.png", "image/png", png(500_001)).await;
    assert_eq!(status, 413, "over the user's bytes: {over}");

    // Another user: not their chat, not their file.
    let (status, err) = hank.upload(chat, "x.png", "image/png", png(10)).await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (404, &json!("RESUME_FAILED"))
    );
    let r = hank.download(&first["id"], None).await;
    assert_eq!(r.status(), 404);
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["error"]["code"], "FILE_NOT_FOUND");
    let r = hank
        .download(&json!(Uuid::new_v4().to_string()), None)
        .await;
    assert_eq!(r.status(), 404);
    let r = gina.download(&json!("not-an-id"), None).await;
    assert_eq!(r.status(), 404);

    // An archived chat takes no file.
    let archived = gina.chat().await;
    let gone = gina
        .http
        .delete(format!("{}/v1/chats/{archived}", gina.base))
        .bearer_auth(&gina.bearer)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 204);
    let (status, err) = gina
        .upload(archived, "a.txt", "text/plain", b"hi".to_vec())
        .await;
    assert_eq!(status, 409, "{err}");

    // Deleting the chat deletes its files.
    let purge = gina
        .http
        .delete(format!("{}/v1/chats/{chat}?purge=true", gina.base))
        .bearer_auth(&gina.bearer)
        .send()
        .await
        .unwrap();
    assert_eq!(purge.status(), 204);
    assert_eq!(gina.download(&first["id"], None).await.status(), 404);
    let chat = gina.chat().await;
    let (status, _) = gina.upload(chat, "d.png", "image/png", png(500_001)).await;
    assert_eq!(status, 201, "the quota is free again");
}

#[tokio::test]
async fn uploads_count_against_the_turn_rate_and_a_cross_origin_page_cannot_upload() {
    let server = server(agentwire::config::Settings {
        rate_messages_per_minute: Some(2),
        ..Default::default()
    })
    .await;
    let gina = User::new(&server, "gina");
    let chat = gina.chat().await;
    for i in 0..2 {
        let (status, body) = gina
            .upload(chat, "a.txt", "text/plain", vec![b'a'; i + 1])
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, err) = gina
        .upload(chat, "a.txt", "text/plain", b"again".to_vec())
        .await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (429, &json!("RATE_LIMIT_EXCEEDED"))
    );

    // Auth mode `none`: the body is not JSON, but the origin guard holds.
    let open = Server::start().await;
    let chat = Uuid::new_v4();
    let made = json!({"agent": "demo", "chat_id": chat}).to_string();
    assert_eq!(http_json(&open, "POST", "/v1/chats", &made).await.0, 201);
    let path = format!("/v1/chats/{chat}/files?name=x.txt");
    let evil = [
        ("content-type", "text/plain"),
        ("origin", "https://evil.example"),
    ];
    let (status, body) = http_request(open.addr, "POST", &path, &evil, "hello").await;
    assert_eq!(status, 403, "{body}");
    let own = [("content-type", "text/plain")];
    let (status, body) = http_request(open.addr, "POST", &path, &own, "hello").await;
    assert_eq!(status, 201, "{body}");
}

/// Two nodes on one PostgreSQL: a file uploaded through one is served by
/// the other (the blobs are the database's, not a node's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_uploaded_on_one_node_is_served_and_attached_on_another() {
    if on_postgres() {
        return; // A cluster test: run once, in the default pass.
    }
    let Some(pg) = agentwire::testing::postgres() else {
        return;
    };
    let url = pg.fresh_database().await;
    let agents = tempfile::tempdir().unwrap();
    let (_a, a) = spawn_agentwire(&url, agents.path(), &[]).await;
    let (_b, b) = spawn_agentwire(&url, agents.path(), &[]).await;
    let http = agentwire::llm::http_client();
    let chat = Uuid::new_v4();
    let made = http
        .post(format!("http://{a}/v1/chats"))
        .json(&json!({"agent": "demo", "chat_id": chat}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    let bytes = png(700_000);
    let up = http
        .post(format!("http://{a}/v1/chats/{chat}/files?name=cat.png"))
        .header("content-type", "image/png")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(up.status(), 201);
    let file: Value = up.json().await.unwrap();
    let id = file["id"].as_str().unwrap();
    let down = http
        .get(format!("http://{b}/v1/files/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(down.status(), 200);
    assert_eq!(down.bytes().await.unwrap().to_vec(), bytes);
    let part = http
        .get(format!("http://{b}/v1/files/{id}"))
        .header("range", "bytes=524287-524288")
        .send()
        .await
        .unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(
        part.bytes().await.unwrap().to_vec(),
        bytes[524_287..=524_288]
    );

    // A message sent to the other node attaches it: the request travels to
    // the node running the chat with its files, and the model reads them.
    let mut c = Client::connect(&format!("ws://{b}/v1/ws")).await;
    c.resume(chat, 0).await;
    c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    c.send(
        json!({"type": "user.message", "chat_id": chat, "text": "look",
                  "attachments": [{"file_id": id}]}),
    )
    .await;
    let msgs = c.until_complete(chat).await;
    let said = msgs
        .iter()
        .find(|m| m["type"] == "chat.text" && m["agent"] == "user")
        .unwrap();
    assert_eq!(said["attachments"][0]["file_id"], id);
    assert_eq!(
        last_text(&msgs),
        format!(
            "You said: look\nYou attached: cat.png (image/png, {} bytes)",
            bytes.len()
        )
    );
}

/// Staged chunks of `dir`'s database (rows of uploads not sealed).
async fn staged_chunks(dir: &std::path::Path) -> i64 {
    let url = database_url(dir).await;
    let sql = "SELECT COUNT(*) FROM blob_chunks WHERE blob NOT IN (SELECT chunks FROM blobs)";
    if on_postgres() {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        pool.close().await;
        n
    } else {
        let path = url.strip_prefix("sqlite://").unwrap().to_owned();
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }
}

#[tokio::test]
async fn an_upload_cut_off_by_its_client_leaves_nothing_staged() {
    use tokio::io::AsyncWriteExt;
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let made = json!({"agent": "demo", "chat_id": chat}).to_string();
    assert_eq!(http_json(&server, "POST", "/v1/chats", &made).await.0, 201);
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /v1/chats/{chat}/files?name=big.png HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: image/png\r\nContent-Length: 3000000\r\n\r\n",
        server.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&png(1_200_000)).await.unwrap();
    stream.flush().await.unwrap();
    // Two chunks are staged by now (or soon): then the client goes.
    let mut seen = 0;
    for _ in 0..200 {
        seen = staged_chunks(server.dir.path()).await;
        if seen >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(seen >= 2, "the upload was being stored: {seen}");
    drop(stream);
    let mut left = seen;
    for _ in 0..250 {
        left = staged_chunks(server.dir.path()).await;
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(left, 0, "what the cut upload staged is dropped");
}
