//! The framer's promise, as a property over every wire: a stream cut after
//! any of its events and rejoined with that event's id goes on exactly as
//! the uninterrupted stream did.

use serde_json::{Value, json};

use super::*;
use crate::wire::{AgUi, AiSdk, Dialect, EventId};

/// A run with a user's words, reasoning, streamed text, a backend call, an
/// approval (answered), a UI tool (answered), an input request (answered),
/// a closing answer, usage and its end.
fn run() -> Vec<Envelope> {
    let kinds = [
        json!({"type": "chat.text", "agent": "user", "content": "hi"}),
        json!({"type": "chat.select_speaker", "agent": "a"}),
        json!({"type": "chat.reasoning", "agent": "a", "content": "think"}),
        json!({"type": "chat.reasoning", "agent": "a", "content": " more"}),
        json!({"type": "chat.print", "agent": "a", "content": "Hello"}),
        json!({"type": "chat.print", "agent": "a", "content": " there"}),
        json!({"type": "chat.text", "agent": "a", "content": "Hello there"}),
        call("b1", None, json!({"q": 1})),
        response("b1", json!({"rows": 2})),
        call(
            "g1.approval",
            Some(crate::tools::APPROVAL),
            json!({"tool_name": "guarded", "input": {"steps": 2}, "tool_call_id": "g1"}),
        ),
        // The approval's answer (another request).
        response("g1.approval", json!({"approved": true})),
        call("g1", None, json!({"steps": 2})),
        response("g1", json!("done")),
        json!({"type": "chat.select_speaker", "agent": "a"}),
        call("u1", Some("picker"), json!({"options": ["x", "y"]})),
        // The UI tool's answer.
        response("u1", json!({"choice": "x"})),
        json!({"type": "chat.select_speaker", "agent": "a"}),
        json!({"type": "chat.input_request", "request_id": "r1", "prompt": "Name?", "corr": "r1",
               "password": false}),
        // The input's answer.
        json!({"type": "chat.input_ack", "request_id": "r1", "corr": "r1"}),
        json!({"type": "chat.select_speaker", "agent": "a"}),
        json!({"type": "chat.print", "agent": "a", "content": "Done"}),
        json!({"type": "chat.text", "agent": "a", "content": "Done"}),
        json!({"type": "chat.usage_summary", "total_tokens": 9, "prompt_tokens": 6,
               "completion_tokens": 3}),
        json!({"type": "chat.run_complete", "reason": "completed"}),
    ];
    log_of(kinds)
}

/// A chat's log of these envelopes, seqs from 1.
fn log_of(kinds: impl IntoIterator<Item = Value>) -> Vec<Envelope> {
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            let kind = serde_json::from_value(kind).expect("a valid envelope");
            let ts = "2026-11-27T00:00:00.000Z".into();
            Envelope::new(kind, uuid::Uuid::nil(), i as u64 + 1, ts)
        })
        .collect()
}

fn call(corr: &str, component: Option<&str>, payload: Value) -> Value {
    json!({"type": "chat.tool_call", "tool_name": "guarded", "component_type": component,
           "awaiting_response": component.is_some(), "payload": payload, "corr": corr,
           "display": "inline"})
}

fn response(corr: &str, content: Value) -> Value {
    json!({"type": "chat.tool_response", "tool_name": "guarded", "content": content,
           "success": true, "corr": corr})
}

/// The waits of [`run`] (the seq each is asked at) and what answers them.
const WAITS: [(u64, &str); 3] = [(10, "g1.approval"), (15, "u1"), (18, "r1")];

/// A stream as the server makes it: its opening, then each envelope as it
/// comes (nothing else queued after it: a response ends as soon as it
/// may), until the framer is done or the log as it stood is read.
fn stream(mut framer: Framer, opening: Vec<Out>, after: u64, log: &[Envelope]) -> Vec<Event> {
    let mut out = Vec::new();
    framer.opening(opening, after, &mut out);
    for env in log {
        if framer.done() {
            break;
        }
        framer.envelope(env, "", &mut out);
        framer.caught_up(&mut out);
    }
    framer.caught_up(&mut out);
    out
}

/// Cut after each event and rejoined (from the run's start, the whole log
/// in the store by then), the stream goes on exactly as it did. A rejoin
/// inside an opening of several events sends that opening's rest (AG-UI's
/// route makes its opening again: `opening`).
fn resumes(name: &str, original: &[Event], encoder: &dyn Fn() -> Box<dyn Encoder>) {
    resumes_in(name, original, encoder, &[], &run());
}

