//! User-invoked workflows (seed 002): the registry by category, invocation
//! over HTTP and the WebSocket with parameters checked against each
//! workflow's schema, approvals, the three kinds (an HTTP call receiving the
//! caller's bearer, a prompt the chat's agent answers, a fixed sequence of
//! tool calls with progress), failures, replay and who may run what.

use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::mock_llm::{MockServer, Reply};
use crate::sse::{all, open};
use crate::support::*;

const FORM: &str = r#"parameters:
  type: object
  properties:
    name: {type: string, minLength: 1, title: Name}
    template: {type: string, enum: [blank, web]}
    private: {type: boolean}
    size: {type: integer, minimum: 1}
  required: [name]
"#;

/// The test workflows; `url` is the HTTP workflows' endpoint.
fn workflows(url: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "create.yaml",
            format!(
                "id: create-project\ntitle: Create project\ndescription: A new project\ncategory: Projects\n{FORM}http: {{url: \"{url}/projects\"}}\n"
            ),
        ),
        (
            "deploy.yaml",
            format!(
                "id: deploy\ntitle: Deploy\ncategory: Projects\nrequires_approval: true\nhttp: {{url: \"{url}/deploy\"}}\n"
            ),
        ),
        (
            "summarize.yaml",
            "id: summarize\ntitle: Summarize\ncategory: Writing\nparameters: {type: object, properties: {topic: {type: string}, how: {type: string, default: briefly}, tone: {type: string}}, required: [topic]}\nprompt: \"Summarize {topic} {how} {tone}.\"\n".into(),
        ),
        (
            "count.yaml",
            "id: count\ntitle: Count\ncategory: Tools\nparameters: {type: object, properties: {times: {type: integer, minimum: 0}}, required: [times]}\n\
             steps:\n  - {tool: step, input: {steps: \"{times}\"}}\n  - {tool: step, input: {steps: 1}}\n\
             tools:\n  - {name: step, input_schema: {type: object, properties: {steps: {type: integer, minimum: 1}}, required: [steps]}, builtin: progress}\n".into(),
        ),
        (
            "admin.yaml",
            "id: purge\ntitle: Purge\ncategory: Admin\nallow: {users: [alice], claims: {role: [admin]}}\nprompt: purge\n".into(),
        ),
    ]
}

/// A template agent that waits for the user (its conversation stays pending).
const QUIZ: &str = "id: quiz\nmodel: {provider: scripted, script: {rules: [{reply: ok}]}}\n\
    template:\n  title: Q\n  items:\n    - id: one\n      contents:\n        - {widget_type: message, stem: Hi}\n";

/// A server whose agents folder has `workflows/`.
async fn server_with(url: &str, settings: agentwire::config::Settings) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("agents").join("workflows");
    std::fs::create_dir_all(&folder).unwrap();
    for (name, text) in workflows(url) {
        std::fs::write(folder.join(name), text).unwrap();
    }
    std::fs::write(dir.path().join("agents").join("quiz.yaml"), QUIZ).unwrap();
    Server::start_in(
        dir,
        Opts {
            settings,
            ..Default::default()
        },
    )
    .await
}

async fn server(url: &str) -> Server {
    server_with(url, Default::default()).await
}

/// A demo chat to run workflows in, subscribed on `c`.
async fn chat(c: &mut Client) -> Uuid {
    let chat = Uuid::new_v4();
    c.start(chat, "hello").await;
    c.until_complete(chat).await;
    chat
}

