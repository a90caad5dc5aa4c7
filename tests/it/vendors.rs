//! Each vendor's documented stream format, written out byte for byte, and
//! what its requests must look like.
//!
//! - OpenAI Chat Completions streaming: `data: <chat.completion.chunk>\n\n`,
//!   tool calls as `delta.tool_calls[]` by index, a usage chunk with empty
//!   `choices` (`stream_options.include_usage`), then `data: [DONE]`.
//! - Anthropic Messages streaming: named events `message_start`,
//!   `content_block_start|delta|stop`, `message_delta`, `message_stop`, `ping`, `error`.
//! - Gemini `streamGenerateContent?alt=sse`: `data: <GenerateContentResponse>`
//!   separated by CRLF CRLF; whole `functionCall` parts; `usageMetadata`.
//! - Ollama `/api/chat`: one JSON object per line, `done: true` last.

use serde_json::{Value, json};

use crate::mock_llm::Reply;

/// A tool call as a test scripts it: id, name, JSON arguments.
pub type Call<'a> = (&'a str, &'a str, &'a str);

pub trait Wire: Send + Sync {
    /// The `provider` of the agent file.
    fn provider(&self) -> &'static str;
    /// The path a chat request goes to.
    fn path(&self) -> &'static str;
    /// A streamed text answer with usage.
    fn text(&self, chunks: &[&str], usage: (u64, u64)) -> Reply;
    /// A turn that streams its reasoning (`thought`, in two pieces) first,
    /// the vendor's way, then `text`.
    fn thinking(&self, thought: &str, text: &str, usage: (u64, u64)) -> Reply;
    /// Optional text, then tool calls.
    fn tools(&self, text: Option<&str>, calls: &[Call], usage: (u64, u64)) -> Reply;
    /// Some text, then the vendor's error event.
    fn error_mid_stream(&self, text: &str, message: &str) -> Reply;
    /// Some text, then the body just ends.
    fn cut(&self, text: &str) -> Reply;
    /// The messages (or contents) of a request body, and the system prompt.
    fn check_request(&self, body: &Value, system: &str, user: &str, tool_names: &[&str]);
    /// The tool calls and results a follow-up request carries, in order.
    fn check_results(&self, body: &Value, calls: &[Call], results: &[&str]);
}

fn sse(data: &Value) -> String {
    format!("data: {data}\n\n")
}

fn named(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

pub struct OpenAiWire;

fn oa_chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-7", "object": "chat.completion.chunk", "created": 1_732_000_000, "model": "test-model",
           "system_fingerprint": "fp_1", "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
}