fn resumes_opening(
    name: &str,
    original: &[Event],
    encoder: &dyn Fn() -> Box<dyn Encoder>,
    opening: &[Out],
) {
    resumes_in(name, original, encoder, opening, &run());
}

fn resumes_in(
    name: &str,
    original: &[Event],
    encoder: &dyn Fn() -> Box<dyn Encoder>,
    opening: &[Out],
    log: &[Envelope],
) {
    assert!(!original.is_empty(), "{name}: an empty stream");
    for (i, event) in original.iter().enumerate() {
        let id = event
            .id
            .unwrap_or_else(|| panic!("{name}: event {i} has no id"));
        let shows = if id.whole {
            Shows::Run
        } else {
            Shows::Response
        };
        // What the client sent back is what it got.
        let id = EventId::parse(&id.to_string()).expect("an id reads back");
        let again = match id.at {
            crate::wire::At::Opening(rest) if rest > 0 => opening.to_vec(),
            _ => Vec::new(),
        };
        let rejoin = stream(
            Framer::new(encoder(), shows, 0).holding(id),
            again,
            id.seq,
            log,
        );
        let mut joined = original[..=i].to_vec();
        joined.extend(rejoin);
        assert_eq!(joined, original, "{name}: cut after event {i} ({id})");
    }
    // Every id is its event's own.
    let mut ids: Vec<_> = original.iter().filter_map(|e| e.id).collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "{name}: ids repeat");
}

fn opening(data: String) -> Vec<Out> {
    vec![Out { event: None, data }]
}

#[test]
fn every_dialect_resumes_after_any_of_its_events() {
    let log = run();
    for dialect in [
        Dialect::Chat,
        Dialect::AgentChat,
        Dialect::AgentHost,
        Dialect::Threads,
    ] {
        let make = move || dialect.encoder(Some("c".into()));
        let original = stream(Framer::new(make(), Shows::Response, 0), Vec::new(), 0, &log);
        resumes(&format!("{dialect:?}"), &original, &make);
    }
}

/// The responses of a wire whose response ends where the run waits: the
/// turn's, then one per answer (going on from where the last one stopped,
/// expecting its answer), each with the log as it stood when it ended.
fn responses(make: &dyn Fn() -> Box<dyn Encoder>, open: &dyn Fn() -> String) -> Vec<Vec<Event>> {
    let log = run();
    let mut out = Vec::new();
    let mut after = 0;
    let mut expect = Vec::new();
    for end in WAITS.iter().map(|(seq, _)| *seq).chain([log.len() as u64]) {
        let mut framer = Framer::new(make(), Shows::Response, 0).expecting(expect.clone());
        if after > 0 {
            framer = framer.holding(EventId::after(after));
        }
        let upto = &log[..usize::try_from(end).unwrap()];
        let events = stream(framer, opening(open()), after, upto);
        // Every response opens (RUN_STARTED first, as AG-UI demands).
        assert_eq!(events[0].out.data, open(), "the response after {after}");
        assert_eq!(events[0].id, Some(EventId::opening(after, 0)));
        out.push(events);
        if let Some((seq, answer)) = WAITS.iter().find(|(s, _)| *s == end) {
            after = *seq;
            expect = vec![(*answer).to_owned()];
        }
    }
    out
}

#[test]
fn ai_sdk_responses_and_resumes_resume_after_any_of_their_events() {
    let make = || -> Box<dyn Encoder> { Box::new(AiSdk::new(0)) };
    let start = || AiSdk::start("c:1");
    let all = responses(&make, &start);
    assert_eq!(all.len(), 4);
    for (r, response) in all.iter().enumerate() {
        // Each response but the last ends at its wait.
        let last = response.last().map(|e| e.out.data.as_str());
        assert_eq!(last, Some("[DONE]"), "response {r}");
        resumes(&format!("AI SDK response {r}"), response, &make);
    }
    // The transport's resume: the whole run, from its start.
    let whole = stream(
        Framer::new(make(), Shows::Run, 0),
        opening(start()),
        0,
        &run(),
    );
    resumes("AI SDK resume", &whole, &make);
}