async fn invoke(
    server: &Server,
    chat: Uuid,
    id: &str,
    body: Value,
    bearer: Option<&str>,
) -> (u16, Value) {
    let auth = bearer.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    let path = format!("/v1/chats/{chat}/workflows/{id}");
    let (status, text) =
        http_request(server.addr, "POST", &path, &headers, &body.to_string()).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn of_type<'a>(msgs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    msgs.iter().filter(|m| m["type"] == ty).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_lists_by_category_with_each_form() {
    let server = server("http://127.0.0.1:9").await;
    let (status, list) = http_json(&server, "GET", "/v1/workflows", "").await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = list["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["count", "create-project", "deploy", "summarize"],
        "purge is alice's"
    );
    let (_, projects) = http_json(&server, "GET", "/v1/workflows?category=Projects", "").await;
    assert_eq!(projects["workflows"].as_array().unwrap().len(), 2);
    for path in ["/v1/workflows/categories", "/workflows/categories"] {
        let (status, cats) = http_json(&server, "GET", path, "").await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(
            cats,
            json!({"categories": [{"name": "Projects", "count": 2}, {"name": "Tools", "count": 1}, {"name": "Writing", "count": 1}]})
        );
    }
    let (status, one) = http_json(&server, "GET", "/v1/workflows/create-project", "").await;
    assert_eq!(status, 200);
    assert_eq!(
        (&one["title"], &one["kind"], &one["requires_approval"]),
        (&json!("Create project"), &json!("http"), &json!(false))
    );
    assert_eq!(one["parameters"]["required"], json!(["name"]));
    for missing in ["nope", "purge"] {
        let (status, err) =
            http_json(&server, "GET", &format!("/v1/workflows/{missing}"), "").await;
        assert_eq!(
            (status, &err["error"]["code"]),
            (404, &json!("WORKFLOW_NOT_FOUND"))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_workflow_runs_with_the_callers_bearer_and_replays() {
    let api = MockServer::start(vec![Reply::json(201, r#"{"project_id": "p-7"}"#)]).await;
    let server = server(&api.url()).await;
    let mut c = server.client().await;
    let chat = chat(&mut c).await;
    let params = json!({"name": "Apollo", "template": "web", "private": true, "size": 3});
    let (status, ok) = invoke(
        &server,
        chat,
        "create-project",
        json!({"parameters": params}),
        Some("tok-1"),
    )
    .await;
    assert_eq!(status, 202, "{ok}");
    let corr = ok["corr"].as_str().unwrap().to_owned();
    assert!(corr.starts_with("workflow_"));
    let msgs = c.until_complete(chat).await;
    let call = of_type(&msgs, "chat.tool_call")[0];
    assert_eq!(
        (&call["component_type"], &call["tool_name"], &call["corr"]),
        (&json!("workflow"), &json!("create-project"), &json!(corr))
    );
    assert_eq!(call["payload"]["parameters"], params);
    assert_eq!(call["payload"]["category"], "Projects");
    let resp = of_type(&msgs, "chat.tool_response")[0];
    assert_eq!(
        (&resp["success"], &resp["content"]),
        (&json!(true), &json!({"project_id": "p-7"}))
    );
    assert_eq!(msgs.last().unwrap()["reason"], "completed");
    let req = &api.requests()[0];
    assert_eq!((req.uri.as_str(), &req.body), ("/projects", &params));
    assert_eq!(req.headers["authorization"], "Bearer tok-1");

    // A replay shows it again, and so does every dialect.
    let mut again = server.client().await;
    again.resume(chat, 0).await;
    let replay = again
        .recv_until(|m| m["type"] == "chat.resume_boundary")
        .await;
    assert!(
        replay
            .iter()
            .any(|m| m["corr"] == json!(corr) && m["replay"] == true)
    );
    // Joined by seq (`after=`): the envelopes after the one before the call.
    let before = call["seq"].as_u64().unwrap() - 1;
    let path = format!("/v1/chats/{chat}/events?dialect=agent-chat&after={before}");
    let evs = all(open(&server, "GET", &path, None, None).await.events).await;
    let names: Vec<&str> = evs.iter().map(|e| e.event.as_str()).collect();
    assert!(
        names.contains(&"tool_call_start") && names.contains(&"tool_call_result"),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_refused_naming_the_field_and_change_nothing() {
    let server = server("http://127.0.0.1:9").await;
    let mut c = server.client().await;
    let chat = chat(&mut c).await;
    let (_, before) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    let bad = json!({"parameters": {"name": "", "size": 0, "template": "huge"}});
    let (status, err) = invoke(&server, chat, "create-project", bad, None).await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (400, &json!("SCHEMA_VALIDATION_FAILED"))
    );
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("/name") && message.contains("/size") && message.contains("/template"),
        "{message}"
    );
    let (status, _) = invoke(&server, chat, "create-project", json!({}), None).await;
    assert_eq!(status, 400, "name is required");
    let (status, _) = invoke(
        &server,
        chat,
        "create-project",
        json!({"parameters": [1]}),
        None,
    )
    .await;
    assert_eq!(status, 400);
    let (status, err) = invoke(&server, chat, "nope", json!({}), None).await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (404, &json!("WORKFLOW_NOT_FOUND"))
    );
    // Over the WebSocket: the same refusals, to this connection only.
    c.send(json!({"type": "workflow.invoke", "chat_id": chat, "workflow": "create-project", "parameters": {"size": "big"}}))
        .await;
    let e = c.expect("chat.error").await;
    assert_eq!(e["error_code"], "SCHEMA_VALIDATION_FAILED");
    assert!(e["message"].as_str().unwrap().contains("/size"));
    c.send(json!({"type": "workflow.invoke", "chat_id": chat}))
        .await;
    assert_eq!(
        c.expect("chat.error").await["error_code"],
        "SCHEMA_VALIDATION_FAILED"
    );
    c.send(json!({"type": "workflow.invoke", "chat_id": chat, "workflow": "purge"}))
        .await;
    assert_eq!(
        c.expect("chat.error").await["error_code"],
        "WORKFLOW_NOT_FOUND"
    );
    let (_, after) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(before["last_seq"], after["last_seq"], "nothing logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_is_asked_and_a_refusal_runs_nothing() {
    let api = MockServer::start(vec![Reply::json(200, r#"{"deployed": true}"#)]).await;
    let server = server(&api.url()).await;
    let mut c = server.client().await;
    let chat = chat(&mut c).await;

    // Granted over the WebSocket.
    c.send(json!({"type": "workflow.invoke", "chat_id": chat, "workflow": "deploy"}))
        .await;
    let asked = c
        .recv_until(|m| m["type"] == "chat.tool_call" && m["component_type"] == "approval")
        .await;
    let gate = asked.last().unwrap();
    assert_eq!(gate["payload"]["tool_name"], "deploy");
    c.send(json!({"type": "inline_component.result", "chat_id": chat, "corr": gate["corr"], "data": {"approved": true}}))
        .await;
    let msgs = c.until_complete(chat).await;
    let resp = msgs
        .iter()
        .rfind(|m| m["type"] == "chat.tool_response")
        .unwrap();
    assert_eq!(resp["content"], json!({"deployed": true}));
    assert_eq!(api.requests().len(), 1);

    // Refused over HTTP: nothing runs.
    let (status, ok) = invoke(&server, chat, "deploy", json!({}), None).await;
    assert_eq!(status, 202);
    let corr = ok["corr"].as_str().unwrap();
    c.recv_until(|m| m["type"] == "chat.tool_call" && m["component_type"] == "approval")
        .await;
    let body = json!({"approved": false, "reason": "not today"}).to_string();
    let (status, _) = http_json(
        &server,
        "POST",
        &format!("/v1/chats/{chat}/approvals/{corr}"),
        &body,
    )
    .await;
    assert_eq!(status, 200);
    let msgs = c.until_complete(chat).await;
    let resp = msgs
        .iter()
        .rfind(|m| m["type"] == "chat.tool_response" && m["corr"] == json!(corr))
        .unwrap();
    assert_eq!(
        (&resp["success"], &resp["content"]),
        (
            &json!(false),
            &json!({"refused": true, "reason": "not today"})
        )
    );
    assert_eq!(api.requests().len(), 1, "the refused workflow never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_workflow_starts_the_chats_agent() {
    let server = server("http://127.0.0.1:9").await;
    let mut c = server.client().await;
    let chat = chat(&mut c).await;
    let (status, _) = invoke(
        &server,
        chat,
        "summarize",
        json!({"parameters": {"topic": "tides"}}),
        None,
    )
    .await;
    assert_eq!(status, 202);
    let msgs = c.until_complete(chat).await;
    let user = of_type(&msgs, "chat.text")
        .into_iter()
        .find(|m| m["agent"] == "user")
        .unwrap();
    // `how` was left out: its schema default filled it; `tone`, optional
    // with no default, leaves nothing (not `{tone}`, nor a space).
    assert_eq!(user["content"], "Summarize tides briefly.");
    assert_eq!(last_text(&msgs), "You said: Summarize tides briefly.");
    for tone in [json!(""), json!("gently")] {
        let given = json!({"parameters": {"topic": "tides", "tone": tone}});
        assert_eq!(invoke(&server, chat, "summarize", given, None).await.0, 202);
        let msgs = c.until_complete(chat).await;
        let said = format!(
            "Summarize tides briefly{}.",
            if tone == "" { "" } else { " gently" }
        );
        assert_eq!(last_text(&msgs), format!("You said: {said}"));
    }
    assert_eq!(of_type(&msgs, "chat.select_speaker").len(), 1);
    assert_eq!(msgs.last().unwrap()["reason"], "completed");

    // A value is filled in once, never read for placeholders itself.
    let sly = json!({"parameters": {"topic": "{how}{how}", "how": "x"}});
    assert_eq!(invoke(&server, chat, "summarize", sly, None).await.0, 202);
    let msgs = c.until_complete(chat).await;
    assert_eq!(last_text(&msgs), "You said: Summarize {how}{how} x.");
    // The filled prompt is a user's message: no larger than one.
    let big = json!({"parameters": {"topic": "t".repeat(200_000), "how": "h".repeat(100_000)}});
    let (status, err) = invoke(&server, chat, "summarize", big, None).await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (413, &json!("SCHEMA_VALIDATION_FAILED")),
        "{err}"
    );

    // A template's conversation runs no workflow.
    let (_, quiz) = http_json(
        &server,
        "POST",
        "/v1/chats",
        &json!({"agent": "quiz"}).to_string(),
    )
    .await;
    let quiz: Uuid = quiz["id"].as_str().unwrap().parse().unwrap();
    let (status, err) = invoke(
        &server,
        quiz,
        "summarize",
        json!({"parameters": {"topic": "x"}}),
        None,
    )
    .await;
    assert_eq!(status, 409, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("template"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steps_workflow_reports_progress_and_a_failing_step_is_an_error() {
    let server = server("http://127.0.0.1:9").await;
    let mut c = server.client().await;
    let chat = chat(&mut c).await;
    c.send(json!({"type": "workflow.invoke", "chat_id": chat, "workflow": "count", "parameters": {"times": 2}}))
        .await;
    let msgs = c.until_complete(chat).await;
    let corr = of_type(&msgs, "chat.tool_call")[0]["corr"]
        .as_str()
        .unwrap()
        .to_owned();
    let steps: Vec<&str> = of_type(&msgs, "chat.tool_call")
        .iter()
        .skip(1)
        .map(|m| m["corr"].as_str().unwrap())
        .collect();
    assert_eq!(steps, [format!("{corr}.1"), format!("{corr}.2")]);
    let progress: Vec<f64> = of_type(&msgs, "chat.tool_progress")
        .iter()
        .filter(|m| m["corr"] == json!(corr))
        .map(|m| m["progress_percent"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, [0.0, 50.0, 100.0]);
    let done = of_type(&msgs, "chat.tool_response")
        .into_iter()
        .find(|m| m["corr"] == json!(corr))
        .unwrap();
    assert_eq!(
        done["content"],
        json!({"steps": ["completed 2 steps", "completed 1 steps"]})
    );
    assert_eq!(msgs.last().unwrap()["reason"], "completed");

    // times = 0 passes the workflow's form but not the step's tool: an error.
    c.send(json!({"type": "workflow.invoke", "chat_id": chat, "workflow": "count", "parameters": {"times": 0}}))
        .await;
    let msgs = c.until_complete(chat).await;
    let err = of_type(&msgs, "chat.error")[0];
    assert_eq!(err["error_code"], "TOOL_EXECUTION_ERROR");
    assert!(
        err["message"].as_str().unwrap().contains("step 1 (step)"),
        "{err}"
    );
    assert_eq!(msgs.last().unwrap()["reason"], "error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_workflow_that_fails_is_a_run_error() {
    let api = MockServer::start(vec![Reply::json(503, r#"{"error": "down"}"#)]).await;
    let server = server(&api.url()).await;
    let mut c = server.client().await;
    let chat = chat(&mut c).await;
    let (status, ok) = invoke(
        &server,
        chat,
        "create-project",
        json!({"parameters": {"name": "A"}}),
        None,
    )
    .await;
    assert_eq!(status, 202);
    let msgs = c.until_complete(chat).await;
    let resp = of_type(&msgs, "chat.tool_response")[0];
    assert_eq!(resp["success"], false);
    assert!(resp["content"].as_str().unwrap().contains("503"), "{resp}");
    let err = of_type(&msgs, "chat.error")[0];
    assert_eq!(
        (&err["error_code"], &err["details"]["corr"]),
        (&json!("TOOL_EXECUTION_ERROR"), &ok["corr"])
    );
    assert_eq!(msgs.last().unwrap()["reason"], "error");
    // Over the WebSocket, a second one while the chat is busy is refused.
    c.say(chat, "slow: 100").await;
    c.expect("chat.text").await;
    c.send(json!({"type": "workflow.invoke", "chat_id": chat, "workflow": "create-project", "parameters": {"name": "B"}}))
        .await;
    let refused = c.recv_until(|m| m["type"] == "chat.error").await;
    assert_eq!(refused.last().unwrap()["error_code"], "RUN_IN_PROGRESS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_while_a_run_is_active() {
    let server = server("http://127.0.0.1:9").await;
    let mut c = server.client().await;
    let chat = chat(&mut c).await;
    c.say(chat, "slow: 100").await;
    c.expect("chat.text").await;
    let (status, err) = invoke(
        &server,
        chat,
        "summarize",
        json!({"parameters": {"topic": "x"}}),
        None,
    )
    .await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (409, &json!("RUN_IN_PROGRESS"))
    );
    c.send(json!({"type": "chat.cancel", "chat_id": chat}))
        .await;
    c.until_complete(chat).await;
    // Another user's chat is not found.
    let other = Uuid::new_v4();
    let (status, _) = invoke(
        &server,
        other,
        "summarize",
        json!({"parameters": {"topic": "x"}}),
        None,
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_jwt_mode_a_workflow_may_be_limited_to_users_or_a_claim() {
    let settings = agentwire::config::Settings {
        auth: Some(agentwire::config::AuthMode::Jwt),
        jwt_secret: Some(crate::auth::SECRET.into()),
        ..Default::default()
    };
    let server = server_with("http://127.0.0.1:9", settings).await;
    let now = chrono::Utc::now().timestamp();
    let token = |claims: Value| {
        let mut claims = claims;
        claims["exp"] = json!(now + 600);
        encode(
            &Header::default(),
            &claims,
            &EncodingKey::from_secret(crate::auth::SECRET.as_bytes()),
        )
        .unwrap()
    };
    let sees_purge = |t: String| {
        let server = &server;
        async move {
            let auth = format!("Bearer {t}");
            let (status, body) = http_get(
                server.addr,
                "/v1/workflows/purge",
                &[("authorization", &auth)],
            )
            .await;
            status == 200 && body.contains("Purge")
        }
    };
    assert!(sees_purge(token(json!({"sub": "alice"}))).await);
    assert!(sees_purge(token(json!({"sub": "bob", "role": "admin"}))).await);
    assert!(sees_purge(token(json!({"sub": "carol", "role": ["viewer", "admin"]}))).await);
    assert!(!sees_purge(token(json!({"sub": "dave", "role": "viewer"}))).await);
    // Running it follows the same rule, over the WebSocket and HTTP.
    for (claims, allowed) in [
        (json!({"sub": "bob", "role": "admin"}), true),
        (json!({"sub": "dave", "role": "viewer"}), false),
    ] {
        let t = token(claims);
        let mut ws = Client::connect(&format!("{}?access_token={t}", server.ws_url())).await;
        let chat = Uuid::new_v4();
        ws.start(chat, "hi").await;
        ws.until_complete(chat).await;
        ws.send(json!({"type": "workflow.invoke", "chat_id": chat, "workflow": "purge"}))
            .await;
        let first = ws.next().await.unwrap();
        if allowed {
            assert_eq!(
                (&first["type"], &first["component_type"]),
                (&json!("chat.tool_call"), &json!("workflow")),
                "{first}"
            );
            ws.until_complete(chat).await;
            let (status, err) = invoke(&server, chat, "purge", json!({}), Some(&t)).await;
            assert_eq!(status, 202, "{err}");
        } else {
            assert_eq!(first["error_code"], "WORKFLOW_NOT_FOUND", "{first}");
            let (status, _) = invoke(&server, chat, "purge", json!({}), Some(&t)).await;
            assert_eq!(status, 404);
        }
    }
    // And the enhanced prompt lists only what the caller may run.
    let auth = format!("Bearer {}", token(json!({"sub": "dave"})));
    let (_, prompt) = http_get(
        server.addr,
        "/v1/system-prompts/demo/enhanced",
        &[("authorization", &auth)],
    )
    .await;
    let prompt: Value = serde_json::from_str(&prompt).unwrap();
    let text = prompt["enhanced"].as_str().unwrap();
    assert!(
        text.contains("## Projects\n- Create project (`create-project`): A new project"),
        "{text}"
    );
    assert!(!text.contains("purge"));
    let (status, _) = http_get(server.addr, "/v1/workflows", &[]).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_chat_that_begins_with_a_workflow_is_titled_after_it() {
    let settings = agentwire::config::Settings {
        auto_titles: Some(true),
        ..Default::default()
    };
    let server = server_with("http://127.0.0.1:9", settings).await;
    let mut c = server.client().await;
    let chat = Uuid::new_v4();
    let (status, _) = http_json(
        &server,
        "POST",
        "/v1/chats",
        &json!({"agent": "demo", "chat_id": chat}).to_string(),
    )
    .await;
    assert_eq!(status, 201);
    c.resume(chat, 0).await;
    c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    let body = json!({"parameters": {"times": 1}});
    assert_eq!(invoke(&server, chat, "count", body, None).await.0, 202);
    c.until_complete(chat).await;
    // In the commit of the run's end, just after it.
    let title = c.recv().await;
    assert_eq!(
        (&title["type"], &title["title"], &title["source"]),
        (&json!("chat.title"), &json!("Count"), &json!("workflow"))
    );
    // Titled once: a later run leaves it.
    c.say(chat, "hello").await;
    let later = c.until_complete(chat).await;
    assert!(of_type(&later, "chat.title").is_empty());
    let (_, view) = http_json(&server, "GET", &format!("/v1/chats/{chat}"), "").await;
    assert_eq!(view["title"], "Count");
}