fn oa_usage(p: u64, c: u64) -> Value {
    json!({"id": "chatcmpl-7", "object": "chat.completion.chunk", "created": 1_732_000_000, "model": "test-model",
           "choices": [], "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}})
}

impl Wire for OpenAiWire {
    fn provider(&self) -> &'static str {
        "openai"
    }
    fn path(&self) -> &'static str {
        "/v1/chat/completions"
    }
    fn text(&self, chunks: &[&str], (p, c): (u64, u64)) -> Reply {
        let mut out = vec![sse(&oa_chunk(
            json!({"role": "assistant", "content": ""}),
            None,
        ))];
        out.extend(
            chunks
                .iter()
                .map(|t| sse(&oa_chunk(json!({"content": t}), None))),
        );
        out.push(sse(&oa_chunk(json!({}), Some("stop"))));
        out.push(sse(&oa_usage(p, c)));
        out.push("data: [DONE]\n\n".into());
        Reply::sse(out)
    }
    /// vLLM's and DeepSeek's `reasoning_content` (Ollama's and OpenRouter's
    /// `reasoning` is read too).
    fn thinking(&self, thought: &str, text: &str, (p, c): (u64, u64)) -> Reply {
        let (a, b) = thought.split_at(thought.len() / 2);
        let out = vec![
            sse(&oa_chunk(json!({"role": "assistant", "content": ""}), None)),
            sse(&oa_chunk(json!({"reasoning_content": a}), None)),
            sse(&oa_chunk(json!({"reasoning": b}), None)),
            sse(&oa_chunk(json!({"content": text}), None)),
            sse(&oa_chunk(json!({}), Some("stop"))),
            sse(&oa_usage(p, c)),
            "data: [DONE]\n\n".into(),
        ];
        Reply::sse(out)
    }
    fn tools(&self, text: Option<&str>, calls: &[Call], (p, c): (u64, u64)) -> Reply {
        let mut out = vec![sse(&oa_chunk(
            json!({"role": "assistant", "content": null}),
            None,
        ))];
        if let Some(t) = text {
            out.push(sse(&oa_chunk(json!({"content": t}), None)));
        }
        for (i, (id, name, args)) in calls.iter().enumerate() {
            out.push(sse(&oa_chunk(
                json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                None,
            )));
            // The arguments arrive in two pieces.
            let (a, b) = args.split_at(args.len() / 2);
            for piece in [a, b] {
                out.push(sse(&oa_chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                    None,
                )));
            }
        }
        out.push(sse(&oa_chunk(json!({}), Some("tool_calls"))));
        out.push(sse(&oa_usage(p, c)));
        out.push("data: [DONE]\n\n".into());
        Reply::sse(out)
    }
    fn error_mid_stream(&self, text: &str, message: &str) -> Reply {
        Reply::sse(vec![
            sse(&oa_chunk(
                json!({"role": "assistant", "content": text}),
                None,
            )),
            sse(
                &json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}}),
            ),
        ])
    }
    fn cut(&self, text: &str) -> Reply {
        Reply::sse(vec![sse(&oa_chunk(
            json!({"role": "assistant", "content": text}),
            None,
        ))])
    }
    fn check_request(&self, body: &Value, system: &str, user: &str, tool_names: &[&str]) {
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0], json!({"role": "system", "content": system}));
        assert_eq!(
            messages.last().unwrap(),
            &json!({"role": "user", "content": user})
        );
        let names: Vec<&str> = body["tools"].as_array().map_or(vec![], |t| {
            t.iter()
                .map(|t| {
                    assert_eq!(t["type"], "function");
                    assert!(t["function"]["parameters"].is_object());
                    t["function"]["name"].as_str().unwrap()
                })
                .collect()
        });
        assert_eq!(names, tool_names);
    }
    fn check_results(&self, body: &Value, calls: &[Call], results: &[&str]) {
        let messages = body["messages"].as_array().unwrap();
        let n = messages.len();
        let assistant = &messages[n - 1 - results.len()];
        assert_eq!(assistant["role"], "assistant");
        for (i, (id, name, args)) in calls.iter().enumerate() {
            let call = &assistant["tool_calls"][i];
            assert_eq!(
                (call["id"].as_str(), call["function"]["name"].as_str()),
                (Some(*id), Some(*name))
            );
            let sent: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(sent, serde_json::from_str::<Value>(args).unwrap());
        }
        for (i, result) in results.iter().enumerate() {
            let m = &messages[n - results.len() + i];
            assert_eq!(m["role"], "tool");
            assert_eq!(m["tool_call_id"], calls[i].0);
            assert!(
                m["content"].as_str().unwrap().contains(result),
                "{m} in {}",
                body["messages"]
            );
        }
    }
}

pub struct AnthropicWire;

fn an_start(input_tokens: u64) -> String {
    named(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "content": [], "model": "test-model", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    )
}

fn an_text_block(index: usize, chunks: &[&str]) -> Vec<String> {
    let mut out = vec![named(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )];
    for t in chunks {
        out.push(named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}}),
        ));
    }
    out.push(named(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    ));
    out
}

fn an_end(stop: &str, output_tokens: u64) -> Vec<String> {
    vec![
        named(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output_tokens}}),
        ),
        named("message_stop", &json!({"type": "message_stop"})),
    ]
}

