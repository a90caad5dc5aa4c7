//! Users' database connections (seed 003): per user, the password encrypted
//! at rest (never in the store's files, never in an answer), SQLite files
//! only from the configured folder.

use serde_json::{Value, json};

use crate::input::files_containing;
use crate::support::*;

const PASSWORD: &str = "correct-horse-battery-staple-7731";
/// A public address (TEST-NET-3): accepted, never connected to here.
const HOST: &str = "203.0.113.5";
const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn settings(files: Option<std::path::PathBuf>) -> agentwire::config::Settings {
    agentwire::config::Settings {
        master_key: Some(KEY.into()),
        connection_files_dir: files,
        ..Default::default()
    }
}

async fn send(server: &Server, method: &str, path: &str, body: Value) -> (u16, Value) {
    http_json(server, method, path, &body.to_string()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_goes_in_encrypted_and_never_comes_out() {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("shop.db"), b"").unwrap();
    let server = Server::start_with(Opts {
        settings: settings(Some(files.path().to_owned())),
        ..Default::default()
    })
    .await;
    let pg = json!({"name": "warehouse", "driver": "postgres", "host": HOST, "port": 5432,
                    "database": "shop", "username": "analyst", "password": PASSWORD});
    let (status, made) = send(&server, "POST", "/connections", pg.clone()).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["has_password"], true);
    assert_eq!(made["driver"], "postgres");
    let id = made["id"].as_str().unwrap().to_owned();
    let (status, lite) = send(
        &server,
        "POST",
        "/v1/connections",
        json!({"name": "local", "driver": "sqlite", "path": "shop.db"}),
    )
    .await;
    assert_eq!(status, 201, "{lite}");
    assert_eq!(lite["has_password"], false);

    // Both prefixes list the same, oldest first; no answer holds the password.
    let (_, list) = http_json(&server, "GET", "/v1/connections", "").await;
    let (_, same) = http_json(&server, "GET", "/connections", "").await;
    assert_eq!(list, same);
    let names: Vec<_> = list["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(names, [json!("warehouse"), json!("local")]);
    let (status, one) = http_json(&server, "GET", &format!("/v1/connections/{id}"), "").await;
    assert_eq!(status, 200);
    for answer in [&made, &lite, &list, &one] {
        assert!(!answer.to_string().contains(PASSWORD));
    }

    // PUT without a password keeps it; `null` removes it.
    let mut renamed = pg.clone();
    renamed["name"] = json!("renamed");
    renamed.as_object_mut().unwrap().remove("password");
    let (status, kept) = send(
        &server,
        "PUT",
        &format!("/connections/{id}"),
        renamed.clone(),
    )
    .await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(
        (kept["name"].clone(), kept["has_password"].clone()),
        (json!("renamed"), json!(true))
    );

    // Not in the database or its WAL.
    if !on_postgres() {
        assert!(server.data_dir().join("agentwire.db-wal").exists());
        let seen: Vec<String> = files_containing(&server.data_dir(), HOST.as_bytes());
        assert!(!seen.is_empty(), "the scan reads the stored connection");
        assert_eq!(
            files_containing(&server.data_dir(), PASSWORD.as_bytes()),
            Vec::<String>::new()
        );
    }

    // A kept password does not follow the connection to another host.
    let mut moved = renamed.clone();
    moved["host"] = json!("198.51.100.7");
    let (status, err) = send(&server, "PUT", &format!("/connections/{id}"), moved).await;
    assert_eq!(status, 400, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("password"),
        "{err}"
    );

    renamed["password"] = Value::Null;
    let (_, cleared) = send(&server, "PUT", &format!("/connections/{id}"), renamed).await;
    assert_eq!(cleared["has_password"], false);
    let (status, _) = http_json(&server, "DELETE", &format!("/v1/connections/{id}"), "").await;
    assert_eq!(status, 204);
    let (status, gone) = http_json(&server, "GET", &format!("/v1/connections/{id}"), "").await;
    assert_eq!(
        (status, gone["error"]["code"].clone()),
        (404, json!("CONNECTION_NOT_FOUND"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_connections_are_refused_with_what_is_wrong() {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("shop.db"), b"").unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    // No master key: a password is refused, naming the variable.
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            connection_files_dir: Some(files.path().to_owned()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let pg = json!({"name": "w", "driver": "postgres", "host": HOST, "database": "shop", "username": "u", "password": "x"});
    let (status, err) = send(&server, "POST", "/v1/connections", pg).await;
    assert_eq!(status, 400);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("AGENTWIRE_MASTER_KEY"),
        "{err}"
    );
    for (body, says) in [
        (json!({"name": "w", "driver": "mysql"}), "driver"),
        (
            json!({"name": "w", "driver": "postgres", "database": "shop"}),
            "host",
        ),
        (
            json!({"name": "w", "driver": "postgres", "host": HOST, "database": "shop"}),
            "username",
        ),
        (
            json!({"name": "w", "driver": "postgres", "host": "127.0.0.1", "database": "shop", "username": "u"}),
            "connection_hosts",
        ),
        (
            json!({"name": "w", "driver": "postgres", "host": "/var/run/postgresql", "database": "shop", "username": "u"}),
            "connection_hosts",
        ),
        (
            json!({"name": "w", "driver": "postgres", "host": "[::1]", "database": "shop", "username": "u"}),
            "connection_hosts",
        ),
        (
            json!({"name": "w", "driver": "postgres", "host": "10.1.2.3", "database": "shop", "username": "u"}),
            "connection_hosts",
        ),
        (
            json!({"name": "", "driver": "sqlite", "path": "shop.db"}),
            "name",
        ),
        (
            json!({"name": "w", "driver": "sqlite", "path": "../x.db"}),
            "path",
        ),
        (
            json!({"name": "w", "driver": "sqlite", "path": outside.path()}),
            "path",
        ),
        (
            json!({"name": "w", "driver": "sqlite", "path": "shop.db", "extra": 1}),
            "extra",
        ),
    ] {
        let (status, err) = send(&server, "POST", "/v1/connections", body.clone()).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert!(
            err["error"]["message"].as_str().unwrap().contains(says),
            "{body}: {err}"
        );
    }
    let (status, _) = http_json(&server, "GET", "/v1/connections/not-a-uuid", "").await;
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_sees_and_changes_only_their_own() {
    use crate::auth::{SECRET, token};
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            ..settings(None)
        },
        ..Default::default()
    })
    .await;
    let client = agentwire::llm::http_client();
    let url = |p: &str| format!("http://{}{p}", server.addr);
    let (alice, bob) = (token("alice", 600, SECRET), token("bob", 600, SECRET));
    let body = json!({"name": "w", "driver": "postgres", "host": HOST, "database": "shop", "username": "u", "password": PASSWORD});
    let made: Value = client
        .post(url("/v1/connections"))
        .bearer_auth(&alice)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let path = format!("/v1/connections/{}", made["id"].as_str().unwrap());
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(
        status(
            client
                .get(url(&path))
                .bearer_auth(&bob)
                .send()
                .await
                .unwrap()
        ),
        404
    );
    assert_eq!(
        status(
            client
                .put(url(&path))
                .bearer_auth(&bob)
                .json(&body)
                .send()
                .await
                .unwrap()
        ),
        404
    );
    assert_eq!(
        status(
            client
                .delete(url(&path))
                .bearer_auth(&bob)
                .send()
                .await
                .unwrap()
        ),
        404
    );
    let bobs = |p: &str| {
        let sent = client.get(url(p)).bearer_auth(&bob).send();
        async move { sent.await.unwrap().json::<Value>().await.unwrap() }
    };
    assert_eq!(bobs("/connections").await["connections"], json!([]));
    // Said as what it is: no connection of that id is Bob's.
    let err = bobs(&path).await;
    assert_eq!(err["error"]["code"], "CONNECTION_NOT_FOUND", "{err}");
    assert_eq!(status(client.get(url(&path)).send().await.unwrap()), 401);
    assert_eq!(
        status(
            client
                .get(url(&path))
                .bearer_auth(&alice)
                .send()
                .await
                .unwrap()
        ),
        200
    );
}

/// With no `connection_hosts`, a host that leads to the server's own network
/// is refused however it is written: numbers in the forms only some parsers
/// read (each 127.0.0.1 or 10.0.0.1), and a name that resolves inside.
/// Nothing is stored, and a connection cannot be moved there either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_inside_is_refused_however_it_is_written() {
    let server = Server::start_with(Opts {
        settings: settings(None),
        ..Default::default()
    })
    .await;
    let pg = |host: &str| {
        json!({"name": "w", "driver": "postgres", "host": host, "port": 5432,
               "database": "shop", "username": "u"})
    };
    for (host, says) in [
        ("127.1", "usual form"),
        ("2130706433", "usual form"),
        ("0x7f000001", "usual form"),
        ("0177.0.0.1", "usual form"),
        ("0", "usual form"),
        ("10.1", "usual form"),
        ("0.0.0.0", "own network"),
        ("[::ffff:127.0.0.1]", "own network"),
        ("localhost", "resolves to 127.0.0.1"),
    ] {
        let (status, err) = send(&server, "POST", "/v1/connections", pg(host)).await;
        assert_eq!(
            (status, &err["error"]["code"]),
            (400, &json!("SCHEMA_VALIDATION_FAILED")),
            "{host}: {err}"
        );
        let message = err["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(says) && message.contains(host),
            "{host}: {err}"
        );
    }
    let (_, list) = http_json(&server, "GET", "/v1/connections", "").await;
    assert_eq!(list["connections"], json!([]), "nothing was stored");

    let (status, made) = send(&server, "POST", "/v1/connections", pg(HOST)).await;
    assert_eq!(status, 201, "{made}");
    let path = format!("/v1/connections/{}", made["id"].as_str().unwrap());
    let (status, err) = send(&server, "PUT", &path, pg("127.1")).await;
    assert_eq!(status, 400, "{err}");
    let (_, kept) = http_json(&server, "GET", &path, "").await;
    assert_eq!(kept["host"], HOST);
}
