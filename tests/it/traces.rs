//! Traces (issue 39), from the real binary to real OTLP receivers built on
//! the official protobuf definitions (`opentelemetry-proto`): over
//! HTTP/protobuf (the standard `OTEL_*` variables) and gRPC
//! (`[telemetry]`). A run continues the `traceparent` its connection came
//! with; its model calls, its tool call with the approval's wait, and its
//! MCP call hang under it with the GenAI conventions' names and attributes;
//! the HTTP tool and the MCP server (header and `_meta`) get the calling
//! span's context; contents are recorded only when asked, and a secret
//! answer never.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use uuid::Uuid;

use crate::continued::with_agent;
use crate::mock_llm::{MockServer, Reply};
use crate::providers::agent_yaml;
use crate::support::*;
use crate::vendors::{OpenAiWire, Wire as _};

const W: OpenAiWire = OpenAiWire;
/// The client's own span, the run's parent.
const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT_ID: &str = "b7ad6b7169203331";

/// What a receiver was sent: each span with its resource's `service.name`.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

impl Received {
    fn take(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.0.lock().unwrap();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .and_then(|a| text(a.value.as_ref()?.value.as_ref()?))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                spans.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
    }

    /// The spans, once `done` holds of them (within 30 s).
    async fn until(&self, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        for _ in 0..300 {
            let spans: Vec<Span> = self.0.lock().unwrap().iter().map(|s| s.1.clone()).collect();
            if done(&spans) {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let names: Vec<String> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.1.name.clone())
            .collect();
        panic!("the spans never arrived; got {names:?}");
    }

    fn services(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().map(|s| s.0.clone()).collect()
    }
}

fn text(value: &Any) -> Option<String> {
    match value {
        Any::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

/// An attribute of `span`, as JSON (arrays as arrays).
fn attr(span: &Span, key: &str) -> Value {
    fn json(value: &Any) -> Value {
        match value {
            Any::StringValue(s) => json!(s),
            Any::BoolValue(b) => json!(b),
            Any::IntValue(i) => json!(i),
            Any::DoubleValue(d) => json!(d),
            Any::ArrayValue(a) => a
                .values
                .iter()
                .filter_map(|v| v.value.as_ref().map(json))
                .collect(),
            other => json!(format!("{other:?}")),
        }
    }
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.as_ref())
        .map_or(Value::Null, json)
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    let mut found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    found.sort_by_key(|s| s.start_time_unix_nano);
    found
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one `{name}` span: {found:#?}");
    found[0]
}

/// The receiver of OTLP over HTTP/protobuf (`POST /v1/traces`).
async fn http_receiver() -> (Received, SocketAddr) {
    use axum::body::Bytes;
    use axum::extract::State;
    let received = Received::default();
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            axum::routing::post(|State(r): State<Received>, body: Bytes| async move {
                r.take(ExportTraceServiceRequest::decode(body).expect("an OTLP export"));
                (
                    [("content-type", "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (received, addr)
}

/// The receiver of OTLP over gRPC (the collector's `TraceService`).
struct Collector(Received);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.take(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

async fn grpc_receiver() -> (Received, SocketAddr) {
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = TraceServiceServer::new(Collector(received.clone()));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (received, addr)
}

/// A socket to `addr` opened with the client's `traceparent`.
async fn traced_client(addr: SocketAddr) -> Client {
    let mut request = format!("ws://{addr}/v1/ws").into_client_request().unwrap();
    request.headers_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-{PARENT_ID}-01").parse().unwrap(),
    );
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    Client::from_stream(ws)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The parent span id of a `traceparent` header, with its trace id checked.
fn parent_of(traceparent: &str) -> String {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[1], TRACE_ID, "{traceparent}");
    parts[2].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(mcp_peer), ignore = "needs examples/mcp/.venv (see build.rs)")]
async fn a_run_is_one_trace_of_its_model_calls_its_tools_its_approval_and_its_mcp_call() {
    let (received, collector) = http_receiver().await;
    let llm = MockServer::start(vec![
        W.tools(
            None,
            &[("call_1", "get_weather", r#"{"city":"Paris"}"#)],
            (10, 5),
        ),
        W.tools(None, &[("call_2", "box_trace_context", "{}")], (20, 6)),
        W.text(&["Done."], (30, 7)),
    ])
    .await;
    let tool = MockServer::start(vec![Reply::json(200, r#"{"temp":21}"#)]).await;
    let (_toolbox, mcp) = crate::mcp::http_toolbox_with(free_addr(), &[]).await;
    let yaml = agent_yaml(
        &W,
        &llm,
        &tool,
        &format!("mcp_servers:\n  - name: box\n    http: {{url: \"http://{mcp}/mcp\"}}\n"),
    )
    .replace(
        "    http: {method",
        "    requires_approval: true\n    http: {method",
    );
    let dir = with_agent("real.yaml", &yaml);
    let url = database_url(dir.path()).await;
    let (_server, addr) = spawn_agentwire_with(&url, &dir.path().join("agents"), &[], |command| {
        command
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}"))
            .env("OTEL_SERVICE_NAME", "agentwire-under-test")
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env("AGENTWIRE_TEST_KEY", "test-key");
    })
    .await;

    let mut c = traced_client(addr).await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", "Weather, then the trace?").await;
    let gate = c.recv_until(|m| m["type"] == "chat.tool_call").await;
    let gate = gate.last().unwrap();
    assert_eq!(gate["component_type"], "approval");
    c.send(
        json!({"type": "inline_component.result", "chat_id": chat, "corr": gate["corr"],
        "data": {"approved": true}}),
    )
    .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(last_text(&msgs), "Done.");

    let spans = received
        .until(|s| s.iter().any(|s| s.name == "invoke_agent real"))
        .await;
    assert!(
        received
            .services()
            .iter()
            .all(|s| s == "agentwire-under-test")
    );
    let trace = hex(&one(&spans, "invoke_agent real").trace_id);
    assert_eq!(trace, TRACE_ID, "the run continues the client's trace");
    let run = one(&spans, "invoke_agent real");
    assert_eq!(hex(&run.parent_span_id), PARENT_ID);
    assert_eq!(run.kind, SpanKind::Internal as i32);
    assert_eq!(attr(run, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(run, "gen_ai.agent.name"), "real");
    assert_eq!(attr(run, "gen_ai.conversation.id"), chat.to_string());
    assert!(attr(run, "user.id").as_str().is_some_and(|u| !u.is_empty()));
    assert_eq!(attr(run, "agentwire.run.end_reason"), "completed");
    assert_eq!(attr(run, "gen_ai.usage.input_tokens"), 60);
    assert_eq!(attr(run, "gen_ai.usage.output_tokens"), 18);
    for span in spans.iter().filter(|s| s.name != "store commit") {
        assert_eq!(hex(&span.trace_id), TRACE_ID, "{}: one trace", span.name);
    }

    // Three model calls, the run's children, as the conventions name them.
    let calls = named(&spans, "chat test-model");
    assert_eq!(calls.len(), 3, "{calls:#?}");
    for (call, (input, output, finish)) in
        calls
            .iter()
            .zip([(10, 5, "tool_call"), (20, 6, "tool_call"), (30, 7, "stop")])
    {
        assert_eq!(call.parent_span_id, run.span_id);
        assert_eq!(call.kind, SpanKind::Client as i32);
        assert_eq!(attr(call, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(call, "gen_ai.provider.name"), "openai");
        assert_eq!(attr(call, "gen_ai.request.model"), "test-model");
        assert_eq!(attr(call, "gen_ai.response.model"), "test-model");
        assert_eq!(attr(call, "gen_ai.usage.input_tokens"), input);
        assert_eq!(attr(call, "gen_ai.usage.output_tokens"), output);
        assert_eq!(
            attr(call, "gen_ai.response.finish_reasons"),
            json!([finish])
        );
        assert!(
            attr(call, "gen_ai.response.time_to_first_chunk")
                .as_f64()
                .is_some_and(|t| t >= 0.0)
        );
        assert_eq!(
            attr(call, "gen_ai.output.messages"),
            Value::Null,
            "content is off"
        );
    }

    // The HTTP tool: its span, the approval's wait under it, and the
    // tool's server got the tool span's context.
    let weather = one(&spans, "execute_tool get_weather");
    assert_eq!(weather.parent_span_id, run.span_id);
    assert_eq!(attr(weather, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(weather, "gen_ai.tool.name"), "get_weather");
    assert_eq!(attr(weather, "gen_ai.tool.call.id"), "call_1");
    assert_eq!(attr(weather, "agentwire.tool.outcome"), "ok");
    assert_eq!(
        attr(weather, "gen_ai.tool.call.arguments"),
        Value::Null,
        "content is off"
    );
    let approval = one(&spans, "await_approval get_weather");
    assert_eq!(approval.parent_span_id, weather.span_id);
    assert_eq!(attr(approval, "agentwire.wait.kind"), "approval");
    assert_eq!(attr(approval, "agentwire.approval.granted"), true);
    assert!(
        approval.end_time_unix_nano > approval.start_time_unix_nano,
        "the wait is timed"
    );
    let sent = tool.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        parent_of(sent[0].headers["traceparent"].to_str().unwrap()),
        hex(&weather.span_id)
    );

    // The MCP tool: its call's span, and the server got that span's
    // context as the header and in `_meta`.
    let mcp_tool = one(&spans, "execute_tool box_trace_context");
    assert_eq!(mcp_tool.parent_span_id, run.span_id);
    let mcp_call = one(&spans, "tools/call trace_context");
    assert_eq!(mcp_call.parent_span_id, mcp_tool.span_id);
    assert_eq!(mcp_call.kind, SpanKind::Client as i32);
    assert_eq!(attr(mcp_call, "mcp.method.name"), "tools/call");
    assert_eq!(attr(mcp_call, "agentwire.mcp.server"), "box");
    let response = msgs
        .iter()
        .find(|m| m["type"] == "chat.tool_response" && m["tool_name"] == "box_trace_context")
        .expect("the MCP call's response");
    let seen: Value = serde_json::from_str(
        response["content"]["content"][0]["text"]
            .as_str()
            .or(response["content"].as_str())
            .unwrap_or_else(|| panic!("{response}")),
    )
    .unwrap();
    for how in ["header", "meta"] {
        let traceparent = seen[how]
            .as_str()
            .unwrap_or_else(|| panic!("{how}: {seen}"));
        assert_eq!(parent_of(traceparent), hex(&mcp_call.span_id), "{how}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_grpc_with_contents_commits_are_sampled_and_a_secret_answer_stays_out() {
    let (received, collector) = grpc_receiver().await;
    let llm = MockServer::start(vec![
        W.tools(
            None,
            &[("call_1", "ask_pin", r#"{"prompt":"Your PIN?"}"#)],
            (4, 2),
        ),
        W.text(&["Thanks."], (8, 3)),
        W.text(&["Over HTTP."], (1, 1)),
    ])
    .await;
    let tool = MockServer::start(vec![]).await;
    let yaml = agent_yaml(
        &W,
        &llm,
        &tool,
        "  - name: ask_pin\n    description: Ask for a PIN\n    \
         input_schema: {type: object, properties: {prompt: {type: string}}, required: [prompt]}\n    \
         input_request: {prompt_field: prompt, password: true}\n",
    );
    let dir = with_agent("real.yaml", &yaml);
    let config = dir.path().join("agentwire.toml");
    std::fs::write(
        &config,
        format!(
            "[telemetry]\nenabled = true\nprotocol = \"grpc\"\nendpoint = \"http://{collector}\"\n\
             service_name = \"from-the-file\"\ncapture_content = true\ncommit_sample_ratio = 1.0\n"
        ),
    )
    .unwrap();
    let url = database_url(dir.path()).await;
    let config = config.display().to_string();
    let (_server, addr) = spawn_agentwire_with(
        &url,
        &dir.path().join("agents"),
        &["--config", &config],
        |command| {
            command
                .env("OTEL_BSP_SCHEDULE_DELAY", "100")
                .env("AGENTWIRE_TEST_KEY", "test-key");
        },
    )
    .await;

    let mut c = traced_client(addr).await;
    let chat = Uuid::new_v4();
    c.start_with(chat, "real", "Check me in").await;
    let asked = c.recv_until(|m| m["type"] == "chat.input_request").await;
    let asked = asked.last().unwrap();
    c.send(json!({"type": "user.input.submit", "chat_id": chat,
        "request_id": asked["request_id"], "text": "4921"}))
        .await;
    let msgs = c.until_complete(chat).await;
    assert_eq!(last_text(&msgs), "Thanks.");
    // A run an HTTP request starts continues that request's trace.
    let other_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let streamed = agentwire::llm::http_client()
        .post(format!("http://{addr}/v1/agent/chat"))
        .header("traceparent", format!("00-{other_trace}-00f067aa0ba902b7-01"))
        .json(&json!({"message": "Again", "agent": "real", "context_type": "general", "conversation_id": Uuid::new_v4()}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(streamed.contains("Over HTTP."), "{streamed}");

    let spans = received
        .until(|s| {
            named(s, "invoke_agent real").len() == 2 && s.iter().any(|s| s.name == "store commit")
        })
        .await;
    let over_http = named(&spans, "invoke_agent real")[1];
    assert_eq!(hex(&over_http.trace_id), other_trace);
    assert_eq!(hex(&over_http.parent_span_id), "00f067aa0ba902b7");
    assert!(received.services().iter().all(|s| s == "from-the-file"));
    let wait = one(&spans, "await_input ask_pin");
    assert_eq!(attr(wait, "agentwire.input.secret"), true);
    assert_eq!(attr(wait, "agentwire.wait.outcome"), "answered");
    assert_eq!(attr(wait, "agentwire.wait.answer"), Value::Null);
    let tool_span = one(&spans, "execute_tool ask_pin");
    assert_eq!(wait.parent_span_id, tool_span.span_id);
    assert_eq!(
        attr(tool_span, "gen_ai.tool.call.arguments"),
        r#"{"prompt":"Your PIN?"}"#
    );
    // The answer is the tool's result: kept out of every span.
    for span in &spans {
        for a in &span.attributes {
            let shown = format!("{:?}", a.value);
            assert!(
                !shown.contains("4921"),
                "{}: {} holds the secret",
                span.name,
                a.key
            );
        }
    }
    let last = named(&spans, "chat test-model")[1].clone();
    let output = attr(&last, "gen_ai.output.messages");
    let output: Value = serde_json::from_str(output.as_str().unwrap()).unwrap();
    assert_eq!(output[0]["parts"][0]["content"], "Thanks.");
    // Commits are traces of their own.
    let commit = &named(&spans, "store commit")[0];
    assert!(commit.parent_span_id.is_empty());
    assert_eq!(attr(commit, "db.operation.name"), "commit");
    assert!(attr(commit, "agentwire.store.envelopes").as_i64().unwrap() >= 1);
}