impl Wire for AnthropicWire {
    fn provider(&self) -> &'static str {
        "anthropic"
    }
    fn path(&self) -> &'static str {
        "/v1/messages"
    }
    fn text(&self, chunks: &[&str], (p, c): (u64, u64)) -> Reply {
        let mut out = vec![an_start(p), named("ping", &json!({"type": "ping"}))];
        out.extend(an_text_block(0, chunks));
        out.extend(an_end("end_turn", c));
        Reply::sse(out)
    }
    fn thinking(&self, thought: &str, text: &str, (p, c): (u64, u64)) -> Reply {
        let mut out = vec![an_start(p)];
        out.push(named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ));
        let (a, b) = thought.split_at(thought.len() / 2);
        for piece in [a, b] {
            out.push(named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": piece}}),
            ));
        }
        out.push(named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}),
        ));
        out.push(named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ));
        out.extend(an_text_block(1, &[text]));
        out.extend(an_end("end_turn", c));
        Reply::sse(out)
    }
    fn tools(&self, text: Option<&str>, calls: &[Call], (p, c): (u64, u64)) -> Reply {
        let mut out = vec![an_start(p)];
        let mut index = 0;
        if let Some(t) = text {
            out.extend(an_text_block(0, &[t]));
            index = 1;
        }
        for (id, name, args) in calls {
            out.push(named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ));
            let (a, b) = args.split_at(args.len() / 2);
            for piece in ["", a, b] {
                out.push(named(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                ));
            }
            out.push(named(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        out.extend(an_end("tool_use", c));
        Reply::sse(out)
    }
    fn error_mid_stream(&self, text: &str, message: &str) -> Reply {
        let mut out = vec![an_start(5)];
        out.push(named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        out.push(named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ));
        out.push(named(
            "error",
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
        ));
        Reply::sse(out)
    }
    fn cut(&self, text: &str) -> Reply {
        let mut out = vec![an_start(5)];
        out.extend(an_text_block(0, &[text]));
        Reply::sse(out)
    }
    fn check_request(&self, body: &Value, system: &str, user: &str, tool_names: &[&str]) {
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["stream"], true);
        assert!(body["max_tokens"].as_u64().unwrap() > 0);
        assert_eq!(body["system"], system);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(
            messages.last().unwrap(),
            &json!({"role": "user", "content": user})
        );
        let names: Vec<&str> = body["tools"].as_array().map_or(vec![], |t| {
            t.iter()
                .map(|t| {
                    assert!(t["input_schema"].is_object());
                    t["name"].as_str().unwrap()
                })
                .collect()
        });
        assert_eq!(names, tool_names);
    }
    fn check_results(&self, body: &Value, calls: &[Call], results: &[&str]) {
        let messages = body["messages"].as_array().unwrap();
        let n = messages.len();
        let assistant = &messages[n - 2];
        assert_eq!(assistant["role"], "assistant");
        let uses: Vec<&Value> = assistant["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .collect();
        for (i, (id, name, args)) in calls.iter().enumerate() {
            assert_eq!(
                (uses[i]["id"].as_str(), uses[i]["name"].as_str()),
                (Some(*id), Some(*name))
            );
            assert_eq!(
                uses[i]["input"],
                serde_json::from_str::<Value>(args).unwrap()
            );
        }
        let last = &messages[n - 1];
        assert_eq!(last["role"], "user");
        for (i, result) in results.iter().enumerate() {
            let block = &last["content"][i];
            assert_eq!(block["type"], "tool_result");
            assert_eq!(block["tool_use_id"], calls[i].0);
            assert!(
                block["content"].as_str().unwrap().contains(result),
                "{block}"
            );
        }
    }
}

pub struct GeminiWire;

fn gm(data: &Value) -> String {
    format!("data: {data}\r\n\r\n")
}

fn gm_parts(parts: Value, finish: Option<&str>, usage: Option<(u64, u64)>) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    let mut v = json!({"candidates": [candidate], "modelVersion": "test-model"});
    if let Some((p, c)) = usage {
        v["usageMetadata"] =
            json!({"promptTokenCount": p, "candidatesTokenCount": c, "totalTokenCount": p + c});
    }
    v
}

