//! Keys for backends and the server API (issue 38): `agentwire keys` makes,
//! lists and revokes service keys beside a running server; a key acts with
//! its scopes on `/v1/server/…` and never as a user; what it publishes is
//! logged and reaches the user's connections live like any envelope; the
//! new routes have the old ones' limits.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{SECRET, jwt_server, token};
use crate::support::*;

/// `agentwire keys <args>` on the server's database: its stdout, or the
/// failure's stderr.
pub async fn keys(server: &Server, args: &[&str]) -> Result<String, String> {
    keys_at(&database_url(server.dir.path()).await, args).await
}

/// [`keys`] on the database at `url`.
pub async fn keys_at(url: &str, args: &[&str]) -> Result<String, String> {
    let cwd = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .arg("keys")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AGENTWIRE_DATABASE_URL", url)
        .current_dir(cwd.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    match out.status.success() {
        true => Ok(stdout.trim().to_owned()),
        false => Err(stderr),
    }
}

/// A request with `bearer`; the status and the JSON body.
pub async fn call(
    server: &Server,
    method: &str,
    path: &str,
    bearer: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let auth = format!("Bearer {bearer}");
    let mut headers = vec![("authorization", auth.as_str())];
    if body.is_some() {
        headers.push(("content-type", "application/json"));
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, text) = http_request(server.addr, method, path, &headers, &body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub async fn connect_as(server: &Server, user: &str) -> Client {
    Client::connect(&format!(
        "{}?access_token={}",
        server.ws_url(),
        token(user, 600, SECRET)
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_key_starts_and_posts_into_a_users_chat_live() {
    let server = jwt_server().await;
    // Made while the server runs (on SQLite, beside the process that holds
    // the file); printed once.
    let publish = keys(
        &server,
        &["create", "--name", "billing", "--scopes", "publish"],
    )
    .await
    .unwrap();
    assert!(publish.starts_with("awk_"), "{publish}");
    let read = keys(
        &server,
        &["create", "--name", "reports", "--scopes", "read"],
    )
    .await
    .unwrap();
    let listed = keys(&server, &["list"]).await.unwrap();
    assert!(
        listed.contains("billing") && listed.contains("reports"),
        "{listed}"
    );
    assert!(!listed.contains(&publish[4..]) && !listed.contains(&read[4..]));
    // A live name is one key; unknown scopes are refused.
    let again = keys(
        &server,
        &["create", "--name", "billing", "--scopes", "read"],
    )
    .await;
    assert!(again.unwrap_err().contains("billing"));
    let bad = keys(&server, &["create", "--name", "x", "--scopes", "owner"]).await;
    assert!(bad.unwrap_err().contains("owner"));

    // A chat started for alice by the backend: an event, told as her turn.
    let chat = Uuid::new_v4();
    let (status, body) = call(
        &server,
        "POST",
        "/v1/server/chats",
        &publish,
        Some(json!({"user": "alice", "agent": "demo", "chat_id": chat,
                    "message": "the export finished", "context": {"job": 7}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["id"], chat.to_string());
    let mut alice = connect_as(&server, "alice").await;
    alice.resume(chat, 0).await;
    let log = alice.until_complete(chat).await;
    assert_eq!(last_text(&log), "You said: the export finished");

    // Posted while she follows it: delivered live, as the agent and as the
    // system, a widget with it.
    let (status, posted) = call(
        &server,
        "POST",
        &format!("/v1/server/chats/{chat}/posts"),
        &publish,
        Some(json!({"user": "alice", "text": "Your report is ready",
                    "widget": {"component_type": "report_card",
                               "payload": {"title": "<img src=x onerror=alert(1)>", "rows": 12},
                               "display": "artifact"}})),
    )
    .await;
    assert_eq!(status, 201, "{posted}");
    let live: Vec<Value> = alice
        .until_complete(chat)
        .await
        .into_iter()
        .filter(|m| m["type"] != "chat.resume_boundary")
        .collect();
    for m in &live {
        assert_outbound_valid(m);
    }
    assert_eq!(
        types(&live),
        [
            "chat.select_speaker",
            "chat.print",
            "chat.text",
            "chat.tool_call",
            "chat.tool_response",
            "chat.run_complete"
        ]
    );
    assert_eq!(live[2]["agent"], "demo");
    assert_eq!(live[2]["content"], "Your report is ready");
    assert_eq!(live[3]["component_type"], "report_card");
    assert_eq!(live[3]["display"], "artifact");
    assert_eq!(live[3]["corr"], posted["corr"]);
    assert_eq!(posted["last_seq"], live[5]["seq"]);
    assert_gap_free(&seqs(&[log.clone(), live.clone()].concat()));

    let (status, _) = call(
        &server,
        "POST",
        &format!("/v1/server/chats/{chat}/posts"),
        &publish,
        Some(json!({"user": "alice", "as": "system", "text": "Maintenance at 22:00"})),
    )
    .await;
    assert_eq!(status, 201);
    let live = alice.until_complete(chat).await;
    assert_eq!(live[2]["agent"], "system");
    // The chat goes on: her next turn answers as before.
    alice.say(chat, "thanks").await;
    assert_eq!(
        last_text(&alice.until_complete(chat).await),
        "You said: thanks"
    );

    // A key reads with `read` only; publishes with `publish` only.
    let (status, list) = call(&server, "GET", "/v1/server/users/alice/chats", &read, None).await;
    assert_eq!(status, 200);
    assert_eq!(list["chats"][0]["id"], chat.to_string());
    let (status, e) = call(
        &server,
        "GET",
        "/v1/server/users/alice/chats",
        &publish,
        None,
    )
    .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("UNAUTHORIZED"))
    );
    let (status, e) = call(
        &server,
        "POST",
        &format!("/v1/server/chats/{chat}/posts"),
        &read,
        Some(json!({"user": "alice", "text": "x"})),
    )
    .await;
    assert_eq!(status, 403, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("publish"));

    // Never as a user: a key on a user's route is refused, and a user's
    // token on the server API.
    let (status, _) = call(&server, "GET", "/v1/chats", &publish, None).await;
    assert_eq!(status, 403);
    let (status, _) = call(
        &server,
        "GET",
        "/v1/server/users/alice/chats",
        &token("alice", 600, SECRET),
        None,
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = call(
        &server,
        "GET",
        "/v1/server/users/alice/chats",
        "awk_forged",
        None,
    )
    .await;
    assert_eq!(status, 401);
    // Another user's chat is nobody's to this key: 404, nothing logged.
    let (status, e) = call(
        &server,
        "POST",
        &format!("/v1/server/chats/{chat}/posts"),
        &publish,
        Some(json!({"user": "mallory", "text": "hi"})),
    )
    .await;
    assert_eq!(status, 404, "{e}");

    // Revoked: refused on every node within seconds.
    keys(&server, &["revoke", "billing"]).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, _) = call(&server, "GET", "/v1/server/users/alice/chats", &read, None).await;
        assert_eq!(status, 200, "the other key still works");
        let (status, _) = call(
            &server,
            "POST",
            "/v1/server/chats",
            &publish,
            Some(json!({"user": "alice", "agent": "demo"})),
        )
        .await;
        if status == 401 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the revoked key still works"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let listed = keys(&server, &["list"]).await.unwrap();
    assert!(
        listed
            .lines()
            .any(|l| l.contains("billing") && l.ends_with("revoked")),
        "{listed}"
    );
    assert!(keys(&server, &["revoke", "billing"]).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_api_refuses_bad_input_and_keeps_the_limits() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            max_message_bytes: Some(16 * 1024),
            rate_messages_per_minute: Some(3),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let key = keys(
        &server,
        &["create", "--name", "ops", "--scopes", "publish,read"],
    )
    .await
    .unwrap();
    let chat = Uuid::new_v4();
    let (status, _) = call(
        &server,
        "POST",
        "/v1/server/chats",
        &key,
        Some(json!({"user": "alice", "agent": "demo", "chat_id": chat})),
    )
    .await;
    assert_eq!(status, 201);
    let posts = format!("/v1/server/chats/{chat}/posts");
    let deep = (0..100).fold(json!(1), |v, _| json!([v]));
    for (body, want) in [
        (json!({"user": "alice"}), 400),
        (json!({"user": "alice", "text": "  "}), 400),
        (json!({"user": "alice", "text": "x", "colour": "red"}), 400),
        (json!({"user": "", "text": "x"}), 400),
        (json!({"user": "al\nice", "text": "x"}), 400),
        (
            json!({"user": "alice", "as": "system", "agent": "demo", "text": "x"}),
            400,
        ),
        (
            json!({"user": "alice", "agent": "nobody", "text": "x"}),
            400,
        ),
        (
            json!({"user": "alice", "widget": {"component_type": "<script>", "payload": {}}}),
            400,
        ),
        (
            json!({"user": "alice", "widget": {"component_type": "card", "payload": deep}}),
            413,
        ),
        (json!({"user": "alice", "text": "x".repeat(20 * 1024)}), 413),
    ] {
        let (status, e) = call(&server, "POST", &posts, &key, Some(body.clone())).await;
        assert_eq!(status, want, "{body:.80} → {e}");
        assert!(e["error"]["code"].is_string(), "{e}");
    }
    for (path, body, want) in [
        (
            "/v1/server/chats/not-a-uuid/posts",
            json!({"user": "alice", "text": "x"}),
            400,
        ),
        (
            "/v1/server/chats",
            json!({"user": "alice", "agent": "nobody"}),
            422,
        ),
        (
            "/v1/server/chats",
            json!({"user": "alice", "agent": "demo", "chat_id": chat}),
            409,
        ),
    ] {
        let (status, e) = call(&server, "POST", path, &key, Some(body)).await;
        assert_eq!(status, want, "{path}: {e}");
    }
    // Posts count as the user's turns: past the rate, 429 with Retry-After.
    let mut statuses = Vec::new();
    for i in 0..6 {
        let body = json!({"user": "alice", "text": format!("note {i}")});
        statuses.push(call(&server, "POST", &posts, &key, Some(body)).await.0);
    }
    assert!(
        statuses.contains(&201) && statuses.contains(&429),
        "{statuses:?}"
    );
    // Nothing refused was logged: the log holds the posts that were taken.
    let mut alice = connect_as(&server, "alice").await;
    alice.resume(chat, 0).await;
    let log = alice
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    let texts: Vec<&Value> = log.iter().filter(|m| m["type"] == "chat.text").collect();
    assert_eq!(texts.len(), statuses.iter().filter(|s| **s == 201).count());
}

/// Issue 38's routes held to what the older ones have: a body over
/// `max_message_bytes` is 413 and changes nothing; another owner finds
/// nothing (404) or is refused (403); a burst past the user's rate is 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_routes_refuse_oversize_bodies_other_owners_and_bursts() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            max_message_bytes: Some(16 * 1024),
            rate_messages_per_minute: Some(4),
            rate_chats_per_minute: Some(4),
            max_streams_per_user: Some(1),
            schedule_min_interval_seconds: Some(60),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let key = keys(
        &server,
        &["create", "--name", "ops", "--scopes", "publish,read"],
    )
    .await
    .unwrap();
    let (alice, bob) = (token("alice", 600, SECRET), token("bob", 600, SECRET));
    let chat = Uuid::new_v4();
    let body = json!({"user": "alice", "agent": "demo", "chat_id": chat});
    assert_eq!(
        call(&server, "POST", "/v1/server/chats", &key, Some(body))
            .await
            .0,
        201
    );
    let schedule = json!({"agent": "demo", "cron": "0 8 * * *"});
    let (status, made) = call(&server, "POST", "/v1/schedules", &alice, Some(schedule)).await;
    assert_eq!(status, 201);
    let id = made["id"].as_str().unwrap().to_owned();

    // Over the size: 413, nothing made.
    let big = "x".repeat(20 * 1024);
    for (path, bearer, body) in [
        (
            "/v1/server/chats".to_owned(),
            &key,
            json!({"user": "alice", "agent": "demo", "message": big}),
        ),
        (
            format!("/v1/server/chats/{chat}/posts"),
            &key,
            json!({"user": "alice", "text": big}),
        ),
        (
            format!("/v1/chats/{chat}/read"),
            &alice,
            json!({"seq": 1, "pad": big}),
        ),
        (
            "/v1/schedules".to_owned(),
            &alice,
            json!({"agent": "demo", "cron": "0 9 * * *", "message": big}),
        ),
        (
            format!("/v1/schedules/{id}/pause"),
            &alice,
            json!({"pad": big}),
        ),
        (
            format!("/v1/schedules/{id}/resume"),
            &alice,
            json!({"pad": big}),
        ),
    ] {
        let (status, e) = call(&server, "POST", &path, bearer, Some(body)).await;
        assert_eq!(status, 413, "{path}: {e}");
    }
    let (_, list) = call(&server, "GET", "/v1/schedules", &alice, None).await;
    assert_eq!(list["schedules"].as_array().unwrap().len(), 1);
    assert_eq!(list["schedules"][0]["paused"], false);

    // Another owner: bob finds none of alice's; a key names the owner.
    for (method, path) in [
        ("POST", format!("/v1/chats/{chat}/read")),
        ("GET", format!("/v1/schedules/{id}")),
        ("POST", format!("/v1/schedules/{id}/pause")),
        ("POST", format!("/v1/schedules/{id}/resume")),
        ("DELETE", format!("/v1/schedules/{id}")),
    ] {
        let (status, e) = call(&server, method, &path, &bob, None).await;
        assert_eq!(status, 404, "{method} {path}: {e}");
    }
    let (_, list) = call(&server, "GET", "/v1/schedules", &bob, None).await;
    assert_eq!(list["schedules"], json!([]));
    let wrong = json!({"user": "bob", "text": "hi"});
    let posts = format!("/v1/server/chats/{chat}/posts");
    assert_eq!(
        call(&server, "POST", &posts, &key, Some(wrong)).await.0,
        404
    );
    // A user's token is not a key, a key is not a user.
    let mine = json!({"user": "alice", "agent": "demo"});
    assert_eq!(
        call(&server, "POST", "/v1/server/chats", &alice, Some(mine))
            .await
            .0,
        401
    );
    assert_eq!(call(&server, "GET", "/v1/feed", &key, None).await.0, 403);

    // Bursts: each route that takes a turn or makes a chat, past the rate.
    let burst = |path: String, bearer: String, body: Value| {
        let server = &server;
        async move {
            let mut statuses = Vec::new();
            for _ in 0..8 {
                statuses.push(
                    call(server, "POST", &path, &bearer, Some(body.clone()))
                        .await
                        .0,
                );
            }
            assert!(statuses.contains(&429), "{path}: {statuses:?}");
        }
    };
    burst(
        posts.clone(),
        key.clone(),
        json!({"user": "alice", "text": "note"}),
    )
    .await;
    burst(format!("/v1/chats/{chat}/read"), bob.clone(), json!({})).await;
    // A backend's upload counts against the user's turns as theirs does.
    burst(
        format!("/v1/server/chats/{chat}/files?user=alice&name=b.json"),
        key.clone(),
        json!({}),
    )
    .await;
    burst(
        "/v1/schedules".into(),
        bob.clone(),
        json!({"agent": "demo", "cron": "0 8 * * *"}),
    )
    .await;
    burst(
        "/v1/server/chats".into(),
        key.clone(),
        json!({"user": "carol", "agent": "demo"}),
    )
    .await;
    // A key has a rate of its own, whichever users it acts for.
    let limited = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            rate_key_requests_per_minute: Some(5),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let busy = keys(&limited, &["create", "--name", "busy", "--scopes", "read"])
        .await
        .unwrap();
    let calm = keys(&limited, &["create", "--name", "calm", "--scopes", "read"])
        .await
        .unwrap();
    let mut statuses = Vec::new();
    for n in 0..8 {
        let path = format!("/v1/server/users/u{n}/chats");
        statuses.push(call(&limited, "GET", &path, &busy, None).await.0);
    }
    assert_eq!(statuses[..5], [200; 5], "{statuses:?}");
    assert!(statuses[5..].iter().all(|s| *s == 429), "{statuses:?}");
    for path in ["/v1/schedules?user=u1", "/v1/usage"] {
        let (status, e) = call(&limited, "GET", path, &busy, None).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (429, Some("RATE_LIMIT_EXCEEDED")),
            "{path}"
        );
    }
    let (status, e) = call(&limited, "GET", "/v1/schedules?user=u1", &busy, None).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (429, Some("RATE_LIMIT_EXCEEDED"))
    );
    let other = call(&limited, "GET", "/v1/server/users/u1/chats", &calm, None).await;
    assert_eq!(other.0, 200, "another key is not held back");

    // Changing a schedule is a turn too.
    let dave = token("dave", 600, SECRET);
    let schedule = json!({"agent": "demo", "cron": "0 8 * * *"});
    let (_, made) = call(&server, "POST", "/v1/schedules", &dave, Some(schedule)).await;
    let pause = format!("/v1/schedules/{}/pause", made["id"].as_str().unwrap());
    burst(pause, dave.clone(), json!({})).await;
    // As is resuming one (another user, whose turns are untouched), and
    // deleting (a third: each refused with 404 until the rate says 429).
    let fran = token("fran", 600, SECRET);
    let schedule = json!({"agent": "demo", "cron": "0 8 * * *"});
    let (_, made) = call(&server, "POST", "/v1/schedules", &fran, Some(schedule)).await;
    let resume = format!("/v1/schedules/{}/resume", made["id"].as_str().unwrap());
    burst(resume, fran.clone(), json!({})).await;
    let gus = token("gus", 600, SECRET);
    let gone = format!("/v1/schedules/{}", Uuid::new_v4());
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(call(&server, "DELETE", &gone, &gus, None).await.0);
    }
    assert!(statuses.contains(&429), "DELETE: {statuses:?}");
    assert_eq!(statuses[0], 404, "{statuses:?}");
    // Streams: one per user here; the second feed is 429.
    let open = tokio::spawn({
        let url = format!("http://{}/v1/feed", server.addr);
        let alice = alice.clone();
        async move {
            let r = reqwest::Client::new()
                .get(url)
                .bearer_auth(alice)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            // Held open while the second is tried.
            tokio::time::sleep(Duration::from_secs(2)).await;
            drop(r);
            status
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, _) = call(&server, "GET", "/v1/feed", &alice, None).await;
    assert_eq!(status, 429);
    assert_eq!(open.await.unwrap(), 200);
}

/// A backend's post is a run of its own in the log: on every SSE dialect,
/// a stream that rejoins after any of its events gets exactly the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_resumes_after_any_of_its_events_on_every_sse_wire() {
    use crate::hitl::{DIALECTS, start};
    use crate::rejoin::{rejoined, resumes_after_each, until};
    use crate::sse::{all, open};
    let demo = include_str!("../../src/agent/demo.yaml").replacen("id: demo", "id: real", 1);
    let server = Server::start_with(Opts {
        agents: vec![("real.yaml".into(), demo)],
        ..Default::default()
    })
    .await;
    let key = keys(&server, &["create", "--name", "crm", "--scopes", "publish"])
        .await
        .unwrap();
    let post = json!({"user": "dev", "text": "Your report is ready.\nRows: 3.\nColumns: 4.\nTotal: 12.\nSee the card.",
                      "widget": {"component_type": "report_card", "payload": {"rows": 3}}});
    for d in &DIALECTS {
        let (o, chat) = start(&server, d, "go").await;
        all(o.events).await;
        let path = format!("/v1/chats/{chat}/events?dialect={}", d.rejoin);
        let (_, view) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
        let before = view["last_seq"].as_u64().unwrap();
        let (status, e) = call(
            &server,
            "POST",
            &format!("/v1/server/chats/{chat}/posts"),
            &key,
            Some(post.clone()),
        )
        .await;
        assert_eq!(status, 201, "{e}");
        // The post, as the dialect sends it: joined after the first run.
        let after = format!("{path}&after={before}");
        let posted = all(open(&server, "GET", &after, None, None).await.events).await;
        assert!(
            posted
                .iter()
                .any(|e| e.data.to_string().contains("Your report is ready")),
            "{}: {posted:?}",
            d.name
        );
        resumes_after_each(d.name, &posted, posted.len(), |id| {
            rejoined(&server, path.clone(), id)
        })
        .await;
    }
    // The log itself (`chat`): the post's envelopes are its events.
    let chat = Uuid::new_v4();
    let body = json!({"user": "dev", "agent": "real", "chat_id": chat, "message": "go"});
    assert_eq!(
        call(&server, "POST", "/v1/server/chats", &key, Some(body))
            .await
            .0,
        201
    );
    let path = format!("/v1/chats/{chat}/events");
    let is_end = |e: &crate::sse::Ev| e.event == "chat.run_complete";
    until(open(&server, "GET", &path, None, None).await.events, is_end).await;
    let posts = format!("/v1/server/chats/{chat}/posts");
    assert_eq!(call(&server, "POST", &posts, &key, Some(post)).await.0, 201);
    // Both runs: to the post's end (the second run_complete).
    let ends = std::cell::Cell::new(0);
    let whole = until(open(&server, "GET", &path, None, None).await.events, |e| {
        ends.set(ends.get() + usize::from(is_end(e)));
        ends.get() == 2
    })
    .await;
    let last = whole.last().unwrap().id.clone();
    assert!(whole.iter().any(|e| e.event == "chat.tool_call"));
    // (Its stream stays open: each rejoin is read to the post's end.)
    resumes_after_each("chat", &whole, whole.len() - 1, |id| {
        let (path, server, last) = (path.clone(), &server, last.clone());
        async move {
            until(
                open(server, "GET", &path, None, Some(&id)).await.events,
                |e| e.id == last,
            )
            .await
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_uploads_a_file_into_a_users_chat_and_posts_it() {
    let server = jwt_server().await;
    let publish = keys(
        &server,
        &["create", "--name", "reports", "--scopes", "publish"],
    )
    .await
    .unwrap();
    let read = keys(&server, &["create", "--name", "r", "--scopes", "read"])
        .await
        .unwrap();
    let (alice, bob) = (token("alice", 600, SECRET), token("bob", 600, SECRET));
    let chat = Uuid::new_v4();
    let started = json!({"user": "alice", "agent": "demo", "chat_id": chat});
    assert_eq!(
        call(&server, "POST", "/v1/server/chats", &publish, Some(started))
            .await
            .0,
        201
    );
    let mut c = connect_as(&server, "alice").await;
    c.resume(chat, 0).await;
    c.recv_until(|m| m["type"] == "chat.resume_boundary").await;

    // The file, as a backend sends it: the raw body, for alice's chat.
    let upload = |bearer: &str, user: &str, chat: Uuid| {
        let (server, auth) = (&server, format!("Bearer {bearer}"));
        let path = format!("/v1/server/chats/{chat}/files?user={user}&name=q3%2Freport.csv");
        async move {
            let headers = [
                ("authorization", auth.as_str()),
                ("content-type", "text/csv"),
            ];
            let (status, body) = http_request(
                server.addr,
                "POST",
                &path,
                &headers,
                "month,total\nJuly,42\n",
            )
            .await;
            (
                status,
                serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
            )
        }
    };
    let (status, file) = upload(&publish, "alice", chat).await;
    assert_eq!(status, 201, "{file}");
    assert_eq!(
        (file["name"].as_str(), file["media_type"].as_str()),
        (Some("q3_report.csv"), Some("text/csv"))
    );
    let file_id = file["id"].as_str().unwrap().to_owned();
    // A read key may not; a chat of another user's (or none) is not found.
    assert_eq!(upload(&read, "alice", chat).await.0, 403);
    assert_eq!(upload(&publish, "bob", chat).await.0, 404);
    assert_eq!(upload(&publish, "alice", Uuid::new_v4()).await.0, 404);
    assert_eq!(upload(&alice, "alice", chat).await.0, 401);

    // Posted with a word: logged as the file an agent hands back.
    let posts = format!("/v1/server/chats/{chat}/posts");
    let body = json!({"user": "alice", "text": "Your report is ready.",
                      "attachments": [{"file_id": file_id}, {"file_id": file_id}]});
    let (status, posted) = call(&server, "POST", &posts, &publish, Some(body)).await;
    assert_eq!(status, 201, "{posted}");
    let live = c.until_complete(chat).await;
    let calls: Vec<&Value> = live
        .iter()
        .filter(|m| m["type"] == "chat.tool_call")
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "a file named twice is shown once: {live:#?}"
    );
    assert_eq!(calls[0]["tool_name"], "share_file");
    assert_eq!(calls[0]["payload"]["file_id"], file_id.as_str());
    let result = live
        .iter()
        .find(|m| m["type"] == "chat.tool_response")
        .unwrap();
    assert_eq!(result["corr"], calls[0]["corr"]);
    assert_eq!(
        result["content"],
        json!({"type": "file", "file_id": file_id, "name": "q3_report.csv",
               "media_type": "text/csv", "size": 20})
    );
    assert_eq!(posted["last_seq"], live.last().unwrap()["seq"]);
    // Alice downloads it; Bob cannot.
    let path = format!("/v1/files/{file_id}");
    let auth = format!("Bearer {alice}");
    let (status, bytes) =
        http_request(server.addr, "GET", &path, &[("authorization", &auth)], "").await;
    assert_eq!((status, bytes.as_str()), (200, "month,total\nJuly,42\n"));
    let auth = format!("Bearer {bob}");
    let (status, _) =
        http_request(server.addr, "GET", &path, &[("authorization", &auth)], "").await;
    assert_eq!(status, 404);

    // A file of another chat, or none: FILE_NOT_FOUND, nothing logged.
    let other = Uuid::new_v4();
    let body = json!({"user": "alice", "agent": "demo", "chat_id": other});
    call(&server, "POST", "/v1/server/chats", &publish, Some(body)).await;
    let (_, elsewhere) = upload(&publish, "alice", other).await;
    for id in [elsewhere["id"].clone(), json!(Uuid::new_v4())] {
        let body = json!({"user": "alice", "attachments": [{"file_id": id}]});
        let (status, e) = call(&server, "POST", &posts, &publish, Some(body)).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (404, Some("FILE_NOT_FOUND")),
            "{e}"
        );
    }
    let (_, view) = call(&server, "GET", &format!("/v1/chats/{chat}"), &alice, None).await;
    assert_eq!(view["last_seq"], posted["last_seq"], "{view}");
}

/// A backend's post on the AI SDK's and AG-UI's routes: their rejoin (with
/// `Last-Event-ID`) after any event of the post's run gets exactly the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_resumes_after_any_of_its_events_on_the_ai_sdk_and_ag_ui() {
    use crate::rejoin::{rejoined, resumes_after_each};
    use crate::sse::{all, open};
    let demo = include_str!("../../src/agent/demo.yaml").replacen("id: demo", "id: real", 1);
    let server = Server::start_with(Opts {
        agents: vec![("real.yaml".into(), demo)],
        ..Default::default()
    })
    .await;
    let key = keys(&server, &["create", "--name", "crm", "--scopes", "publish"])
        .await
        .unwrap();
    let post = json!({"user": "dev", "text": "Your report is ready.\nRows: 3.\nTotal: 12.",
                      "widget": {"component_type": "report_card", "payload": {"rows": 3}}});
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]});
    let ai_sdk = Uuid::new_v4();
    let body =
        json!({"id": ai_sdk, "messages": [user], "trigger": "submit-message", "agent": "real"});
    let first = all(open(&server, "POST", "/v1/ai-sdk/chat", Some(body), None)
        .await
        .events)
    .await;
    assert!(first.iter().any(|e| e.data["type"] == "finish"));
    let thread = Uuid::new_v4();
    let body = json!({"threadId": thread, "runId": "r1", "tools": [], "context": [], "state": {},
                      "messages": [{"id": "u1", "role": "user", "content": "go"}],
                      "forwardedProps": {"agent": "real"}});
    let first = all(open(&server, "POST", "/v1/ag-ui", Some(body), None)
        .await
        .events)
    .await;
    assert_eq!(first.last().unwrap().data["type"], "RUN_FINISHED");
    for (what, chat, path, opening) in [
        (
            "AI SDK",
            ai_sdk,
            format!("/v1/ai-sdk/chat/{ai_sdk}/stream"),
            0,
        ),
        ("AG-UI", thread, format!("/v1/ag-ui/{thread}/stream"), 1),
    ] {
        let (_, view) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
        let before = view["last_seq"].as_u64().unwrap();
        let posts = format!("/v1/server/chats/{chat}/posts");
        let (status, e) = call(&server, "POST", &posts, &key, Some(post.clone())).await;
        assert_eq!(status, 201, "{e}");
        // The post's run as a resume that saw its opening shows it: its
        // first event's id is the whole-run stream's opening after `before`.
        let opened = format!("w{before}-{opening}");
        let rest = rejoined(&server, path.clone(), opened.clone()).await;
        let text: String = rest.iter().map(|e| e.data.to_string()).collect();
        assert!(text.contains("Your report is ready"), "{what}: {text}");
        assert!(text.contains("report_card"), "{what}: {text}");
        // The widget is shown, not waited on: no tool output names it (the
        // `ai` package refuses one for a call it has no part of).
        let shown: Vec<&Value> = rest
            .iter()
            .filter(|e| e.data["type"] == "data-component")
            .map(|e| &e.data["id"])
            .collect();
        assert!(
            rest.iter()
                .all(|e| e.data["type"] != "tool-output-available"
                    || !shown.contains(&&e.data["toolCallId"])),
            "{what}: {text}"
        );
        resumes_after_each(what, &rest, rest.len(), |id| {
            rejoined(&server, path.clone(), id)
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_starts_a_template_for_a_user_and_a_context_reaches_the_model() {
    use crate::mock_llm::MockServer;
    use crate::vendors::{OpenAiWire, Wire};
    let llm = MockServer::start(vec![OpenAiWire.text(&["Noted."], (1, 1))]).await;
    let tool = MockServer::start(vec![]).await;
    crate::providers::set_key();
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            ..Default::default()
        },
        agents: vec![
            (
                "quiz.yaml".into(),
                include_str!("../../examples/agents/capitals-quiz.yaml").into(),
            ),
            (
                "real.yaml".into(),
                crate::providers::agent_yaml(&OpenAiWire, &llm, &tool, ""),
            ),
        ],
    })
    .await;
    let publish = keys(
        &server,
        &["create", "--name", "jobs", "--scopes", "publish"],
    )
    .await
    .unwrap();

    // A template started for alice: its first widget waits for her.
    let quiz = Uuid::new_v4();
    let (status, body) = call(
        &server,
        "POST",
        "/v1/server/chats",
        &publish,
        Some(json!({"user": "alice", "agent": "capitals-quiz", "chat_id": quiz})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let mut alice = connect_as(&server, "alice").await;
    alice.resume(quiz, 0).await;
    let widget = alice
        .recv_until(|m| m["type"] == "chat.tool_call" && m["awaiting_response"] == true)
        .await
        .pop()
        .unwrap();
    assert_eq!(widget["chat_id"], quiz.to_string());

    // A model's agent started with a context: the model reads it.
    let chat = Uuid::new_v4();
    let (status, body) = call(
        &server,
        "POST",
        "/v1/server/chats",
        &publish,
        Some(json!({"user": "alice", "agent": "real", "chat_id": chat,
                    "message": "the export finished", "context": {"job": "J-7741"}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    alice.resume(chat, 0).await;
    let log = alice.until_complete(chat).await;
    assert_eq!(last_text(&log), "Noted.");
    let system = llm.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("J-7741"), "{system}");
}
