//! Chats spread over two PostgreSQL databases (`[[databases]]`) with two
//! nodes: each chat's rows in the database its id hashes to, a node
//! forwarding to the other across both, the list merged from both; one
//! database down fails its own chats with `PERSISTENCE_ERROR` and no other,
//! and when it is back they go on where they stopped.
//!
//! Run in the default pass only (as `cluster::`), on the test PostgreSQL.

use serde_json::{Value, json};
use sqlx::Connection as _;
use uuid::Uuid;

use crate::cluster::cluster_database;
use crate::support::*;

/// The rows of `table` in `url`'s database whose `column` is `chat`.
async fn rows(url: &str, table: &str, column: &str, chat: Uuid) -> i64 {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {table} WHERE {column} = $1"
    )))
    .bind(chat)
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

/// A new chat id that `[[databases]]` `a`, `b` place in database `i`.
fn placed_in(i: usize) -> Uuid {
    let names = ["a".to_owned(), "b".to_owned()];
    loop {
        let id = Uuid::new_v4();
        if agentwire::store::place(&names, id.as_bytes()) == i {
            return id;
        }
    }
}

/// Reads until `chat`'s `chat.error`, a `PERSISTENCE_ERROR`.
async fn persistence_error(c: &mut Client, chat: Uuid) {
    let failed = c
        .recv_until(|m| m["type"] == "chat.error" && m["chat_id"] == chat.to_string())
        .await;
    let code = &failed.last().unwrap()["error_code"];
    assert_eq!(code, "PERSISTENCE_ERROR", "{failed:?}");
}

