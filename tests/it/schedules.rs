//! Agents that start on their own (issue 38): schedules made by a user or
//! a service key fire each due time once, as a chat of the user's that
//! their feed hears of; they pause, resume and go; a time missed while no
//! node ran is skipped or run once, as the schedule says; on two nodes
//! each due time fires once.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{SECRET, token};
use crate::server_api::{call, keys, keys_at};
use crate::support::*;

fn settings(min_interval: u64) -> agentwire::config::Settings {
    agentwire::config::Settings {
        auth: Some(agentwire::config::AuthMode::Jwt),
        jwt_secret: Some(SECRET.into()),
        schedule_min_interval_seconds: Some(min_interval),
        schedule_grace_seconds: Some(1),
        max_schedules_per_user: Some(3),
        ..Default::default()
    }
}

async fn server(min_interval: u64) -> Server {
    Server::start_with(Opts {
        settings: settings(min_interval),
        ..Default::default()
    })
    .await
}

/// The user's chats (ids) as the list shows them.
async fn chats_of(server: &Server, user: &str) -> Vec<String> {
    let (status, list) = call(
        server,
        "GET",
        "/v1/chats?limit=100",
        &token(user, 600, SECRET),
        None,
    )
    .await;
    assert_eq!(status, 200);
    list["chats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The types of a chat's log.
async fn log_types(server: &Server, user: &str, chat: &str) -> Vec<String> {
    let (status, page) = call(
        server,
        "GET",
        &format!("/v1/chats/{chat}/events?limit=100"),
        &token(user, 600, SECRET),
        None,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_each_due_time_as_a_chat_the_users_feed_hears_of() {
    let server = server(1).await;
    let alice = token("alice", 600, SECRET);
    let mut feed = Client::connect(&format!("{}?access_token={alice}", server.ws_url())).await;
    feed.send(json!({"type": "feed.subscribe"})).await;
    assert_eq!(feed.recv().await["type"], "feed.subscribed");

    let (status, made) = call(
        &server,
        "POST",
        "/v1/schedules",
        &alice,
        Some(
            json!({"agent": "demo", "cron": "*/2 * * * * *", "time_zone": "Europe/Berlin",
                    "message": "the morning briefing", "context": {"desk": "emea"}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(
        (made["user"].as_str(), made["missed"].as_str()),
        (Some("alice"), Some("skip"))
    );
    assert_eq!(made["created_by"], "user");
    let id = made["id"].as_str().unwrap().to_owned();

    // Two due times: two chats of hers, each one run of the agent on the
    // schedule's message, each announced to her feed.
    let (mut fired, mut ended) = (Vec::new(), std::collections::HashSet::new());
    while ended.len() < 2 {
        let m = feed.recv_until(|m| m["type"] == "feed.chat").await;
        let event = m.last().unwrap().clone();
        let chat = event["chat_id"].as_str().unwrap().to_owned();
        match event["reason"].as_str() {
            Some("created") => fired.push(chat),
            // A run's end, in a chat announced before.
            _ if fired.contains(&chat) => {
                ended.insert(chat);
            }
            _ => {}
        }
    }
    let fired: Vec<String> = fired.into_iter().filter(|c| ended.contains(c)).collect();
    assert_ne!(fired[0], fired[1]);
    for chat in &fired {
        let types = log_types(&server, "alice", chat).await;
        assert_eq!(
            types.iter().filter(|t| *t == "chat.run_complete").count(),
            1,
            "{types:?}"
        );
    }
    let (_, text) = call(
        &server,
        "GET",
        &format!("/v1/chats/{}/events?limit=100", fired[0]),
        &alice,
        None,
    )
    .await;
    assert!(text.to_string().contains("You said: the morning briefing"));
    let (status, one) = call(&server, "GET", &format!("/v1/schedules/{id}"), &alice, None).await;
    assert_eq!(status, 200);
    assert!(
        one["last_run_at"].is_string() && one["next_run_at"].is_string(),
        "{one}"
    );

    // Paused: nothing fires; resumed: it goes on.
    let (status, paused) = call(
        &server,
        "POST",
        &format!("/v1/schedules/{id}/pause"),
        &alice,
        None,
    )
    .await;
    assert_eq!((status, paused["paused"].as_bool()), (200, Some(true)));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = chats_of(&server, "alice").await.len();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert_eq!(chats_of(&server, "alice").await.len(), before);
    let (status, _) = call(
        &server,
        "POST",
        &format!("/v1/schedules/{id}/resume"),
        &alice,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while chats_of(&server, "alice").await.len() == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the resumed schedule never fired"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Hers only: bob finds nothing; and then it goes.
    let bob = token("bob", 600, SECRET);
    let (status, _) = call(&server, "GET", &format!("/v1/schedules/{id}"), &bob, None).await;
    assert_eq!(status, 404);
    let (status, _) = call(
        &server,
        "DELETE",
        &format!("/v1/schedules/{id}"),
        &bob,
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (status, list) = call(&server, "GET", "/v1/schedules", &alice, None).await;
    assert_eq!(
        (status, list["schedules"].as_array().unwrap().len()),
        (200, 1)
    );
    let (status, _) = call(
        &server,
        "DELETE",
        &format!("/v1/schedules/{id}"),
        &alice,
        None,
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = call(&server, "GET", &format!("/v1/schedules/{id}"), &alice, None).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_checked_and_a_key_makes_them_for_a_user() {
    let server = server(60).await;
    let alice = token("alice", 600, SECRET);
    let publish = keys(
        &server,
        &["create", "--name", "cron", "--scopes", "publish"],
    )
    .await
    .unwrap();
    let read = keys(&server, &["create", "--name", "audit", "--scopes", "read"])
        .await
        .unwrap();
    for (body, want) in [
        (
            json!({"agent": "demo", "cron": "0 8 * * *", "time_zone": "Mars/Base"}),
            400,
        ),
        (json!({"agent": "demo", "cron": "0 25 * * *"}), 400),
        (json!({"agent": "demo", "cron": "* * * * *"}), 201),
        (json!({"agent": "demo", "cron": "*/5 * * * * *"}), 400),
        (json!({"agent": "nobody", "cron": "0 8 * * *"}), 422),
        (
            json!({"agent": "demo", "cron": "0 8 * * *", "colour": 1}),
            400,
        ),
        (
            json!({"agent": "demo", "cron": "0 8 * * *", "user": "bob"}),
            403,
        ),
        (
            json!({"agent": "demo", "cron": "0 8 * * *", "message": " "}),
            400,
        ),
    ] {
        let (status, e) = call(&server, "POST", "/v1/schedules", &alice, Some(body.clone())).await;
        assert_eq!(status, want, "{body} → {e}");
    }
    // A key names the user; `read` reads, `publish` makes.
    let for_bob = json!({"user": "bob", "agent": "demo", "cron": "0 8 * * 1-5",
                         "time_zone": "America/New_York", "missed": "run_once"});
    let (status, e) = call(
        &server,
        "POST",
        "/v1/schedules",
        &read,
        Some(for_bob.clone()),
    )
    .await;
    assert_eq!(status, 403, "{e}");
    let no_user = json!({"agent": "demo", "cron": "0 8 * * *"});
    let (status, _) = call(&server, "POST", "/v1/schedules", &publish, Some(no_user)).await;
    assert_eq!(status, 400);
    let (status, made) = call(&server, "POST", "/v1/schedules", &publish, Some(for_bob)).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(
        (made["created_by"].as_str(), made["missed"].as_str()),
        (Some("key:cron"), Some("run_once"))
    );
    // Weekdays at 08:00 in New York.
    let next = chrono::DateTime::parse_from_rfc3339(made["next_run_at"].as_str().unwrap()).unwrap();
    let local = next.with_timezone(&chrono::FixedOffset::west_opt(5 * 3600).unwrap());
    assert!(
        matches!(
            local.format("%H:%M").to_string().as_str(),
            "08:00" | "09:00"
        ),
        "{next}"
    );
    let (status, list) = call(&server, "GET", "/v1/schedules?user=bob", &read, None).await;
    assert_eq!(
        (status, list["schedules"].as_array().unwrap().len()),
        (200, 1)
    );
    let (status, _) = call(&server, "GET", "/v1/schedules", &read, None).await;
    assert_eq!(status, 400);
    // Bob's token sees his own; alice's does not.
    let (_, list) = call(
        &server,
        "GET",
        "/v1/schedules",
        &token("bob", 600, SECRET),
        None,
    )
    .await;
    assert_eq!(list["schedules"][0]["id"], made["id"]);
    let (status, _) = call(&server, "GET", "/v1/schedules?user=bob", &alice, None).await;
    assert_eq!(status, 403);
    // At most `max_schedules_per_user` (3) each.
    for _ in 0..2 {
        let body = json!({"agent": "demo", "cron": "0 9 * * *"});
        assert_eq!(
            call(&server, "POST", "/v1/schedules", &alice, Some(body))
                .await
                .0,
            201
        );
    }
    let body = json!({"agent": "demo", "cron": "0 10 * * *"});
    let (status, e) = call(&server, "POST", "/v1/schedules", &alice, Some(body)).await;
    assert_eq!(status, 409, "{e}");
    let (status, _) = call(
        &server,
        "POST",
        "/v1/schedules/not-a-uuid/pause",
        &alice,
        None,
    )
    .await;
    assert_eq!(status, 400);
    // Bodies over max_message_bytes (1 MiB here) are refused unread.
    let huge = json!({"agent": "demo", "cron": "0 8 * * *", "message": "x".repeat(1 << 20)});
    let (status, _) = call(&server, "POST", "/v1/schedules", &alice, Some(huge.clone())).await;
    assert_eq!(status, 413);
    let chat = Uuid::new_v4();
    let (status, _) = call(
        &server,
        "POST",
        &format!("/v1/chats/{chat}/read"),
        &alice,
        Some(huge),
    )
    .await;
    assert_eq!(status, 413);
    // A schedule's chat ids are derived ones: nobody takes one first.
    let taken = agentwire::schedules::chat_for(Uuid::new_v4(), 1_800_000_000_000);
    let body = json!({"agent": "demo", "chat_id": taken, "message": "mine"});
    let (status, e) = call(&server, "POST", "/v1/chats", &alice, Some(body)).await;
    assert!((400..500).contains(&status), "{status} {e}");
    let body = json!({"user": "alice", "agent": "demo", "chat_id": taken});
    let (status, e) = call(&server, "POST", "/v1/server/chats", &publish, Some(body)).await;
    assert!((400..500).contains(&status), "{status} {e}");
}

/// The chats a schedule's due times in `(from, to)` (unix ms) would have made.
fn due_chats(schedule: Uuid, every_ms: i64, from: i64, to: i64) -> Vec<String> {
    let first = (from / every_ms + 1) * every_ms;
    (first..to)
        .step_by(every_ms as usize)
        .map(|t| agentwire::schedules::chat_for(schedule, t).to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_missed_while_no_node_ran_is_skipped_or_run_once() {
    let server = server(1).await;
    let alice = token("alice", 600, SECRET);
    let mut ids = Vec::new();
    for missed in ["skip", "run_once"] {
        let body =
            json!({"agent": "demo", "cron": "*/2 * * * * *", "missed": missed, "message": "hi"});
        let (status, made) = call(&server, "POST", "/v1/schedules", &alice, Some(body)).await;
        assert_eq!(status, 201);
        ids.push(Uuid::parse_str(made["id"].as_str().unwrap()).unwrap());
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // Stopped between two due times (even seconds), with what fired
    // before it noted: nothing fires between the note and the stop.
    while chrono::Utc::now().timestamp_millis() % 2000 < 1100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = chats_of(&server, "alice").await;
    let dir = server.stop().await;
    let stopped = chrono::Utc::now().timestamp_millis();
    tokio::time::sleep(Duration::from_secs(7)).await;
    let restarted = chrono::Utc::now().timestamp_millis();
    let server = Server::start_in(
        dir,
        Opts {
            settings: settings(1),
            ..Default::default()
        },
    )
    .await;
    // Past the first ticks after the restart.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let chats = chats_of(&server, "alice").await;
    // The chats of due times missed while the server was down (due more
    // than the grace before the restart), fired after it.
    let missed = |schedule| {
        due_chats(schedule, 2000, stopped - 4000, restarted - 1000)
            .into_iter()
            .filter(|c| chats.contains(c) && !before.contains(c))
            .count()
    };
    assert_eq!(missed(ids[0]), 0, "a skipping schedule ran a missed time");
    assert_eq!(
        missed(ids[1]),
        1,
        "a run-once schedule ran the missed times not once"
    );
    // Both go on after it.
    let now = chrono::Utc::now().timestamp_millis();
    for id in &ids {
        let (_, one) = call(&server, "GET", &format!("/v1/schedules/{id}"), &alice, None).await;
        let next =
            chrono::DateTime::parse_from_rfc3339(one["next_run_at"].as_str().unwrap()).unwrap();
        assert!(next.timestamp_millis() > now - 2000, "{one}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_two_nodes_each_due_time_fires_once() {
    let Some(url) = crate::cluster::cluster_database().await else {
        return;
    };
    let node = || {
        let url = url.clone();
        async move {
            Server::start_with(Opts {
                settings: agentwire::config::Settings {
                    database_url: Some(url),
                    ..settings(1)
                },
                ..Default::default()
            })
            .await
        }
    };
    let (a, b) = (node().await, node().await);
    let key = keys_at(&url, &["create", "--name", "cron", "--scopes", "publish"])
        .await
        .unwrap();
    let body = json!({"user": "alice", "agent": "demo", "cron": "* * * * * *", "message": "tick"});
    let (status, made) = call(&a, "POST", "/v1/schedules", &key, Some(body)).await;
    assert_eq!(status, 201);
    let id = made["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (status, _) = call(
        &b,
        "POST",
        &format!("/v1/schedules/{id}/pause?user=alice"),
        &key,
        None,
    )
    .await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let chats = chats_of(&a, "alice").await;
    assert!(chats.len() >= 3, "{} firings in 5 s", chats.len());
    for chat in &chats {
        let types = log_types(&b, "alice", chat).await;
        let runs = types.iter().filter(|t| *t == "chat.run_complete").count();
        let turns = types.iter().filter(|t| *t == "chat.text").count();
        assert_eq!((runs, turns), (1, 2), "{chat}: {types:?}");
    }
    let value: Value = made;
    assert_eq!(value["user"], "alice");
}