#[test]
fn ag_ui_responses_and_rejoins_resume_after_any_of_their_events() {
    let make = || -> Box<dyn Encoder> { Box::new(AgUi::new("t".into(), "r".into(), 0)) };
    let started = || AgUi::new("t".into(), "r".into(), 0).started();
    let all = responses(&make, &started);
    assert_eq!(all.len(), 4);
    for (r, response) in all.iter().enumerate() {
        let last: Value = serde_json::from_str(&response.last().unwrap().out.data).unwrap();
        assert_eq!(last["type"], "RUN_FINISHED", "response {r}");
        resumes(&format!("AG-UI response {r}"), response, &make);
    }
    // A rejoin from the run's start: RUN_STARTED, the snapshot, the run.
    let mut open = opening(started());
    open.push(Out {
        event: None,
        data: json!({"type": "MESSAGES_SNAPSHOT", "messages": []}).to_string(),
    });
    let whole = stream(Framer::new(make(), Shows::Run, 0), open.clone(), 0, &run());
    resumes_opening("AG-UI rejoin", &whole, &make, &open);
}

#[test]
fn a_join_by_seq_inside_a_turn_names_it_first() {
    let log = run();
    // Inside the first turn (after its first words).
    for dialect in [Dialect::AgentChat, Dialect::AgentHost] {
        let group: Vec<Envelope> = log
            .iter()
            .cloned()
            .map(|mut e| {
                if let EventKind::SelectSpeaker { method, .. } = &mut e.kind {
                    *method = Some("round_robin".into());
                }
                e
            })
            .collect();
        let events = stream(
            Framer::new(dialect.encoder(None), Shows::Response, 0).joining(5),
            Vec::new(),
            0,
            &group,
        );
        let first: Value = serde_json::from_str(&events[0].out.data).unwrap();
        match dialect {
            Dialect::AgentChat => {
                assert_eq!(events[0].out.event, Some("message_start"));
                assert_eq!(first["agent"], "a");
                assert_eq!(first["turn"], 0);
            }
            _ => {
                assert_eq!(events[0].out.event, Some("message_added"));
                assert_eq!(first["name"], "a");
            }
        }
        assert_eq!(events[0].id, Some(EventId::opening(5, 0)));
        // Then the rest of the turn: the words after seq 5.
        assert_eq!(events[1].id, Some(EventId::made(6, 0)));
    }
    // Between runs nothing is named.
    let events = stream(
        Framer::new(Dialect::AgentChat.encoder(None), Shows::Response, 0).joining(0),
        Vec::new(),
        0,
        &log,
    );
    assert_eq!(events[0].id, Some(EventId::made(2, 0)));
}

#[test]
fn a_response_ends_at_its_wait_even_when_the_log_goes_on() {
    // The turn's response, read again once the answers are logged: it
    // ends where the run first waited, as it did.
    let log = run();
    let events = stream(
        Framer::new(Box::new(AiSdk::new(0)), Shows::Response, 0),
        Vec::new(),
        0,
        &log,
    );
    let last = events.last().unwrap();
    assert_eq!(last.out.data, "[DONE]");
    assert_eq!(last.id.map(|id| id.seq), Some(10));
}

#[test]
fn a_response_to_a_cancelled_wait_opens_nothing_the_last_one_closed() {
    // The run waits for an input; the next request cancels it.
    let mut log = run()[..18].to_vec();
    let end = EventKind::RunComplete {
        reason: crate::protocol::RunEndReason::Cancelled,
    };
    let ts = "2026-11-27T00:00:00.000Z".into();
    log.push(Envelope::new(end, uuid::Uuid::nil(), 19, ts));
    let make = || -> Box<dyn Encoder> { Box::new(AgUi::new("t".into(), "r".into(), 0)) };
    let framer = Framer::new(make(), Shows::Response, 0)
        .holding(EventId::after(18))
        .expecting(["r1".to_owned()]);
    let started = AgUi::new("t".into(), "r".into(), 0).started();
    let events = stream(framer, opening(started), 18, &log);
    let types: Vec<Value> = events
        .iter()
        .map(|e| serde_json::from_str::<Value>(&e.out.data).unwrap()["type"].clone())
        .collect();
    // No STEP_FINISHED for a step the previous response finished.
    assert_eq!(types, [json!("RUN_STARTED"), json!("RUN_FINISHED")]);
    let end: Value = serde_json::from_str(&events[1].out.data).unwrap();
    assert_eq!(end["outcome"]["type"], "cancelled");
}