/// Reads until the agent says `text` in `chat`.
async fn until_said(c: &mut Client, chat: Uuid, text: &str) -> Vec<Value> {
    c.recv_until(|m| {
        m["type"] == "chat.text" && m["chat_id"] == chat.to_string() && m["content"] == text
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_databases_one_down_fails_only_its_own_chats() {
    let (Some(a), Some(b)) = (cluster_database().await, cluster_database().await) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentwire.toml");
    std::fs::write(
        &config,
        format!(
            "[[databases]]\nname = \"a\"\nurl = \"{a}\"\n\n[[databases]]\nname = \"b\"\nurl = \"{b}\"\n"
        ),
    )
    .unwrap();
    let node = || {
        Server::start_with(Opts {
            settings: agentwire::config::Settings {
                config: Some(config.clone()),
                ..Default::default()
            },
            ..Default::default()
        })
    };
    let (one, two) = (node().await, node().await);

    // A chat in each database, started on node one: each one's rows are
    // in its database and nowhere else.
    let (on_a, on_b) = (placed_in(0), placed_in(1));
    let mut c = one.client().await;
    for chat in [on_a, on_b] {
        c.start(chat, "hello").await;
        assert_eq!(last_text(&c.until_complete(chat).await), "You said: hello");
    }
    for (chat, here, there) in [(on_a, &a, &b), (on_b, &b, &a)] {
        assert_eq!(rows(here, "chats", "id", chat).await, 1);
        assert!(rows(here, "envelopes", "chat_id", chat).await >= 3);
        assert_eq!(rows(here, "chat_leases", "chat_id", chat).await, 1);
        assert_eq!(rows(there, "chats", "id", chat).await, 0);
        assert_eq!(rows(there, "envelopes", "chat_id", chat).await, 0);
    }

    // Node two lists both, and a message to either reaches its owner.
    let (code, body) = http_get(two.addr, "/v1/chats", &[]).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(&on_a.to_string()) && body.contains(&on_b.to_string()));
    let mut d = two.client().await;
    for chat in [on_a, on_b] {
        d.resume(chat, 0).await;
        d.recv_until(|m| m["type"] == "chat.resume_boundary").await;
        d.say(chat, "from two").await;
        until_said(&mut d, chat, "You said: from two").await;
    }

    // Database `b` goes down.
    agentwire::testing::set_database_down(&b, true).await;
    // `a`'s chat goes on, on both nodes, and a new one starts there.
    c.say(on_a, "still here").await;
    until_said(&mut c, on_a, "You said: still here").await;
    let fresh_a = placed_in(0);
    d.start(fresh_a, "new").await;
    assert_eq!(last_text(&d.until_complete(fresh_a).await), "You said: new");
    // `b`'s chat answers a clear error; so does a new chat placed there,
    // and the list, which cannot be whole.
    c.say(on_b, "lost?").await;
    persistence_error(&mut c, on_b).await;
    let fresh_b = placed_in(1);
    d.start(fresh_b, "new").await;
    persistence_error(&mut d, fresh_b).await;
    let (code, body) = http_get(two.addr, "/v1/chats", &[]).await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("PERSISTENCE_ERROR"), "{body}");
    let (code, _) = http_get(two.addr, &format!("/v1/chats/{on_a}"), &[]).await;
    assert_eq!(code, 200, "a chat in `a` is read");
    let (code, _) = http_get(two.addr, "/healthz", &[]).await;
    assert_eq!(code, 200, "the node stays in its balancer's rotation");

    // Back: `b`'s chat goes on from where its log stopped, gap-free.
    agentwire::testing::set_database_down(&b, false).await;
    let mut said = false;
    for _ in 0..40 {
        c.say(on_b, "back").await;
        let got = c
            .recv_until(|m| {
                m["chat_id"] == on_b.to_string()
                    && (m["type"] == "chat.error"
                        || (m["type"] == "chat.text" && m["content"] == "You said: back"))
            })
            .await;
        if got.last().unwrap()["type"] == "chat.text" {
            said = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(said, "the chat in `b` works again");
    let mut e = two.client().await;
    e.resume(on_b, 0).await;
    let replay = e.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    assert_gap_free(&seqs(&replay));
    let texts: Vec<&Value> = replay
        .iter()
        .filter(|m| m["type"] == "chat.text")
        .map(|m| &m["content"])
        .collect();
    assert!(
        !texts.contains(&&json!("lost?")),
        "a message the log refused is not in it: {texts:?}"
    );
}

/// The error `settings` make the server stop with at its start.
async fn refused(settings: agentwire::config::Settings) -> String {
    let config = settings.resolve().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let run = agentwire::run(config, listener, std::future::pending());
    let result = tokio::time::timeout(std::time::Duration::from_secs(60), run)
        .await
        .expect("refused at its start");
    format!("{:#}", result.expect_err("refused"))
}

/// `[[databases]]` as a configuration file in `dir`.
fn spread_file(dir: &std::path::Path, databases: &[(&str, &str)]) -> std::path::PathBuf {
    let path = dir.join(format!("spread-{}.toml", Uuid::new_v4()));
    let text: String = databases
        .iter()
        .map(|(name, url)| format!("[[databases]]\nname = \"{name}\"\nurl = \"{url}\"\n\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// A chat's database is chosen by its id and the databases' names, so a
/// list that changed would look for chats in the wrong place: a server
/// started on another list, on one of the databases alone, or with one
/// replaced by an empty one, is refused with a message that says so, and
/// the list it knows starts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_list_of_databases_is_refused_at_start() {
    let (Some(a), Some(b), Some(c)) = (
        cluster_database().await,
        cluster_database().await,
        cluster_database().await,
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let with = |config| agentwire::config::Settings {
        config: Some(config),
        agents_dir: Some(dir.path().join("agents")),
        ..Default::default()
    };
    let first = spread_file(dir.path(), &[("a", &a), ("b", &b)]);
    let node = Server::start_with(Opts {
        settings: with(first.clone()),
        ..Default::default()
    })
    .await;
    let mut client = node.client().await;
    let chat = placed_in(1);
    client.start(chat, "kept").await;
    client.until_complete(chat).await;
    // (and one in `a`: a spread that holds chats)
    let other = placed_in(0);
    client.start(other, "also").await;
    client.until_complete(other).await;
    drop(client);
    node.stop().await;

    let grown = spread_file(dir.path(), &[("a", &a), ("b", &b), ("c", &c)]);
    let why = refused(with(grown)).await;
    assert!(why.contains("[a, b]") && why.contains("[a, b, c]"), "{why}");
    assert!(why.contains("wrong database"), "{why}");
    let swapped = spread_file(dir.path(), &[("b", &b), ("a", &a)]);
    let why = refused(with(swapped)).await;
    assert!(why.contains("[b, a]"), "{why}");
    let why = refused(agentwire::config::Settings {
        database_url: Some(b.clone()),
        agents_dir: Some(dir.path().join("agents")),
        ..Default::default()
    })
    .await;
    assert!(why.contains("one of [a, b]"), "{why}");

    // A database of the spread replaced by an empty one (`c` as `b`).
    let replaced = spread_file(dir.path(), &[("a", &a), ("b", &c)]);
    let why = refused(with(replaced)).await;
    assert!(why.contains("cannot be replaced by an empty one"), "{why}");

    // The list it knows: the chat is where it was.
    let node = Server::start_with(Opts {
        settings: with(first),
        ..Default::default()
    })
    .await;
    let mut client = node.client().await;
    client.resume(chat, 0).await;
    let replay = client
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    assert_eq!(last_text(&replay), "You said: kept");
}
