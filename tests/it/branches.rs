//! Conversations as trees: edit a user's message, answer one again, switch
//! versions, over the WebSocket and REST, with the model seeing only the
//! active path and the log staying one gap-free line.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::mock_llm::MockServer;
use crate::providers::{agent_yaml, server_with};
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

/// The user's `chat.text` in `msgs` saying `text`.
fn said(msgs: &[Value], text: &str) -> u64 {
    msgs.iter()
        .find(|m| m["type"] == "chat.text" && m["agent"] == "user" && m["content"] == text)
        .unwrap_or_else(|| panic!("no user text {text:?} in {msgs:?}"))["seq"]
        .as_u64()
        .unwrap()
}

async fn branches(server: &Server, chat: Uuid) -> Value {
    let (status, body) = http_json(server, "GET", &format!("/v1/chats/{chat}/branches"), "").await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The next `chat.error` this connection gets: its code.
async fn error_code(c: &mut Client) -> String {
    let e = c.recv_until(|m| m["type"] == "chat.error").await;
    let e = e.last().unwrap();
    assert!(
        e.get("seq").is_none(),
        "a connection's error is not logged: {e}"
    );
    e["error_code"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_regenerate_and_switch_over_the_websocket() {
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "one").await;
    let mut log = c.until_complete(chat).await;
    c.say(chat, "two").await;
    log.extend(c.until_complete(chat).await);
    let two = said(&log, "two");
    let end_of_one = two - 1;
    assert_eq!(log[end_of_one as usize - 1]["type"], "chat.run_complete");
    let end_of_two = log.last().unwrap()["seq"].as_u64().unwrap();

    // An edit: a branch to what `two` followed, the new text, its run.
    c.send(json!({"type": "chat.edit", "chat_id": chat, "seq": two, "text": "TWO"}))
        .await;
    let edited = c.until_complete(chat).await;
    assert_eq!(edited[0]["type"], "chat.branch");
    assert_eq!(edited[0]["at"], end_of_one);
    assert_eq!(edited[0]["reason"], "edit");
    assert_eq!(edited[1]["content"], "TWO");
    assert_eq!(last_text(&edited), "You said: TWO");
    let two_v2 = said(&edited, "TWO");
    let b = branches(&server, chat).await;
    assert_eq!(b["pointer"], edited.last().unwrap()["seq"]);
    assert_eq!(
        b["points"],
        json!([{"at": end_of_one, "versions": [two, two_v2], "active": two_v2}])
    );
    log.extend(edited);

    // A regenerate of the last answer: a branch to `TWO`, a new run.
    c.send(json!({"type": "chat.regenerate", "chat_id": chat}))
        .await;
    let again = c.until_complete(chat).await;
    assert_eq!(again[0]["type"], "chat.branch");
    assert_eq!(again[0]["at"], two_v2);
    assert_eq!(again[0]["reason"], "regenerate");
    assert_eq!(again[1]["type"], "chat.select_speaker", "no new user text");
    assert_eq!(last_text(&again), "You said: TWO");
    let b = branches(&server, chat).await;
    let points = b["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{b}");
    assert_eq!(points[1]["at"], two_v2);
    assert_eq!(points[1]["versions"][1], again[1]["seq"]);
    log.extend(again);

    // Back to the first version: where it was left, its answer's end.
    c.send(json!({"type": "chat.switch", "chat_id": chat, "to": two}))
        .await;
    let switched = c.expect("chat.branch").await;
    assert_eq!(switched["at"], end_of_two);
    assert_eq!(switched["reason"], "switch");
    let b = branches(&server, chat).await;
    assert_eq!(b["pointer"], end_of_two);
    assert_eq!(b["points"][0]["active"], two);
    assert_eq!(b["points"].as_array().unwrap().len(), 2);
    // Already there: nothing is logged.
    c.send(json!({"type": "chat.switch", "chat_id": chat, "to": two}))
        .await;
    c.send(json!({"type": "ping"})).await;
    c.expect("pong").await;
    log.push(switched);

    // The conversation goes on from there; the log stays one line.
    c.say(chat, "three").await;
    let three = c.until_complete(chat).await;
    assert_eq!(last_text(&three), "You said: three");
    log.extend(three);
    c.resume(chat, 0).await;
    let replay = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let replay = &replay[..replay.len() - 1];
    assert_eq!(seqs(replay), seqs(&log));
    assert_gap_free(&seqs(replay));
    for (got, seen) in replay.iter().zip(&log) {
        assert_eq!(&without_replay(got), seen);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_branch_gets_its_error_and_logs_nothing() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            max_versions_per_point: Some(2),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "ask: Which city?").await;
    let asked = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let request_id = asked.last().unwrap()["request_id"].clone();
    let first = said(&asked, "ask: Which city?");
    // During a run.
    c.send(json!({"type": "chat.edit", "chat_id": chat, "seq": first, "text": "x"}))
        .await;
    assert_eq!(error_code(&mut c).await, "RUN_IN_PROGRESS");
    c.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": request_id, "text": "Rome"}))
        .await;
    let log = c.until_complete(chat).await;
    let answer = said(&log, "Rome");
    let last = log.last().unwrap()["seq"].as_u64().unwrap();

    // An answer to an input request, an agent's envelope, a seq past the log.
    for seq in [answer, first + 1, last + 5] {
        c.send(json!({"type": "chat.edit", "chat_id": chat, "seq": seq, "text": "x"}))
            .await;
        assert_eq!(error_code(&mut c).await, "MESSAGE_NOT_FOUND", "seq {seq}");
        c.send(json!({"type": "chat.regenerate", "chat_id": chat, "seq": seq}))
            .await;
        assert_eq!(error_code(&mut c).await, "MESSAGE_NOT_FOUND", "seq {seq}");
    }
    c.send(json!({"type": "chat.switch", "chat_id": chat, "to": last + 1}))
        .await;
    assert_eq!(error_code(&mut c).await, "MESSAGE_NOT_FOUND");
    // A bad message: the schema's error.
    c.send(json!({"type": "chat.edit", "chat_id": chat, "seq": 0, "text": "x"}))
        .await;
    assert_eq!(error_code(&mut c).await, "SCHEMA_VALIDATION_FAILED");
    c.send(json!({"type": "chat.regenerate", "chat_id": chat, "model": "no-such-model"}))
        .await;
    assert_eq!(error_code(&mut c).await, "WORKFLOW_NOT_FOUND");

    // Two versions at most at one point (`max_versions_per_point: 2`).
    c.send(json!({"type": "chat.regenerate", "chat_id": chat, "seq": first}))
        .await;
    let asked = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let request_id = asked.last().unwrap()["request_id"].clone();
    c.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": request_id, "text": "Oslo"}))
        .await;
    assert_eq!(
        last_text(&c.until_complete(chat).await),
        "You answered: Oslo"
    );
    c.send(json!({"type": "chat.regenerate", "chat_id": chat, "seq": first}))
        .await;
    assert_eq!(error_code(&mut c).await, "BRANCH_LIMIT_EXCEEDED");
    let (_, chat_now) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    let b = branches(&server, chat).await;
    assert_eq!(
        b["last_seq"], chat_now["last_seq"],
        "nothing more was logged"
    );
    assert_eq!(b["points"][0]["versions"].as_array().unwrap().len(), 2);

    // Another chat id: nothing to branch.
    c.send(json!({"type": "chat.switch", "chat_id": Uuid::new_v4(), "to": 1}))
        .await;
    assert_eq!(error_code(&mut c).await, "RESUME_FAILED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rest_routes_branch_as_the_websocket_does() {
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "one").await;
    let log = c.until_complete(chat).await;
    let one = said(&log, "one");
    let post = |path: String, body: Value| {
        let server = &server;
        async move { http_json(server, "POST", &path, &body.to_string()).await }
    };
    let (status, body) = post(
        format!("/v1/chats/{chat}/messages/{one}/edit"),
        json!({"text": "uno"}),
    )
    .await;
    assert_eq!((status, &body["accepted"]), (202, &json!(true)), "{body}");
    let edited = c.until_complete(chat).await;
    assert_eq!(edited[0]["type"], "chat.branch");
    assert_eq!(
        edited[0]["at"], 0,
        "the first message follows the chat's start"
    );
    assert_eq!(last_text(&edited), "You said: uno");
    let uno = said(&edited, "uno");

    let (status, _) = post(format!("/v1/chats/{chat}/regenerate"), json!({"seq": uno})).await;
    assert_eq!(status, 202);
    let again = c.until_complete(chat).await;
    assert_eq!(
        (&again[0]["at"], &again[0]["reason"]),
        (&json!(uno), &json!("regenerate"))
    );

    let (status, b) = post(format!("/v1/chats/{chat}/switch"), json!({"to": one})).await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(b["pointer"], log.last().unwrap()["seq"]);
    assert_eq!(
        b["points"][0],
        json!({"at": 0, "versions": [one, uno], "active": one})
    );

    // Errors, in the API's shape.
    let code = |v: &Value| v["error"]["code"].as_str().unwrap_or_default().to_owned();
    let (status, body) = post(
        format!("/v1/chats/{chat}/messages/{}/edit", one + 1),
        json!({"text": "x"}),
    )
    .await;
    assert_eq!((status, code(&body)), (404, "MESSAGE_NOT_FOUND".into()));
    let (status, body) = post(
        format!("/v1/chats/{chat}/messages/0/edit"),
        json!({"text": "x"}),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (400, "SCHEMA_VALIDATION_FAILED".into())
    );
    let (status, body) = post(
        format!("/v1/chats/{chat}/messages/{one}/edit"),
        json!({"text": "x", "extra": 1}),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (400, "SCHEMA_VALIDATION_FAILED".into())
    );
    let (status, body) = post(format!("/v1/chats/{chat}/switch"), json!({"to": 10_000})).await;
    assert_eq!((status, code(&body)), (404, "MESSAGE_NOT_FOUND".into()));
    let other = Uuid::new_v4();
    let (status, body) =
        http_json(&server, "GET", &format!("/v1/chats/{other}/branches"), "").await;
    assert_eq!((status, code(&body)), (404, "RESUME_FAILED".into()));
    c.say(chat, "slow: 100").await;
    c.recv_until(|m| m["type"] == "chat.print").await;
    let (status, body) = post(format!("/v1/chats/{chat}/regenerate"), json!({})).await;
    assert_eq!((status, code(&body)), (409, "RUN_IN_PROGRESS".into()));
    c.until_complete(chat).await;
}

/// The `content`s of a recorded OpenAI request's messages, by role.
fn conversation(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_sees_only_the_active_path() {
    let w = OpenAiWire;
    let replies = ["A1", "B1", "B2", "B3", "C1"]
        .iter()
        .map(|t| w.text(&[*t], (3, 1)))
        .collect();
    let llm = MockServer::start(replies).await;
    let tool = MockServer::start(vec![]).await;
    let server = server_with(agent_yaml(&w, &llm, &tool, "")).await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start_with(chat, "real", "first").await;
    c.until_complete(chat).await;
    c.say(chat, "second").await;
    let second = c.until_complete(chat).await;
    let second_seq = said(&second, "second");
    let pair = |r: &str, t: &str| (r.to_owned(), t.to_owned());

    c.send(
        json!({"type": "chat.edit", "chat_id": chat, "seq": second_seq, "text": "second, edited"}),
    )
    .await;
    c.until_complete(chat).await;
    let sent = |i: usize| conversation(&llm.requests()[i].body);
    assert_eq!(
        sent(2),
        vec![
            pair("user", "first"),
            pair("assistant", "A1"),
            pair("user", "second, edited")
        ]
    );
    c.send(json!({"type": "chat.regenerate", "chat_id": chat}))
        .await;
    let again = c.until_complete(chat).await;
    assert_eq!(last_text(&again), "B3");
    assert_eq!(sent(3), sent(2), "a regenerate is asked the same history");

    c.send(json!({"type": "chat.switch", "chat_id": chat, "to": second_seq}))
        .await;
    c.expect("chat.branch").await;
    c.say(chat, "third").await;
    c.until_complete(chat).await;
    assert_eq!(
        sent(4),
        vec![
            pair("user", "first"),
            pair("assistant", "A1"),
            pair("user", "second"),
            pair("assistant", "B1"),
            pair("user", "third"),
        ]
    );
}

/// Two nodes on one PostgreSQL database: a branch asked of the node that
/// does not run the chat is made by the one that does, and both serve it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_made_through_one_node_is_served_by_the_other() {
    if on_postgres() {
        return; // Runs once, in the default pass, on a database of its own.
    }
    let Some(pg) = agentwire::testing::postgres() else {
        return;
    };
    let url = pg.fresh_database().await;
    let agents = tempfile::tempdir().unwrap();
    let (_a, addr_a) = spawn_agentwire(&url, agents.path(), &[]).await;
    let (_b, addr_b) = spawn_agentwire(&url, agents.path(), &[]).await;
    let mut ca = Client::connect(&format!("ws://{addr_a}/v1/ws")).await;
    let mut cb = Client::connect(&format!("ws://{addr_b}/v1/ws")).await;
    let chat = Uuid::new_v4();
    ca.start(chat, "one").await;
    ca.until_complete(chat).await;
    ca.say(chat, "two").await;
    let two_run = ca.until_complete(chat).await;
    let two = said(&two_run, "two");
    cb.resume(chat, two_run.last().unwrap()["seq"].as_u64().unwrap())
        .await;
    cb.recv_until(|m| m["type"] == "chat.resume_boundary").await;

    cb.send(json!({"type": "chat.edit", "chat_id": chat, "seq": two, "text": "TWO"}))
        .await;
    let on_b = cb.until_complete(chat).await;
    assert_eq!(ca.until_complete(chat).await, on_b, "one log, seen alike");
    assert_eq!(on_b[0]["type"], "chat.branch");
    assert_eq!(last_text(&on_b), "You said: TWO");
    let get = |addr: std::net::SocketAddr| async move {
        let (status, body) = http_get(addr, &format!("/v1/chats/{chat}/branches"), &[]).await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()
    };
    assert_eq!(get(addr_a).await, get(addr_b).await);
    assert_eq!(get(addr_b).await["points"][0]["versions"][0], two);

    // A switch back through the other node, then a turn there.
    cb.send(json!({"type": "chat.switch", "chat_id": chat, "to": two}))
        .await;
    let switched = cb.expect("chat.branch").await;
    assert_eq!(ca.expect("chat.branch").await, switched);
    cb.say(chat, "three").await;
    let three = cb.until_complete(chat).await;
    assert_eq!(ca.until_complete(chat).await, three);
    let b = get(addr_a).await;
    assert_eq!(b["points"][0]["active"], two);
    assert_eq!(b["pointer"], three.last().unwrap()["seq"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_copies_the_path_to_an_answer_into_a_new_chat() {
    let server = Server::start().await;
    let (chat, _c, [one, _two, edited]) = one_two_edited(&server).await;
    let post = |path: String, body: Value| {
        let server = &server;
        async move { http_json(server, "POST", &path, &body.to_string()).await }
    };
    // The active path's end: one, then the edited second turn.
    let into = Uuid::new_v4();
    let (status, forked) = post(format!("/v1/chats/{chat}/fork"), json!({"chat_id": into})).await;
    assert_eq!(status, 201, "{forked}");
    assert_eq!(forked["chat"]["id"], into.to_string());
    assert_eq!(forked["forked_from"]["seq"], edited.last().unwrap()["seq"]);
    let mut f = server.client().await;
    f.resume(into, 0).await;
    let copy = f.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let copy = &copy[..copy.len() - 1];
    assert_gap_free(&seqs(copy));
    assert!(copy.iter().all(|m| m["chat_id"] == into.to_string()));
    assert_eq!(
        turns(copy),
        [
            "user: one",
            "demo: You said: one",
            "user: TWO",
            "demo: You said: TWO"
        ]
    );
    assert!(
        !copy
            .iter()
            .any(|m| m["type"] == "chat.print" || m["type"] == "chat.branch")
    );
    // It goes on on its own; the source is unchanged.
    f.say(into, "three").await;
    assert_eq!(last_text(&f.until_complete(into).await), "You said: three");
    let (_, src) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(src["last_seq"], edited.last().unwrap()["seq"]);

    // At the end of the first answer, into a random id.
    let end_one = one.last().unwrap()["seq"].clone();
    let (status, forked) = post(format!("/v1/chats/{chat}/fork"), json!({"at": end_one})).await;
    assert_eq!(status, 201, "{forked}");
    let id = forked["chat"]["id"].as_str().unwrap();
    let (_, page) = http_json(
        &server,
        "GET",
        &format!("/v1/chats/{id}/events?after=0&limit=100"),
        "",
    )
    .await;
    assert_eq!(
        turns(page["events"].as_array().unwrap()),
        ["user: one", "demo: You said: one"]
    );

    // What cannot be forked.
    let code = |v: &Value| v["error"]["code"].as_str().unwrap_or_default().to_owned();
    let (status, body) = post(format!("/v1/chats/{chat}/fork"), json!({"at": 2})).await;
    assert_eq!((status, code(&body)), (404, "MESSAGE_NOT_FOUND".into()));
    let (status, body) = post(format!("/v1/chats/{chat}/fork"), json!({"chat_id": into})).await;
    assert_eq!(status, 409, "{body}");
    let other = Uuid::new_v4();
    let (status, body) = post(format!("/v1/chats/{other}/fork"), json!({})).await;
    assert_eq!((status, code(&body)), (404, "RESUME_FAILED".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_branch_reads_whole_in_pages() {
    let server = Server::start().await;
    let (chat, _c, [one, two, edited]) = one_two_edited(&server).await;
    let read = |query: String| {
        let server = &server;
        async move {
            let mut events = Vec::new();
            let mut after = 0;
            loop {
                let path = format!("/v1/chats/{chat}/path?limit=3&after={after}{query}");
                let (status, page) = http_json(server, "GET", &path, "").await;
                assert_eq!(status, 200, "{page}");
                events.extend(page["events"].as_array().unwrap().iter().cloned());
                match page["next_after"].as_u64() {
                    Some(next) => after = next,
                    None => return (page["leaf"].clone(), events),
                }
            }
        }
    };
    // The active path: the first turn, then the edited one (its branch is not on it).
    let (leaf, active) = read(String::new()).await;
    assert_eq!(leaf, edited.last().unwrap()["seq"]);
    let expected: Vec<Value> = one.iter().chain(&edited[1..]).cloned().collect();
    assert_eq!(active, expected);
    // The version left, read whole by its end.
    let end = two.last().unwrap()["seq"].as_u64().unwrap();
    let (_, left) = read(format!("&leaf={end}")).await;
    let expected: Vec<Value> = one.iter().chain(&two).cloned().collect();
    assert_eq!(left, expected);
    // A branch is no leaf; another user's chat is not found.
    let branch = edited[0]["seq"].as_u64().unwrap();
    let (status, body) = http_json(
        &server,
        "GET",
        &format!("/v1/chats/{chat}/path?leaf={branch}"),
        "",
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("MESSAGE_NOT_FOUND"))
    );
    let other = Uuid::new_v4();
    let (status, _) = http_json(&server, "GET", &format!("/v1/chats/{other}/path"), "").await;
    assert_eq!(status, 404);
}

/// A user's message that starts a run is marked so when logged: one that
/// follows a component patched between runs (not a run's end) is still
/// one to edit; an answer to an input request is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_after_a_patch_between_runs_can_be_edited() {
    let server = Server::start().await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "ui: date_picker").await;
    let asked = c.recv_until(|m| m["type"] == "chat.tool_call").await;
    assert_eq!(asked[0]["starts_run"], true);
    let corr = asked.last().unwrap()["corr"].clone();
    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": corr, "data": {"date": "2026-01-02"}}))
        .await;
    c.until_complete(chat).await;
    c.send(
        json!({"type": "artifact_patch", "chat_id": chat, "corr": corr,
        "patch": [{"op": "add", "path": "/selected", "value": "2026-01-03"}]}),
    )
    .await;
    c.expect("chat.tool_call").await;
    c.say(chat, "next").await;
    let next = c.until_complete(chat).await;
    assert_eq!(next[0]["starts_run"], true);
    c.send(
        json!({"type": "chat.edit", "chat_id": chat, "seq": said(&next, "next"), "text": "NEXT"}),
    )
    .await;
    assert_eq!(last_text(&c.until_complete(chat).await), "You said: NEXT");
    c.say(chat, "ask: Why?").await;
    let asked = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let request_id = asked.last().unwrap()["request_id"].clone();
    c.send(json!({"type": "user.input.submit", "chat_id": chat, "request_id": request_id, "text": "Because"}))
        .await;
    let answered = c.until_complete(chat).await;
    let answer = answered.iter().find(|m| m["content"] == "Because").unwrap();
    assert!(answer.get("starts_run").is_none(), "{answer}");
}

/// A chat with turns `one` and `two`, then `two` edited to `TWO`: the chat,
/// its client, and each run's envelopes.
async fn one_two_edited(server: &Server) -> (Uuid, Client, [Vec<Value>; 3]) {
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "one").await;
    let one = c.until_complete(chat).await;
    c.say(chat, "two").await;
    let two = c.until_complete(chat).await;
    c.send(json!({"type": "chat.edit", "chat_id": chat, "seq": said(&two, "two"), "text": "TWO"}))
        .await;
    let edited = c.until_complete(chat).await;
    (chat, c, [one, two, edited])
}

/// `max_branches_per_chat` bounds the versions a chat's edits and
/// regenerates make; switching between them does not use it up, and has
/// its own bound (ten times as many).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switches_do_not_use_up_the_edits_a_chat_may_hold() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            max_branches_per_chat: Some(2),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    c.start(chat, "one").await;
    let one = said(&c.until_complete(chat).await, "one");
    c.send(json!({"type": "chat.edit", "chat_id": chat, "seq": one, "text": "two"}))
        .await;
    let two = said(&c.until_complete(chat).await, "two");
    // Back and forth between the two versions, more often than the limit.
    for to in [one, two, one, two, one] {
        c.send(json!({"type": "chat.switch", "chat_id": chat, "to": to}))
            .await;
    }
    c.send(json!({"type": "ping"})).await;
    let got = c.recv_until(|m| m["type"] == "pong").await;
    assert_eq!(got.iter().filter(|m| m["type"] == "chat.branch").count(), 5);
    // A second edit still may; a third may not.
    c.send(json!({"type": "chat.regenerate", "chat_id": chat, "seq": one}))
        .await;
    c.until_complete(chat).await;
    c.send(json!({"type": "chat.edit", "chat_id": chat, "seq": one, "text": "three"}))
        .await;
    assert_eq!(error_code(&mut c).await, "BRANCH_LIMIT_EXCEEDED");
    // Switches: 20 at most (15 more).
    let mut refused = None;
    for k in 0..16 {
        let to = if k % 2 == 0 { two } else { one };
        c.send(json!({"type": "chat.switch", "chat_id": chat, "to": to}))
            .await;
        c.send(json!({"type": "ping"})).await;
        let got = c.recv_until(|m| m["type"] == "pong").await;
        if let Some(e) = got.iter().find(|m| m["type"] == "chat.error") {
            assert_eq!(e["error_code"], "BRANCH_LIMIT_EXCEEDED");
            refused = Some(k);
            break;
        }
    }
    assert_eq!(refused, Some(15));
}