#[test]
fn a_response_answering_two_waits_goes_on_past_both_on_a_rejoin() {
    // Two UI tools wait; one request answers both, and the run logs an
    // error between the two answers.
    let kinds = [
        json!({"type": "chat.text", "agent": "user", "content": "hi"}),
        json!({"type": "chat.select_speaker", "agent": "a"}),
        call("u1", Some("picker"), json!({})),
        call("u2", Some("picker"), json!({})),
        response("u1", json!({"x": 1})),
        json!({"type": "chat.error", "message": "slow", "error_code": "TOOL_EXECUTION_ERROR",
               "recoverable": true}),
        response("u2", json!({"x": 2})),
        json!({"type": "chat.select_speaker", "agent": "a"}),
        json!({"type": "chat.text", "agent": "a", "content": "Both."}),
        json!({"type": "chat.run_complete", "reason": "completed"}),
    ];
    let log: Vec<Envelope> = kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            let kind = serde_json::from_value(kind).expect("a valid envelope");
            let ts = "2026-11-27T00:00:00.000Z".into();
            Envelope::new(kind, uuid::Uuid::nil(), i as u64 + 1, ts)
        })
        .collect();
    for (name, make) in [
        (
            "AI SDK",
            &(|| -> Box<dyn Encoder> { Box::new(AiSdk::new(0)) }) as &dyn Fn() -> Box<dyn Encoder>,
        ),
        ("AG-UI", &|| -> Box<dyn Encoder> {
            Box::new(AgUi::new("t".into(), "r".into(), 0))
        }),
    ] {
        let framer = Framer::new(make(), Shows::Response, 0)
            .holding(EventId::after(4))
            .expecting(["u1".to_owned(), "u2".to_owned()]);
        let answer = stream(framer, opening("{}".into()), 4, &log);
        // It went on to the run's end.
        assert!(answer.len() > 4, "{name}");
        resumes_in(name, &answer, make, &[], &log);
    }
}

/// A chat's second run, a regenerate (its `chat.branch` first: no event
/// of its own on any wire) cut off by a cancel (its words kept as a text,
/// which the server marks `partial`; the wires show it as any text), after
/// a first run that answered.
fn regenerated() -> Vec<Envelope> {
    let kinds = [
        json!({"type": "chat.text", "agent": "user", "content": "hi"}),
        json!({"type": "chat.select_speaker", "agent": "a"}),
        json!({"type": "chat.print", "agent": "a", "content": "Hello"}),
        json!({"type": "chat.text", "agent": "a", "content": "Hello"}),
        json!({"type": "chat.usage_summary", "total_tokens": 2, "prompt_tokens": 1,
               "completion_tokens": 1}),
        json!({"type": "chat.run_complete", "reason": "completed"}),
        json!({"type": "chat.branch", "at": 1, "reason": "regenerate"}),
        json!({"type": "chat.select_speaker", "agent": "a"}),
        json!({"type": "chat.print", "agent": "a", "content": "Hi"}),
        json!({"type": "chat.print", "agent": "a", "content": " th"}),
        json!({"type": "chat.text", "agent": "a", "content": "Hi th"}),
        json!({"type": "chat.usage_summary", "total_tokens": 3, "prompt_tokens": 1,
               "completion_tokens": 2}),
        json!({"type": "chat.run_complete", "reason": "cancelled"}),
    ];
    log_of(kinds)
}

#[test]
fn a_regenerated_run_cut_off_resumes_after_any_of_its_events_on_every_wire() {
    let log = regenerated();
    // The regenerate's response starts after the first run's end.
    let after = 6;
    let rest = &log[after as usize..];
    for dialect in [
        Dialect::Chat,
        Dialect::AgentChat,
        Dialect::AgentHost,
        Dialect::Threads,
    ] {
        let make = move || dialect.encoder(Some("c".into()));
        let original = stream(
            Framer::new(make(), Shows::Response, 0),
            Vec::new(),
            after,
            rest,
        );
        resumes_in(&format!("{dialect:?}"), &original, &make, &[], rest);
    }
    let make = || -> Box<dyn Encoder> { Box::new(AiSdk::new(0)) };
    let open = opening(AiSdk::start("c:7"));
    let response = stream(Framer::new(make(), Shows::Response, 0), open, after, rest);
    let data: Vec<&str> = response.iter().map(|e| e.out.data.as_str()).collect();
    assert!(
        data.iter().any(|d| d.contains(r#""type":"abort""#)),
        "{data:?}"
    );
    assert_eq!(data.last(), Some(&"[DONE]"));
    resumes_in("AI SDK regenerate", &response, &make, &[], rest);
    let make = || -> Box<dyn Encoder> { Box::new(AgUi::new("t".into(), "r".into(), 0)) };
    let open = opening(AgUi::new("t".into(), "r".into(), 0).started());
    let response = stream(Framer::new(make(), Shows::Response, 0), open, after, rest);
    resumes_in("AG-UI regenerate", &response, &make, &[], rest);
}
