//! The list of one's chats: titles (made after the first run, renamed by the
//! user, seen live by every open client), pinned first, archived apart,
//! searched by title and by what was said, exported; one user never reaches
//! another's; the list and the index outlive a restart.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::token;
use crate::mock_llm::{MockServer, Reply};
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire};

async fn titled(client: &mut Client, chat: Uuid) -> Value {
    titled_by(client, chat, None).await
}

/// The next `chat.title` of `chat` (given by `source`, if named).
async fn titled_by(client: &mut Client, chat: Uuid, source: Option<&str>) -> Value {
    let seen = client
        .recv_until(|m| {
            m["type"] == "chat.title"
                && m["chat_id"] == chat.to_string()
                && source.is_none_or(|s| m["source"] == s)
        })
        .await;
    seen.last().unwrap().clone()
}

async fn list(server: &Server, query: &str) -> Vec<Value> {
    let (status, body) = http_json(server, "GET", &format!("/v1/chats{query}"), "").await;
    assert_eq!(status, 200, "{body}");
    body["chats"].as_array().unwrap().clone()
}

fn ids(chats: &[Value]) -> Vec<String> {
    chats
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn patch(server: &Server, chat: Uuid, body: Value) -> (u16, Value) {
    http_json(
        server,
        "PATCH",
        &format!("/v1/chats/{chat}"),
        &body.to_string(),
    )
    .await
}

#[tokio::test]
async fn chats_are_titled_listed_searched_and_exported() {
    let titled_server = || Opts {
        settings: titles(),
        ..Default::default()
    };
    let server = Server::start_with(titled_server()).await;
    let mut client = server.client().await;
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    client
        .start(a, "How do I reverse a linked list in Rust?")
        .await;
    client.until_complete(a).await;
    // After the run: the first words (the demo agent has no model).
    let title = titled(&mut client, a).await;
    assert_eq!(title["title"], "How do I reverse a linked");
    assert_eq!(title["source"], "words");
    client.start(b, "Plan a trip to Lyon").await;
    client.until_complete(b).await;
    titled(&mut client, b).await;
    client.start(c, "hello").await;
    client.until_complete(c).await;
    titled(&mut client, c).await;

    // The latest activity first, with titles and the last words.
    let chats = list(&server, "").await;
    assert_eq!(ids(&chats), [c, b, a].map(|x| x.to_string()));
    assert_eq!(chats[2]["title"], "How do I reverse a linked");
    assert!(chats[2]["preview"].as_str().is_some_and(|p| !p.is_empty()));
    assert!(
        chats[2]["last_activity_at"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(chats[2]["pinned"], false);

    // A rename is logged: a second client of the chat sees it live.
    let mut other = server.client().await;
    other.resume(b, 0).await;
    other
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    let (status, view) = patch(&server, b, json!({"title": "  Weekend\nplans "})).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["title"], "Weekend plans");
    let renamed = titled_by(&mut other, b, Some("user")).await;
    assert_eq!(
        (&renamed["title"], &renamed["source"]),
        (&json!("Weekend plans"), &json!("user"))
    );

    // Pinned first; archived apart, and refusing turns until restored.
    assert_eq!(patch(&server, a, json!({"pinned": true})).await.0, 200);
    assert_eq!(
        ids(&list(&server, "").await),
        [a, c, b].map(|x| x.to_string())
    );
    let (status, view) = patch(&server, c, json!({"archived": true})).await;
    assert_eq!((status, &view["archived"]), (200, &json!(true)));
    assert_eq!(ids(&list(&server, "").await), [a, b].map(|x| x.to_string()));
    assert_eq!(ids(&list(&server, "?archived=true").await), [c.to_string()]);
    let said = json!({"text": "still there?"}).to_string();
    let (status, _) = http_json(&server, "POST", &format!("/v1/chats/{c}/messages"), &said).await;
    assert_eq!(status, 409, "an archived chat takes no turn");
    assert_eq!(patch(&server, c, json!({"archived": false})).await.0, 200);
    let (status, _) = http_json(&server, "POST", &format!("/v1/chats/{c}/messages"), &said).await;
    assert_eq!(status, 202, "restored");

    // Pages by cursor, the order kept.
    let (_, page) = http_json(&server, "GET", "/v1/chats?limit=2", "").await;
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let (_, rest) = http_json(
        &server,
        "GET",
        &format!("/v1/chats?limit=2&cursor={cursor}"),
        "",
    )
    .await;
    assert_eq!(
        page["chats"].as_array().unwrap().len() + rest["chats"].as_array().unwrap().len(),
        3
    );

    // Search: by what was said, by the title, best first, with a snippet.
    let found = list(&server, "?q=RUST%20lis").await;
    assert_eq!(ids(&found), [a.to_string()]);
    let hit = &found[0]["match"];
    assert_eq!(hit["field"], "text");
    let marked: Vec<&str> = hit["snippet"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["hit"] == true)
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(marked, ["list", "Rust"], "{hit}");
    let found = list(&server, "?q=reverse").await;
    assert_eq!(found[0]["match"]["field"], "title", "the title first");
    let found = list(&server, "?q=weekend").await;
    assert_eq!(
        (ids(&found), &found[0]["match"]["field"]),
        (vec![b.to_string()], &json!("title"))
    );
    assert_eq!(
        ids(&list(&server, "?q=lyon").await),
        [b.to_string()],
        "the words still"
    );
    assert!(
        list(&server, "?q=%22%2A%2A%20--").await.is_empty(),
        "no words, no hits"
    );
    assert!(list(&server, "?q=zzzyyyxxx").await.is_empty());

    // Export: as a person reads it, and as data, to download.
    let url = format!("http://{}/v1/chats/{b}/export", server.addr);
    let resp = reqwest::get(&url).await.unwrap();
    assert_eq!(resp.status(), 200);
    let disposition = resp.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(disposition, format!("attachment; filename=\"chat-{b}.md\""));
    assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
    let text = resp.text().await.unwrap();
    assert!(text.starts_with("# Weekend plans\n"), "{text}");
    assert!(text.contains("**You**:\n\nPlan a trip to Lyon\n"), "{text}");
    let data: Value = reqwest::get(format!("{url}?format=json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let messages = data["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"], "Plan a trip to Lyon");
    assert!(messages.iter().any(|m| m["role"] == "assistant"));
    assert_eq!(data["chat"]["title"], "Weekend plans");

    // Bad requests: a clear error each, nothing changed.
    for body in [
        json!({}),
        json!({"title": " \n "}),
        json!({"title": "x".repeat(201)}),
        json!({"pinned": "yes"}),
        json!({"color": "red"}),
    ] {
        let (status, err) = patch(&server, b, body.clone()).await;
        assert_eq!(
            (status, &err["error"]["code"]),
            (400, &json!("SCHEMA_VALIDATION_FAILED")),
            "{body}"
        );
    }
    let long = "a".repeat(300);
    for path in [
        format!("/v1/chats?q={long}"),
        "/v1/chats?cursor=nope".into(),
        format!("/v1/chats/{b}/export?format=xml"),
        "/v1/chats/nope/export".into(),
    ] {
        let (status, err) = http_json(&server, "GET", &path, "").await;
        assert_eq!(
            (status, &err["error"]["code"]),
            (400, &json!("SCHEMA_VALIDATION_FAILED")),
            "{path}"
        );
    }
    let (status, _) = patch(&server, Uuid::new_v4(), json!({"pinned": true})).await;
    assert_eq!(status, 404);
    let chats = list(&server, "").await;
    let kept = chats.iter().find(|x| x["id"] == b.to_string()).unwrap();
    assert_eq!(kept["title"], "Weekend plans", "nothing changed");

    // A restart keeps the list and the index.
    let dir = server.stop().await;
    let server = Server::start_in(dir, titled_server()).await;
    assert_eq!(ids(&list(&server, "?q=weekend").await), [b.to_string()]);
    assert_eq!(list(&server, "").await[0]["id"], a.to_string());
}

#[tokio::test]
async fn a_user_never_lists_searches_renames_or_exports_anothers_chat() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(crate::auth::SECRET.into()),
            ..titles()
        },
        ..Default::default()
    })
    .await;
    let (alice, bob) = (
        token("alice", 600, crate::auth::SECRET),
        token("bob", 600, crate::auth::SECRET),
    );
    let chat = Uuid::new_v4();
    let mut client = Client::connect(&format!("{}?access_token={alice}", server.ws_url())).await;
    client.start(chat, "my secret pancake recipe").await;
    client.until_complete(chat).await;
    titled(&mut client, chat).await;
    let get = |who: &str, path: String| {
        let auth = format!("Bearer {who}");
        let addr = server.addr;
        async move {
            let (status, body) =
                http_request(addr, "GET", &path, &[("authorization", &auth)], "").await;
            (
                status,
                serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
            )
        }
    };
    let (_, mine) = get(&alice, "/v1/chats?q=pancake".into()).await;
    assert_eq!(mine["chats"].as_array().unwrap().len(), 1);
    let (_, theirs) = get(&bob, "/v1/chats?q=pancake".into()).await;
    assert_eq!(theirs["chats"], json!([]));
    let (_, theirs) = get(&bob, "/v1/chats".into()).await;
    assert_eq!(theirs["chats"], json!([]));
    assert_eq!(get(&bob, format!("/v1/chats/{chat}/export")).await.0, 404);
    let (status, _) = get(&bob, format!("/v1/ai-sdk/chat/{chat}/messages")).await;
    assert_eq!(status, 200);
    assert_eq!(
        get(&bob, format!("/v1/ai-sdk/chat/{chat}/messages"))
            .await
            .1,
        json!([])
    );
    assert_eq!(
        get(&bob, format!("/v1/ag-ui/{chat}/messages")).await.1,
        json!([])
    );
    let auth = format!("Bearer {bob}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    let body = json!({"title": "mine now"}).to_string();
    let path = format!("/v1/chats/{chat}");
    let (status, _) = http_request(server.addr, "PATCH", &path, &headers, &body).await;
    assert_eq!(status, 404);
    let (status, _) = http_request(server.addr, "GET", "/v1/chats", &[], "").await;
    assert_eq!(status, 401);
    let (_, mine) = get(&alice, "/v1/chats".into()).await;
    assert_eq!(mine["chats"][0]["title"], "my secret pancake recipe");
}

/// Titles by the chat's own model (the default, which the test servers
/// turn off).
fn own_model() -> agentwire::config::Settings {
    agentwire::config::Settings {
        title_model: Some(String::new()),
        ..titles()
    }
}

/// The default: chats titled after their first run (the test servers turn
/// it off).
fn titles() -> agentwire::config::Settings {
    agentwire::config::Settings {
        auto_titles: Some(true),
        ..Default::default()
    }
}

/// An agent on a local OpenAI-compatible server.
fn agent(llm: &MockServer) -> String {
    format!(
        "id: real\nmodel: {{provider: openai, name: test-model, base_url: \"{}/v1\"}}\nsystem_prompt: You help.\n",
        llm.url()
    )
}

#[tokio::test]
async fn a_model_titles_the_chat_after_its_first_run_and_its_usage_is_counted() {
    let w = OpenAiWire;
    let llm = MockServer::start(vec![
        w.text(&["Use ", "iter().rev()."], (20, 5)),
        w.text(&["\"Reversing Lists in Rust.\""], (31, 4)),
        w.text(&["Sure."], (40, 2)),
    ])
    .await;
    let server = Server::start_with(Opts {
        agents: vec![("real.yaml".into(), agent(&llm))],
        settings: own_model(),
    })
    .await;
    let mut client = server.client().await;
    let chat = Uuid::new_v4();
    client
        .start_with(chat, "real", "How do I reverse a list?")
        .await;
    let run = client.until_complete(chat).await;
    assert_eq!(
        run.iter().filter(|m| m["type"] == "chat.title").count(),
        0,
        "after the run"
    );
    let title = titled(&mut client, chat).await;
    assert_eq!(title["title"], "Reversing Lists in Rust");
    assert_eq!(title["source"], "model");
    assert_eq!(
        title["usage"],
        json!({"total_tokens": 35, "prompt_tokens": 31, "completion_tokens": 4})
    );
    let asked = &llm.requests()[1].body;
    let prompt = asked.to_string();
    assert!(
        prompt.contains("How do I reverse a list?") && prompt.contains("iter().rev()."),
        "{prompt}"
    );
    // Titled once: the next run asks the model for its answer only.
    client.say(chat, "thanks").await;
    client.until_complete(chat).await;
    assert_eq!(llm.requests().len(), 3);
    let chats = list(&server, "").await;
    assert_eq!(chats[0]["title"], "Reversing Lists in Rust");
}

#[tokio::test]
async fn a_failing_title_model_falls_back_to_the_first_words_once() {
    let w = OpenAiWire;
    let llm = MockServer::start(vec![
        w.text(&["An answer."], (20, 5)),
        Reply::json(400, r#"{"error":{"message":"no titles today"}}"#),
    ])
    .await;
    let server = Server::start_with(Opts {
        agents: vec![("real.yaml".into(), agent(&llm))],
        settings: own_model(),
    })
    .await;
    let mut client = server.client().await;
    let chat = Uuid::new_v4();
    client.start_with(chat, "real", "Tell me about tides").await;
    client.until_complete(chat).await;
    let title = titled(&mut client, chat).await;
    assert_eq!(
        (&title["title"], &title["source"]),
        (&json!("Tell me about tides"), &json!("words"))
    );
    assert_eq!(llm.requests().len(), 2, "one try");
}