impl GeminiWire {
    fn thinking_reply(thought: &str, text: &str, usage: (u64, u64)) -> Reply {
        let (a, b) = thought.split_at(thought.len() / 2);
        Reply::sse(vec![
            gm(&gm_parts(json!([{"text": a, "thought": true}]), None, None)),
            gm(&gm_parts(json!([{"text": b, "thought": true}]), None, None)),
            gm(&gm_parts(
                json!([{"text": text}]),
                Some("STOP"),
                Some(usage),
            )),
        ])
    }
}

impl Wire for GeminiWire {
    fn provider(&self) -> &'static str {
        "gemini"
    }
    fn path(&self) -> &'static str {
        "/v1beta/models/test-model:streamGenerateContent?alt=sse"
    }
    fn thinking(&self, thought: &str, text: &str, usage: (u64, u64)) -> Reply {
        Self::thinking_reply(thought, text, usage)
    }
    fn text(&self, chunks: &[&str], usage: (u64, u64)) -> Reply {
        let last = chunks.len() - 1;
        Reply::sse(
            chunks
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let done = i == last;
                    gm(&gm_parts(
                        json!([{"text": t}]),
                        done.then_some("STOP"),
                        done.then_some(usage),
                    ))
                })
                .collect(),
        )
    }
    fn tools(&self, text: Option<&str>, calls: &[Call], usage: (u64, u64)) -> Reply {
        let mut out = Vec::new();
        if let Some(t) = text {
            out.push(gm(&gm_parts(json!([{"text": t}]), None, None)));
        }
        let parts: Vec<Value> = calls
            .iter()
            .map(|(_, name, args)| json!({"functionCall": {"name": name, "args": serde_json::from_str::<Value>(args).unwrap()}}))
            .collect();
        out.push(gm(&gm_parts(
            Value::Array(parts),
            Some("STOP"),
            Some(usage),
        )));
        Reply::sse(out)
    }
    fn error_mid_stream(&self, text: &str, message: &str) -> Reply {
        Reply::sse(vec![
            gm(&gm_parts(json!([{"text": text}]), None, None)),
            gm(&json!({"error": {"code": 503, "message": message, "status": "UNAVAILABLE"}})),
        ])
    }
    fn cut(&self, text: &str) -> Reply {
        Reply::sse(vec![gm(&gm_parts(json!([{"text": text}]), None, None))])
    }
    fn check_request(&self, body: &Value, system: &str, user: &str, tool_names: &[&str]) {
        assert_eq!(
            body["systemInstruction"],
            json!({"parts": [{"text": system}]})
        );
        let contents = body["contents"].as_array().unwrap();
        assert_eq!(
            contents.last().unwrap(),
            &json!({"role": "user", "parts": [{"text": user}]})
        );
        let names: Vec<&str> = body["tools"][0]["functionDeclarations"]
            .as_array()
            .map_or(vec![], |d| {
                d.iter().map(|d| d["name"].as_str().unwrap()).collect()
            });
        assert_eq!(names, tool_names);
    }
    fn check_results(&self, body: &Value, calls: &[Call], results: &[&str]) {
        let contents = body["contents"].as_array().unwrap();
        let n = contents.len();
        let model = &contents[n - 2];
        assert_eq!(model["role"], "model");
        let fcs: Vec<&Value> = model["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p.get("functionCall"))
            .collect();
        for (i, (_, name, args)) in calls.iter().enumerate() {
            let fc = fcs[i];
            assert_eq!(fc["name"], *name);
            assert_eq!(fc["args"], serde_json::from_str::<Value>(args).unwrap());
        }
        let last = &contents[n - 1];
        assert_eq!(last["role"], "user");
        for (i, result) in results.iter().enumerate() {
            let fr = &last["parts"][i]["functionResponse"];
            assert_eq!(fr["name"], calls[i].1);
            assert!(
                fr["response"]["content"].as_str().unwrap().contains(result),
                "{fr}"
            );
        }
    }
}

pub struct OllamaWire;

fn ol(message: Value, done: bool) -> String {
    format!(
        "{}\n",
        json!({"model": "test-model", "created_at": "2026-11-21T23:00:00.000000Z", "message": message, "done": done})
    )
}

