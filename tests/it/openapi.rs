//! `/openapi.json` describes what the routes really answer: every JSON
//! response below is validated against the schema the document gives for its
//! route, method and status.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::mock_llm::MockServer;
use crate::support::*;

/// Replaces every `$ref` to a component schema with the schema itself.
fn inline(v: &Value, doc: &Value) -> Value {
    match v {
        Value::Object(map) => {
            if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                let name = r.trim_start_matches("#/components/schemas/");
                return inline(&doc["components"]["schemas"][name], doc);
            }
            Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), inline(v, doc)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| inline(i, doc)).collect()),
        other => other.clone(),
    }
}

fn check(doc: &Value, template: &str, method: &str, status: u16, body: &str) {
    let response = &doc["paths"][template][method]["responses"][status.to_string()];
    assert!(
        response.is_object(),
        "{method} {template} {status} is not documented"
    );
    let schema = &response["content"]["application/json"]["schema"];
    if schema.is_null() {
        assert!(
            body.is_empty(),
            "{method} {template} {status} documents no body, got {body}"
        );
        return;
    }
    let schema = inline(schema, doc);
    let value: Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{method} {template}: {e}: {body}"));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {template} {status}: {errors:?}\n{value}\n{schema}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_json_answer_matches_the_document() {
    let llm = MockServer::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentwire.toml");
    std::fs::write(
        &config,
        format!(
            "[[models]]\nname = \"m\"\nprovider = \"openai\"\nbase_url = \"{}/v1\"\n",
            llm.url()
        ),
    )
    .unwrap();
    // A workflow, for the workflow routes.
    let flows = dir.path().join("agents").join("workflows");
    std::fs::create_dir_all(&flows).unwrap();
    std::fs::write(
        flows.join("hello.yaml"),
        "id: hello\ncategory: Demo\nparameters: {type: object, properties: {who: {type: string}}}\nprompt: \"Hello {who}\"\n",
    )
    .unwrap();
    let server = Server::start_in(
        dir,
        Opts {
            settings: agentwire::config::Settings {
                config: Some(config),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    let (status, text) = http_get(server.addr, "/openapi.json", &[]).await;
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));

    let ct = [("content-type", "application/json")];
    let req = |method: &'static str, path: String, body: String| {
        let addr = server.addr;
        async move { http_request(addr, method, &path, &ct, &body).await }
    };
    let missing = Uuid::new_v4();

    let (s, b) = req("GET", "/healthz".into(), String::new()).await;
    check(&doc, "/healthz", "get", s, &b);
    let (s, b) = req("GET", "/v1/agents".into(), String::new()).await;
    check(&doc, "/v1/agents", "get", s, &b);
    let (s, b) = req(
        "POST",
        "/v1/chats".into(),
        json!({"agent": "demo", "message": "hi"}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats", "post", s, &b);
    let id = serde_json::from_str::<Value>(&b).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = req(
        "POST",
        "/v1/chats".into(),
        json!({"agent": "nobody"}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats", "post", s, &b);
    let (s, b) = req("GET", "/v1/chats?limit=1".into(), String::new()).await;
    check(&doc, "/v1/chats", "get", s, &b);
    let (s, b) = req("GET", format!("/v1/chats/{id}"), String::new()).await;
    check(&doc, "/v1/chats/{id}", "get", s, &b);
    let (s, b) = req("GET", format!("/v1/chats/{missing}"), String::new()).await;
    check(&doc, "/v1/chats/{id}", "get", s, &b);
    let (s, b) = req(
        "GET",
        format!("/v1/chats/{id}/events?limit=3"),
        String::new(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/events", "get", s, &b);
    let (s, b) = req("GET", format!("/v1/chats/{id}/model"), String::new()).await;
    check(&doc, "/v1/chats/{id}/model", "get", s, &b);
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{id}/model"),
        json!({"name": "m"}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/model", "post", s, &b);
    let (s, b) = req("POST", format!("/v1/chats/{id}/cancel"), String::new()).await;
    check(&doc, "/v1/chats/{id}/cancel", "post", s, &b);
    // Wait for the first run to end before the next turn.
    for _ in 0..100 {
        let (_, b) = req("GET", format!("/v1/chats/{id}"), String::new()).await;
        if serde_json::from_str::<Value>(&b).unwrap()["state"] == "idle" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{id}/messages"),
        json!({"text": "more"}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/messages", "post", s, &b);
    // The tree, on a chat of the demo's own (the first's model has no
    // replies): its points, an edit, a regenerate (once the edit's run is
    // over), a switch back, and what finds nothing.
    let (_, b) = req(
        "POST",
        "/v1/chats".into(),
        json!({"agent": "demo", "message": "hi"}).to_string(),
    )
    .await;
    let tree = serde_json::from_str::<Value>(&b).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = req("GET", format!("/v1/chats/{tree}/branches"), String::new()).await;
    check(&doc, "/v1/chats/{id}/branches", "get", s, &b);
    let idle = |id: String| async move {
        for _ in 0..100 {
            let (_, b) =
                http_request(server.addr, "GET", &format!("/v1/chats/{id}"), &[], "").await;
            if serde_json::from_str::<Value>(&b).unwrap()["state"] == "idle" {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    idle(tree.clone()).await;
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{tree}/messages/1/edit"),
        json!({"text": "hello"}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/messages/{seq}/edit", "post", s, &b);
    assert_eq!(s, 202, "{b}");
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{tree}/messages/2/edit"),
        json!({"text": "hello"}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/messages/{seq}/edit", "post", s, &b);
    idle(tree.clone()).await;
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{tree}/regenerate"),
        json!({"model": "nope"}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/regenerate", "post", s, &b);
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{tree}/regenerate"),
        String::new(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/regenerate", "post", s, &b);
    assert_eq!(s, 202, "{b}");
    idle(tree.clone()).await;
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{tree}/switch"),
        json!({"to": 1}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/switch", "post", s, &b);
    assert_eq!(s, 200, "{b}");
    let (s, b) = req(
        "GET",
        format!("/v1/chats/{tree}/path?limit=2"),
        String::new(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/path", "get", s, &b);
    assert_eq!(s, 200, "{b}");
    let (s, b) = req(
        "GET",
        format!("/v1/chats/{tree}/path?leaf=100000"),
        String::new(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/path", "get", s, &b);
    let (s, b) = req("POST", format!("/v1/chats/{tree}/fork"), String::new()).await;
    check(&doc, "/v1/chats/{id}/fork", "post", s, &b);
    assert_eq!(s, 201, "{b}");
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{tree}/fork"),
        json!({"at": 1}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/fork", "post", s, &b);
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{missing}/switch"),
        json!({"to": 1}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/switch", "post", s, &b);
    let (s, b) = req("DELETE", format!("/v1/chats/{missing}"), String::new()).await;
    check(&doc, "/v1/chats/{id}", "delete", s, &b);
    let (s, b) = req("POST", "/chat".into(), String::new()).await;
    check(&doc, "/chat", "post", s, &b);
    let thread = serde_json::from_str::<Value>(&b).unwrap()["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = req("GET", format!("/chat/{thread}/model"), String::new()).await;
    check(&doc, "/chat/{thread_id}/model", "get", s, &b);
    let (s, b) = req(
        "POST",
        format!("/chat/{thread}/model"),
        json!({"name": "m"}).to_string(),
    )
    .await;
    check(&doc, "/chat/{thread_id}/model", "post", s, &b);
    let (s, b) = req("GET", "/v1/models".into(), String::new()).await;
    check(&doc, "/v1/models", "get", s, &b);
    let (s, b) = req(
        "GET",
        "/v1/system-prompts/demo/enhanced".into(),
        String::new(),
    )
    .await;
    check(&doc, "/v1/system-prompts/{agent}/enhanced", "get", s, &b);
    let (s, b) = req(
        "POST",
        "/v1/agent/chat".into(),
        json!({"context_type": "x"}).to_string(),
    )
    .await;
    check(&doc, "/v1/agent/chat", "post", s, &b);

    // The answers: one real input request, and what is not open.
    let (_, b) = req(
        "POST",
        "/v1/chats".into(),
        json!({"agent": "demo", "message": "ask: Which city?"}).to_string(),
    )
    .await;
    let asking = serde_json::from_str::<Value>(&b).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut request_id = None;
    for _ in 0..200 {
        let (_, b) = req(
            "GET",
            format!("/v1/chats/{asking}/events?limit=50"),
            String::new(),
        )
        .await;
        let page: Value = serde_json::from_str(&b).unwrap();
        request_id = page["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "chat.input_request")
            .map(|e| e["request_id"].as_str().unwrap().to_owned());
        if request_id.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let request_id = request_id.expect("the demo asks");
    let answer = json!({"text": "Oslo"}).to_string();
    let inputs = "/v1/chats/{id}/inputs/{request_id}";
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{asking}/inputs/{request_id}"),
        answer.clone(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    check(&doc, inputs, "post", s, &b);
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{asking}/inputs/{request_id}"),
        answer,
    )
    .await;
    assert_eq!(s, 404, "{b}");
    check(&doc, inputs, "post", s, &b);
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{asking}/components/nope"),
        json!({"data": {}}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/components/{corr}", "post", s, &b);
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{asking}/approvals/nope"),
        json!({"approved": true}).to_string(),
    )
    .await;
    check(
        &doc,
        "/v1/chats/{id}/approvals/{tool_call_id}",
        "post",
        s,
        &b,
    );
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{asking}/approvals"),
        json!({"decisions": [{"tool_call_id": "nope", "approved": false}]}).to_string(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    check(&doc, "/v1/chats/{id}/approvals", "post", s, &b);

    // Connections: made, listed, read, changed, deleted, then missing.
    let body =
        json!({"name": "w", "driver": "postgres", "host": "203.0.113.5", "database": "shop", "username": "u"}).to_string();
    let (s, b) = req("POST", "/v1/connections".into(), body.clone()).await;
    assert_eq!(s, 201, "{b}");
    check(&doc, "/v1/connections", "post", s, &b);
    let conn = serde_json::from_str::<Value>(&b).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = req("GET", "/v1/connections".into(), String::new()).await;
    check(&doc, "/v1/connections", "get", s, &b);
    let one = "/v1/connections/{id}";
    let (s, b) = req("GET", format!("/v1/connections/{conn}"), String::new()).await;
    check(&doc, one, "get", s, &b);
    let (s, b) = req("PUT", format!("/v1/connections/{conn}"), body).await;
    check(&doc, one, "put", s, &b);
    let (s, b) = req("DELETE", format!("/v1/connections/{conn}"), String::new()).await;
    assert_eq!(s, 204);
    check(&doc, one, "delete", s, &b);
    let (s, b) = req("GET", format!("/v1/connections/{conn}"), String::new()).await;
    assert_eq!(s, 404);
    check(&doc, one, "get", s, &b);

    // A chat's database: none bound (the connection is gone), then its state.
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{id}/connection"),
        json!({"connection_id": conn}).to_string(),
    )
    .await;
    assert_eq!(s, 404, "{b}");
    check(&doc, "/v1/chats/{id}/connection", "post", s, &b);
    let (s, b) = req("GET", format!("/v1/chats/{id}/state"), String::new()).await;
    assert_eq!(s, 200, "{b}");
    check(&doc, "/v1/chats/{id}/state", "get", s, &b);

    // Workflows: the registry, one, an invocation, and its refusals.
    for path in [
        "/v1/workflows",
        "/v1/workflows/categories",
        "/v1/workflows/hello",
    ] {
        let (s, b) = req("GET", path.into(), String::new()).await;
        assert_eq!(s, 200, "{b}");
        let template = if path.ends_with("hello") {
            "/v1/workflows/{id}"
        } else {
            path
        };
        check(&doc, template, "get", s, &b);
    }
    let (s, b) = req("GET", "/v1/workflows/nope".into(), String::new()).await;
    check(&doc, "/v1/workflows/{id}", "get", s, &b);
    let invoke = "/v1/chats/{id}/workflows/{workflow_id}";
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{id}/workflows/hello"),
        json!({"parameters": {"who": 1}}).to_string(),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    check(&doc, invoke, "post", s, &b);
    // In a chat of its own (the one above may still be running).
    let (_, b) = req(
        "POST",
        "/v1/chats".into(),
        json!({"agent": "demo"}).to_string(),
    )
    .await;
    let idle = serde_json::from_str::<Value>(&b).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{idle}/workflows/hello"),
        json!({"parameters": {"who": "you"}}).to_string(),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    check(&doc, invoke, "post", s, &b);

    // The schemas are real: a wrong body fails them.
    let chat_schema = inline(
        &doc["paths"]["/v1/chats/{id}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"],
        &doc,
    );
    assert!(
        !jsonschema::validator_for(&chat_schema)
            .unwrap()
            .is_valid(&json!({"id": 1}))
    );

    // The AI SDK's transport: its refusals (its streams: clients/ai-sdk).
    let (s, b) = req(
        "POST",
        "/v1/ai-sdk/chat".into(),
        json!({"id": idle, "messages": []}).to_string(),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    check(&doc, "/v1/ai-sdk/chat", "post", s, &b);
    let (s, b) = req(
        "GET",
        format!("/v1/ai-sdk/chat/{}/stream", uuid::Uuid::new_v4()),
        String::new(),
    )
    .await;
    // A chat not created yet has nothing in flight (useChat resumes on mount).
    assert_eq!(s, 204, "{b}");
    assert!(doc["paths"]["/v1/ai-sdk/chat/{id}/stream"]["get"]["responses"]["204"].is_object());

    // AG-UI: its refusals (its streams: clients/ag-ui).
    let (s, b) = req(
        "POST",
        "/v1/ag-ui".into(),
        json!({"threadId": idle, "runId": "r1", "messages": []}).to_string(),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    check(&doc, "/v1/ag-ui", "post", s, &b);
    let (s, b) = req(
        "GET",
        format!("/v1/ag-ui/{}/stream", uuid::Uuid::new_v4()),
        String::new(),
    )
    .await;
    assert_eq!(s, 404, "{b}");
    check(&doc, "/v1/ag-ui/{thread}/stream", "get", s, &b);

    // The chat list (issue 35): rename and pin, a search, the export's
    // errors, the conversation as each library loads it.
    let renamed = json!({"title": "Renamed", "pinned": true}).to_string();
    let (s, b) = req("PATCH", format!("/v1/chats/{id}"), renamed).await;
    check(&doc, "/v1/chats/{id}", "patch", s, &b);
    let (s, b) = req("PATCH", format!("/v1/chats/{id}"), "{}".into()).await;
    check(&doc, "/v1/chats/{id}", "patch", s, &b);
    let (s, b) = req(
        "PATCH",
        format!("/v1/chats/{missing}"),
        json!({"pinned": true}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}", "patch", s, &b);
    let (s, b) = req("GET", "/v1/chats?q=renamed".into(), String::new()).await;
    check(&doc, "/v1/chats", "get", s, &b);
    let found: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(found["chats"][0]["match"]["field"], "title");
    let (s, b) = req(
        "GET",
        format!("/v1/chats/{id}/export?format=xml"),
        String::new(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/export", "get", s, &b);
    let (s, b) = req("GET", format!("/v1/chats/{missing}/export"), String::new()).await;
    check(&doc, "/v1/chats/{id}/export", "get", s, &b);
    let (s, _) = req("GET", format!("/v1/chats/{id}/export"), String::new()).await;
    assert_eq!(s, 200);
    assert!(doc["paths"]["/v1/chats/{id}/export"]["get"]["responses"]["200"]["content"]["text/markdown"].is_object());
    let (s, b) = req(
        "GET",
        format!("/v1/ai-sdk/chat/{id}/messages"),
        String::new(),
    )
    .await;
    check(&doc, "/v1/ai-sdk/chat/{id}/messages", "get", s, &b);
    assert!(
        serde_json::from_str::<Value>(&b)
            .unwrap()
            .as_array()
            .is_some_and(|m| !m.is_empty())
    );
    let (s, b) = req("GET", format!("/v1/ag-ui/{id}/messages"), String::new()).await;
    check(&doc, "/v1/ag-ui/{id}/messages", "get", s, &b);

    // Files: a JSON file (this helper's content type), uploaded and read back.
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{id}/files?name=a.json"),
        r#"{"a":1}"#.into(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/files", "post", s, &b);
    let file: Value = serde_json::from_str(&b).unwrap();
    let (s, b) = req("POST", format!("/v1/chats/{missing}/files"), "{}".into()).await;
    check(&doc, "/v1/chats/{id}/files", "post", s, &b);
    let (s, b) = req("GET", format!("/v1/files/{missing}"), String::new()).await;
    check(&doc, "/v1/files/{id}", "get", s, &b);
    let path = format!("/v1/files/{}", file["id"].as_str().unwrap());
    assert_eq!(
        req("GET", path, String::new()).await,
        (200, r#"{"a":1}"#.into())
    );

    // The server API, with service keys (this server is in auth mode none:
    // its routes still take keys only).
    let publish =
        crate::server_api::keys(&server, &["create", "--name", "p", "--scopes", "publish"])
            .await
            .unwrap();
    let read = crate::server_api::keys(&server, &["create", "--name", "r", "--scopes", "read"])
        .await
        .unwrap();
    let with = |key: &str, method: &'static str, path: String, body: Option<Value>| {
        let (server, key) = (&server, key.to_owned());
        async move { crate::server_api::call(server, method, &path, &key, body).await }
    };
    let started = with(
        &publish,
        "POST",
        "/v1/server/chats".into(),
        Some(json!({"user": "dev", "agent": "demo", "message": "the job is done"})),
    )
    .await;
    check(
        &doc,
        "/v1/server/chats",
        "post",
        started.0,
        &started.1.to_string(),
    );
    let chat = started.1["id"].as_str().unwrap().to_owned();
    for (key, body) in [
        (&read, json!({"user": "dev", "agent": "demo"})),
        (&publish, json!({"user": "dev", "agent": "nobody"})),
        (&publish, json!({"user": "dev"})),
    ] {
        let (s, b) = with(key, "POST", "/v1/server/chats".into(), Some(body)).await;
        check(&doc, "/v1/server/chats", "post", s, &b.to_string());
    }
    let (s, b) = http_request(server.addr, "POST", "/v1/server/chats", &ct, "{}").await;
    assert_eq!(s, 401);
    check(&doc, "/v1/server/chats", "post", s, &b);
    for _ in 0..100 {
        let (_, b) = http_request(server.addr, "GET", &format!("/v1/chats/{chat}"), &[], "").await;
        if serde_json::from_str::<Value>(&b).unwrap()["state"] == "idle" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let posts = format!("/v1/server/chats/{chat}/posts");
    for body in [
        json!({"user": "dev", "text": "ready", "widget": {"component_type": "card", "payload": {}}}),
        json!({"user": "dev", "text": ""}),
        json!({"user": "eve", "text": "x"}),
    ] {
        let (s, b) = with(&publish, "POST", posts.clone(), Some(body)).await;
        check(
            &doc,
            "/v1/server/chats/{id}/posts",
            "post",
            s,
            &b.to_string(),
        );
    }
    // A backend's file, and a post that shows it.
    let auth = format!("Bearer {publish}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "text/plain"),
    ];
    for user in ["dev", "eve"] {
        let path = format!("/v1/server/chats/{chat}/files?user={user}&name=n.txt");
        let (s, b) = http_request(server.addr, "POST", &path, &headers, "notes").await;
        check(&doc, "/v1/server/chats/{id}/files", "post", s, &b);
        assert_eq!(s, if user == "dev" { 201 } else { 404 }, "{b}");
        if s == 201 {
            let file = serde_json::from_str::<Value>(&b).unwrap()["id"].clone();
            let body = json!({"user": "dev", "attachments": [{"file_id": file}]});
            let (s, b) = with(&publish, "POST", posts.clone(), Some(body)).await;
            assert_eq!(s, 201, "{b}");
            check(
                &doc,
                "/v1/server/chats/{id}/posts",
                "post",
                s,
                &b.to_string(),
            );
        }
    }
    for key in [&read, &publish] {
        let (s, b) = with(key, "GET", "/v1/server/users/dev/chats".into(), None).await;
        check(
            &doc,
            "/v1/server/users/{user}/chats",
            "get",
            s,
            &b.to_string(),
        );
    }

    // The operator's API: an `admin` key; a `read` key refused.
    let admin = crate::server_api::keys(&server, &["create", "--name", "a", "--scopes", "admin"])
        .await
        .unwrap();
    for key in [&admin, &read] {
        let (s, b) = with(key, "GET", "/v1/admin/overview".into(), None).await;
        check(&doc, "/v1/admin/overview", "get", s, &b.to_string());
    }
    for target in [chat.clone(), missing.to_string()] {
        let (s, b) = with(&admin, "GET", format!("/v1/admin/chats/{target}/log"), None).await;
        check(
            &doc,
            "/v1/admin/chats/{chat_id}/log",
            "get",
            s,
            &b.to_string(),
        );
        let (s, b) = with(
            &admin,
            "POST",
            format!("/v1/admin/chats/{target}/waits/w1/end"),
            None,
        )
        .await;
        check(
            &doc,
            "/v1/admin/chats/{chat_id}/waits/{wait_id}/end",
            "post",
            s,
            &b.to_string(),
        );
        let (s, b) = with(
            &admin,
            "POST",
            format!("/v1/admin/chats/{target}/cancel"),
            None,
        )
        .await;
        check(
            &doc,
            "/v1/admin/chats/{chat_id}/cancel",
            "post",
            s,
            &b.to_string(),
        );
    }

    // Usage: the caller's own; a bad date.
    for path in ["/v1/usage", "/v1/usage?from=soon"] {
        let (s, b) = req("GET", path.into(), String::new()).await;
        check(&doc, "/v1/usage", "get", s, &b);
    }

    // Reading a chat, and schedules (the caller's own, in auth mode none).
    let (s, b) = req("POST", format!("/v1/chats/{chat}/read"), String::new()).await;
    check(&doc, "/v1/chats/{id}/read", "post", s, &b);
    let (s, b) = req(
        "POST",
        format!("/v1/chats/{missing}/read"),
        json!({"seq": 1}).to_string(),
    )
    .await;
    check(&doc, "/v1/chats/{id}/read", "post", s, &b);
    let (s, b) = req(
        "POST",
        "/v1/schedules".into(),
        json!({"agent": "demo", "cron": "0 8 * * *"}).to_string(),
    )
    .await;
    check(&doc, "/v1/schedules", "post", s, &b);
    let schedule = serde_json::from_str::<Value>(&b).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = req(
        "POST",
        "/v1/schedules".into(),
        json!({"agent": "demo", "cron": "nope"}).to_string(),
    )
    .await;
    check(&doc, "/v1/schedules", "post", s, &b);
    let (s, b) = req("GET", "/v1/schedules".into(), String::new()).await;
    check(&doc, "/v1/schedules", "get", s, &b);
    for (method, path) in [
        ("GET", format!("/v1/schedules/{schedule}")),
        ("POST", format!("/v1/schedules/{schedule}/pause")),
        ("POST", format!("/v1/schedules/{schedule}/resume")),
        ("GET", format!("/v1/schedules/{missing}")),
        ("POST", format!("/v1/schedules/{missing}/pause")),
    ] {
        let (s, b) = req(method, path.clone(), String::new()).await;
        let template = path
            .replace(&schedule, "{id}")
            .replace(&missing.to_string(), "{id}");
        check(&doc, &template, &method.to_lowercase(), s, &b);
    }
    let (s, b) = req("DELETE", format!("/v1/schedules/{schedule}"), String::new()).await;
    check(&doc, "/v1/schedules/{id}", "delete", s, &b);
    let (s, b) = req("DELETE", format!("/v1/schedules/{schedule}"), String::new()).await;
    check(&doc, "/v1/schedules/{id}", "delete", s, &b);

    // Every operation of the document was exercised here, but for the streams
    // (tests/it/sse.rs) and the passthrough (tests/it/passthrough.rs).
    let mut documented: Vec<String> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| format!("{m} {path}"))
        })
        .collect();
    documented.sort();
    let expected = [
        "delete /v1/chats/{id}",
        "delete /v1/connections/{id}",
        "delete /v1/schedules/{id}",
        "get /chat/{thread_id}/model",
        "get /healthz",
        "get /metrics",
        "get /v1/admin/chats/{chat_id}/log",
        "get /v1/admin/overview",
        "get /v1/ag-ui/{id}/messages",
        "get /v1/ag-ui/{thread}/stream",
        "get /v1/agents",
        "get /v1/ai-sdk/chat/{id}/messages",
        "get /v1/ai-sdk/chat/{id}/stream",
        "get /v1/chats",
        "get /v1/chats/{id}",
        "get /v1/chats/{id}/branches",
        "get /v1/chats/{id}/events",
        "get /v1/chats/{id}/export",
        "get /v1/chats/{id}/model",
        "get /v1/chats/{id}/path",
        "get /v1/chats/{id}/state",
        "get /v1/connections",
        "get /v1/connections/{id}",
        "get /v1/feed",
        "get /v1/files/{id}",
        "get /v1/models",
        "get /v1/schedules",
        "get /v1/schedules/{id}",
        "get /v1/server/users/{user}/chats",
        "get /v1/system-prompts/{agent}/enhanced",
        "get /v1/usage",
        "get /v1/workflows",
        "get /v1/workflows/categories",
        "get /v1/workflows/{id}",
        "patch /v1/chats/{id}",
        "post /api/chat/send",
        "post /chat",
        "post /chat/{thread_id}/message",
        "post /chat/{thread_id}/model",
        "post /v1/admin/chats/{chat_id}/cancel",
        "post /v1/admin/chats/{chat_id}/waits/{wait_id}/end",
        "post /v1/ag-ui",
        "post /v1/agent/chat",
        "post /v1/ai-sdk/chat",
        "post /v1/chat/completions",
        "post /v1/chats",
        "post /v1/chats/{id}/approvals",
        "post /v1/chats/{id}/approvals/{tool_call_id}",
        "post /v1/chats/{id}/cancel",
        "post /v1/chats/{id}/components/{corr}",
        "post /v1/chats/{id}/connection",
        "post /v1/chats/{id}/files",
        "post /v1/chats/{id}/fork",
        "post /v1/chats/{id}/inputs/{request_id}",
        "post /v1/chats/{id}/messages",
        "post /v1/chats/{id}/messages/{seq}/edit",
        "post /v1/chats/{id}/model",
        "post /v1/chats/{id}/read",
        "post /v1/chats/{id}/regenerate",
        "post /v1/chats/{id}/switch",
        "post /v1/chats/{id}/workflows/{workflow_id}",
        "post /v1/connections",
        "post /v1/schedules",
        "post /v1/schedules/{id}/pause",
        "post /v1/schedules/{id}/resume",
        "post /v1/server/chats",
        "post /v1/server/chats/{id}/files",
        "post /v1/server/chats/{id}/posts",
        "put /v1/connections/{id}",
    ];
    assert_eq!(documented, expected);
}
