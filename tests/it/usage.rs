//! Usage and cost (issue 39): `GET /v1/usage` adds up the runs' summaries
//! per user, agent, model and day — a user sees their own, a `read` key anyone's —
//! and `/metrics` counts tokens and cost per agent.

use serde_json::Value;
use uuid::Uuid;

use crate::auth::{SECRET, token};
use crate::server_api::{call, keys};
use crate::support::*;

/// The demo agent at a price (per million tokens).
pub(crate) fn priced() -> String {
    include_str!("../../src/agent/demo.yaml")
        .replacen("id: demo", "id: priced", 1)
        .replacen(
            "  provider: scripted\n",
            "  provider: scripted\n  price: {prompt_per_million: 2.0, completion_per_million: 10.0}\n",
            1,
        )
}

/// A run of `agent` for `user`: its `chat.usage_summary`.
async fn run(server: &Server, user: &str, agent: &str, text: &str) -> Value {
    let mut c = crate::server_api::connect_as(server, user).await;
    let chat = Uuid::new_v4();
    c.start_with(chat, agent, text).await;
    let seen = c.until_complete(chat).await;
    seen.iter()
        .find(|m| m["type"] == "chat.usage_summary")
        .cloned()
        .unwrap_or_else(|| panic!("{seen:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_adds_up_per_user_agent_and_day() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            auth: Some(agentwire::config::AuthMode::Jwt),
            jwt_secret: Some(SECRET.into()),
            ..Default::default()
        },
        agents: vec![("priced.yaml".into(), priced())],
    })
    .await;
    let a = run(&server, "alice", "priced", "hello there").await;
    let b = run(&server, "alice", "priced", "and again, a little longer").await;
    let c = run(&server, "bob", "demo", "hi").await;
    let n = |v: &Value, f: &str| v[f].as_u64().unwrap();
    assert!(
        n(&a, "prompt_tokens") > 0 && a["cost"].as_f64().unwrap() > 0.0,
        "{a}"
    );
    assert!(c["cost"].is_null(), "the demo has no price: {c}");

    let alice = token("alice", 600, SECRET);
    let (status, mine) = call(&server, "GET", "/v1/usage", &alice, None).await;
    assert_eq!(status, 200, "{mine}");
    let today = chrono::Utc::now().date_naive();
    assert_eq!(mine["to"], today.to_string());
    assert_eq!(mine["from"], (today - chrono::Days::new(29)).to_string());
    let rows = mine["days"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{mine}");
    let row = &rows[0];
    assert_eq!(
        (row["user"].as_str(), row["agent"].as_str(), n(row, "runs")),
        (Some("alice"), Some("priced"), 2)
    );
    assert_eq!(
        row["model"], "scripted",
        "the agent's model, named by its provider"
    );
    assert_eq!(a["model"], "scripted");
    for f in ["prompt_tokens", "completion_tokens"] {
        assert_eq!(n(row, f), n(&a, f) + n(&b, f), "{f}: {mine}");
    }
    assert_eq!(
        n(row, "total_tokens"),
        n(&a, "total_tokens") + n(&b, "total_tokens")
    );
    let cost = a["cost"].as_f64().unwrap() + b["cost"].as_f64().unwrap();
    assert!(
        (row["cost"].as_f64().unwrap() - cost).abs() < 1e-9,
        "{mine}"
    );
    assert_eq!(mine["total"]["runs"], 2);
    assert_eq!(mine["truncated"], false);

    // A user names only themselves; dates are checked.
    let refused = [
        ("/v1/usage?user=bob", 403),
        ("/v1/usage?from=yesterday", 400),
        ("/v1/usage?from=2026-11-02&to=2026-11-01", 400),
        ("/v1/usage?from=2024-01-01&to=2026-11-01", 400),
    ];
    for (path, want) in refused {
        let (status, e) = call(&server, "GET", path, &alice, None).await;
        assert_eq!(status, want, "{path}: {e}");
        assert!(e["error"]["code"].is_string(), "{e}");
    }
    let bob = token("bob", 600, SECRET);
    let (_, theirs) = call(&server, "GET", "/v1/usage", &bob, None).await;
    let row = &theirs["days"][0];
    assert_eq!(
        (n(row, "runs"), n(row, "unpriced_runs")),
        (1, 1),
        "{theirs}"
    );
    assert_eq!(row["cost"], 0.0);

    // An operator's token (`"admin": true`) sees everyone's.
    let now = chrono::Utc::now().timestamp();
    let operator = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &serde_json::json!({"sub": "ops", "admin": true, "exp": now + 600, "iat": now}),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    let (_, all) = call(&server, "GET", "/v1/usage", &operator, None).await;
    assert_eq!(all["total"]["runs"], 3, "{all}");
    // Only the JSON `true`: a string "true" is no operator.
    let pretender = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &serde_json::json!({"sub": "bob", "admin": "true", "exp": now + 600, "iat": now}),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    let (_, own) = call(&server, "GET", "/v1/usage", &pretender, None).await;
    assert_eq!(own["total"]["runs"], 1, "{own}");
    let (_, one) = call(&server, "GET", "/v1/usage?user=bob", &operator, None).await;
    assert_eq!(one["total"]["runs"], 1, "{one}");

    // A key with `read` sees everyone's, or one user's; `publish` alone may not.
    let read = keys(
        &server,
        &["create", "--name", "finance", "--scopes", "read"],
    )
    .await
    .unwrap();
    let (_, everyone) = call(&server, "GET", "/v1/usage", &read, None).await;
    let users: Vec<&str> = everyone["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["user"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["alice", "bob"], "{everyone}");
    assert_eq!(everyone["total"]["runs"], 3);
    let (_, one) = call(&server, "GET", "/v1/usage?user=bob", &read, None).await;
    assert_eq!(one["total"]["runs"], 1);
    let publish = keys(&server, &["create", "--name", "p", "--scopes", "publish"])
        .await
        .unwrap();
    assert_eq!(
        call(&server, "GET", "/v1/usage", &publish, None).await.0,
        403
    );
    let (status, _) = http_get(server.addr, "/v1/usage", &[]).await;
    assert_eq!(status, 401);

    // A fork copies no summary: what was spent is counted once.
    let (_, list) = call(&server, "GET", "/v1/chats", &alice, None).await;
    let source = list["chats"][0]["id"].as_str().unwrap().to_owned();
    let (status, forked) = call(
        &server,
        "POST",
        &format!("/v1/chats/{source}/fork"),
        &alice,
        Some(serde_json::json!({})),
    )
    .await;
    assert_eq!(status, 201, "{forked}");
    let (_, after) = call(&server, "GET", "/v1/usage", &alice, None).await;
    assert_eq!(after["total"], mine["total"], "{after}");

    // /metrics: tokens and cost per agent (other tests' servers count in the
    // same process: at least these runs').
    let (_, metrics) = http_get(server.addr, "/metrics", &[]).await;
    let value = |prefix: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{prefix}: {metrics}"))
    };
    let prompt = value(r#"agentwire_tokens_total{agent="priced",model="scripted",kind="prompt"}"#);
    assert!(prompt >= (n(&a, "prompt_tokens") + n(&b, "prompt_tokens")) as f64);
    let nanos = value(r#"agentwire_cost_nanos_total{agent="priced"}"#);
    assert!(nanos >= (cost * 1e9).floor(), "{nanos} < {cost}");
}