fn ol_done(reason: &str, (p, c): (u64, u64)) -> String {
    format!(
        "{}\n",
        json!({"model": "test-model", "created_at": "2026-11-21T23:00:01.000000Z",
               "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": reason,
               "total_duration": 1_000_000, "load_duration": 1000, "prompt_eval_count": p,
               "prompt_eval_duration": 1000, "eval_count": c, "eval_duration": 1000})
    )
}

impl OllamaWire {
    fn thinking_reply(thought: &str, text: &str, usage: (u64, u64)) -> Reply {
        let (a, b) = thought.split_at(thought.len() / 2);
        let out = vec![
            ol(
                json!({"role": "assistant", "content": "", "thinking": a}),
                false,
            ),
            ol(
                json!({"role": "assistant", "content": "", "thinking": b}),
                false,
            ),
            ol(json!({"role": "assistant", "content": text}), false),
            ol_done("stop", usage),
        ];
        Reply::ok("application/x-ndjson", out)
    }
}

impl Wire for OllamaWire {
    fn provider(&self) -> &'static str {
        "ollama"
    }
    fn path(&self) -> &'static str {
        "/api/chat"
    }
    fn thinking(&self, thought: &str, text: &str, usage: (u64, u64)) -> Reply {
        Self::thinking_reply(thought, text, usage)
    }
    fn text(&self, chunks: &[&str], usage: (u64, u64)) -> Reply {
        let mut out: Vec<String> = chunks
            .iter()
            .map(|t| ol(json!({"role": "assistant", "content": t}), false))
            .collect();
        out.push(ol_done("stop", usage));
        Reply::ok("application/x-ndjson", out)
    }
    fn tools(&self, text: Option<&str>, calls: &[Call], usage: (u64, u64)) -> Reply {
        let mut out = Vec::new();
        if let Some(t) = text {
            out.push(ol(json!({"role": "assistant", "content": t}), false));
        }
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|(_, name, args)| json!({"function": {"name": name, "arguments": serde_json::from_str::<Value>(args).unwrap()}}))
            .collect();
        out.push(ol(
            json!({"role": "assistant", "content": "", "tool_calls": tool_calls}),
            false,
        ));
        out.push(ol_done("stop", usage));
        Reply::ok("application/x-ndjson", out)
    }
    fn error_mid_stream(&self, text: &str, message: &str) -> Reply {
        Reply::ok(
            "application/x-ndjson",
            vec![
                ol(json!({"role": "assistant", "content": text}), false),
                format!("{}\n", json!({"error": message})),
            ],
        )
    }
    fn cut(&self, text: &str) -> Reply {
        Reply::ok(
            "application/x-ndjson",
            vec![ol(json!({"role": "assistant", "content": text}), false)],
        )
    }
    fn check_request(&self, body: &Value, system: &str, user: &str, tool_names: &[&str]) {
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["stream"], true);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0], json!({"role": "system", "content": system}));
        assert_eq!(
            messages.last().unwrap(),
            &json!({"role": "user", "content": user})
        );
        let names: Vec<&str> = body["tools"].as_array().map_or(vec![], |t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap())
                .collect()
        });
        assert_eq!(names, tool_names);
    }
    fn check_results(&self, body: &Value, calls: &[Call], results: &[&str]) {
        let messages = body["messages"].as_array().unwrap();
        let n = messages.len();
        let assistant = &messages[n - 1 - results.len()];
        assert_eq!(assistant["role"], "assistant");
        for (i, (_, name, args)) in calls.iter().enumerate() {
            let f = &assistant["tool_calls"][i]["function"];
            assert_eq!(f["name"], *name);
            assert_eq!(f["arguments"], serde_json::from_str::<Value>(args).unwrap());
        }
        for (i, result) in results.iter().enumerate() {
            let m = &messages[n - results.len() + i];
            assert_eq!(m["role"], "tool");
            assert_eq!(m["tool_name"], calls[i].1);
            assert!(
                m["content"].as_str().unwrap().contains(result),
                "{m} in {}",
                body["messages"]
            );
        }
    }
}
