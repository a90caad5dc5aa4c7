//! What a cut run's log says, and what is done with it.

use serde_json::{Value, json};
use uuid::Uuid;

use super::{Call, Cut, Plan};
use crate::agent::APPROVAL;
use crate::protocol::{Display, Envelope, EventKind, RunEndReason};
use crate::store::StoredEnvelope;

/// A log of these events, seq 1 on, read into a [`Cut`].
fn cut(events: Vec<EventKind>) -> Cut {
    let mut cut = Cut::default();
    for (i, kind) in events.into_iter().enumerate() {
        let env = Envelope::new(
            kind,
            Uuid::nil(),
            i as u64 + 1,
            "2026-11-25T10:00:00.000Z".into(),
        );
        cut.push(&StoredEnvelope {
            seq: env.seq,
            kind: env.kind.type_name().into(),
            json: env.to_json(),
        });
    }
    cut
}

fn user(text: &str) -> EventKind {
    EventKind::Text {
        agent: "user".into(),
        content: text.into(),
    }
}

fn speaker() -> EventKind {
    EventKind::SelectSpeaker {
        agent: "bot".into(),
        method: None,
        reason: None,
    }
}

fn print(text: &str) -> EventKind {
    EventKind::Print {
        agent: "bot".into(),
        content: text.into(),
        corr: None,
    }
}

fn text(text: &str) -> EventKind {
    EventKind::Text {
        agent: "bot".into(),
        content: text.into(),
    }
}

fn call(tool: &str, corr: &str, component_type: Option<&str>) -> EventKind {
    EventKind::ToolCall {
        tool_name: tool.into(),
        component_type: component_type.map(str::to_owned),
        awaiting_response: component_type.is_some(),
        payload: json!({"q": corr}),
        corr: corr.into(),
        display: Display::Inline,
        agent: None,
    }
}

fn response(tool: &str, corr: &str) -> EventKind {
    EventKind::ToolResponse {
        tool_name: tool.into(),
        content: Value::String("ok".into()),
        success: true,
        corr: corr.into(),
        agent: None,
    }
}

fn end() -> EventKind {
    EventKind::RunComplete {
        reason: RunEndReason::Completed,
    }
}

fn never(_: &str) -> bool {
    false
}

#[test]
fn a_turn_cut_mid_stream_is_dropped_and_asked_again() {
    let log = vec![
        user("one"),
        speaker(),
        text("first answer"),
        end(),
        user("slow: 9"),
        speaker(),
        print("w1 "),
        print("w2 "),
    ];
    let Plan::Continue {
        discard,
        unknown,
        again,
        turns,
        started,
        ..
    } = cut(log).plan(never)
    else {
        panic!("continued")
    };
    // The earlier run does not count: the cut run started at seq 5.
    assert_eq!(discard, Some(("bot".into(), 6)));
    assert_eq!((unknown, again), (vec![], vec![]));
    assert_eq!(turns, 0, "the dropped turn is not counted");
    assert!(started.is_some());
}

#[test]
fn a_run_cut_before_its_first_turn_starts_one() {
    let plan = cut(vec![user("hi")]).plan(never);
    assert!(matches!(
        plan,
        Plan::Continue {
            discard: None,
            turns: 0,
            ..
        }
    ));
}

#[test]
fn calls_without_a_result_run_again_only_if_idempotent() {
    let log = vec![
        user("go"),
        speaker(),
        call("lookup", "c1", None),
        call("charge", "c2", None),
        call("done", "c3", None),
        response("done", "c3"),
    ];
    let Plan::Continue {
        discard,
        unknown,
        again,
        turns,
        ..
    } = cut(log).plan(|tool| tool == "lookup")
    else {
        panic!("continued")
    };
    assert_eq!(discard, None, "a turn that made calls is closed");
    assert_eq!(turns, 1);
    let corrs = |calls: &[Call]| calls.iter().map(|c| c.corr.clone()).collect::<Vec<_>>();
    assert_eq!(corrs(&again), ["c1"]);
    assert_eq!(corrs(&unknown), ["c2"]);
    assert_eq!(again[0].payload, json!({"q": "c1"}));
}

#[test]
fn a_turn_that_answered_without_calls_ends_the_run() {
    let log = vec![user("hi"), speaker(), print("Hello"), text("Hello")];
    assert_eq!(
        cut(log).plan(never),
        Plan::Finish {
            reason: RunEndReason::Completed,
            summarized: false
        }
    );
    // After tool results, text with no call is still the answer.
    let log = vec![
        user("go"),
        speaker(),
        call("lookup", "c1", None),
        response("lookup", "c1"),
        speaker(),
        text("Found it"),
    ];
    assert!(matches!(cut(log).plan(never), Plan::Finish { .. }));
}

#[test]
fn a_run_that_logged_its_summary_is_finished_with_its_reason() {
    let summary = EventKind::UsageSummary {
        total_tokens: 3,
        prompt_tokens: 2,
        completion_tokens: 1,
        cost: None,
        by_agent: None,
        model: None,
    };
    let failed = EventKind::Error {
        message: "boom".into(),
        error_code: crate::protocol::ErrorCode::ToolExecutionError,
        details: None,
        recoverable: true,
    };
    let log = vec![user("fail"), speaker(), failed, summary.clone()];
    assert_eq!(
        cut(log).plan(never),
        Plan::Finish {
            reason: RunEndReason::Error,
            summarized: true
        }
    );
    let log = vec![user("hi"), speaker(), text("Hello"), summary];
    assert_eq!(
        cut(log).plan(never),
        Plan::Finish {
            reason: RunEndReason::Completed,
            summarized: true
        }
    );
}

fn asked(id: &str, tool: Option<&str>) -> EventKind {
    EventKind::InputRequest {
        request_id: id.into(),
        prompt: "Name?".into(),
        corr: id.into(),
        password: false,
        timeout_seconds: Some(60),
        options: None,
        tool_name: tool.map(str::to_owned),
    }
}

/// The calls a continued run makes again, as (corr, tool, request waited on).
fn again(plan: Plan) -> Vec<(String, String, Option<String>)> {
    let Plan::Continue { again, .. } = plan else {
        panic!("continued: {plan:?}")
    };
    again
        .into_iter()
        .map(|c| {
            let waits = match c.waits {
                super::Waits::Not => None,
                super::Waits::OnPerson { id, ts } => {
                    assert!(!ts.is_empty());
                    Some(id)
                }
            };
            (c.corr, c.tool_name, waits)
        })
        .collect()
}

#[test]
fn a_call_waiting_for_a_person_waits_again() {
    let own = |s: &str| s.to_owned();
    // An input request (its tool named in it).
    let log = vec![user("ask: Name?"), speaker(), asked("r1", Some("ask_user"))];
    let plan = cut(log).plan(never);
    assert!(
        matches!(
            plan,
            Plan::Continue {
                discard: None,
                turns: 1,
                ..
            }
        ),
        "{plan:?}"
    );
    assert_eq!(again(plan), [(own("r1"), own("ask_user"), Some(own("r1")))]);
    // A UI component.
    let log = vec![user("ui: x"), speaker(), call("show", "u1", Some("x"))];
    assert_eq!(
        again(cut(log).plan(never)),
        [(own("u1"), own("show"), Some(own("u1")))]
    );
    // An approval gate: the call is in its payload, answered by its own corr.
    let gate = EventKind::ToolCall {
        tool_name: "charge".into(),
        component_type: Some(crate::agent::APPROVAL.into()),
        awaiting_response: true,
        payload: json!({"tool_name": "charge", "input": {"q": 1}, "tool_call_id": "c9"}),
        corr: "c9.approval".into(),
        display: Display::Inline,
        agent: None,
    };
    let log = vec![user("go"), speaker(), gate.clone()];
    let plan = cut(log).plan(never);
    let Plan::Continue { again: calls, .. } = &plan else {
        panic!("continued")
    };
    assert_eq!(calls[0].payload, json!({"q": 1}));
    assert_eq!(
        again(plan),
        [(own("c9"), own("charge"), Some(own("c9.approval")))]
    );
    // Approved, the call itself was cut off: a backend call like any other.
    let log = vec![
        user("go"),
        speaker(),
        gate,
        response("charge", "c9.approval"),
        call("charge", "c9", None),
    ];
    let Plan::Continue { again, unknown, .. } = cut(log).plan(never) else {
        panic!("continued")
    };
    assert!(again.is_empty());
    assert_eq!(unknown.len(), 1);
}

#[test]
fn an_answered_request_is_done_and_a_timed_out_one_ends_the_run() {
    let acked = EventKind::InputAck {
        request_id: "r1".into(),
        corr: "r1".into(),
    };
    let log = vec![
        user("ask: Name?"),
        speaker(),
        asked("r1", Some("ask_user")),
        acked,
    ];
    assert!(again(cut(log).plan(never)).is_empty());
    let timed_out = EventKind::InputTimeout {
        request_id: "r1".into(),
        timeout_seconds: 60,
        corr: "r1".into(),
    };
    let log = vec![
        user("ask: Name?"),
        speaker(),
        asked("r1", Some("ask_user")),
        timed_out,
    ];
    assert_eq!(
        cut(log).plan(never),
        Plan::Finish {
            reason: RunEndReason::Timeout,
            summarized: false
        }
    );
}

#[test]
fn a_discarded_turn_is_not_dropped_twice() {
    // A second restart after the first continuation logged its discard and
    // began the turn again.
    let log = vec![
        user("slow: 9"),
        speaker(),
        print("w1 "),
        EventKind::TurnDiscarded {
            agent: "bot".into(),
            from_seq: 2,
            reason: "restart".into(),
        },
        speaker(),
        print("w1 "),
    ];
    let Plan::Continue { discard, turns, .. } = cut(log).plan(never) else {
        panic!("continued")
    };
    assert_eq!(discard, Some(("bot".into(), 5)));
    assert_eq!(turns, 0, "a dropped turn never counts");
}

#[test]
fn an_approval_given_is_remembered() {
    let gate = EventKind::ToolCall {
        tool_name: "show".into(),
        component_type: Some(crate::agent::APPROVAL.into()),
        awaiting_response: true,
        payload: json!({"tool_name": "show", "input": {}, "tool_call_id": "u1"}),
        corr: "u1.approval".into(),
        display: Display::Inline,
        agent: None,
    };
    let approved = EventKind::ToolResponse {
        tool_name: "show".into(),
        content: json!({"approved": true}),
        success: true,
        corr: "u1.approval".into(),
        agent: None,
    };
    let log = vec![
        user("go"),
        speaker(),
        gate,
        approved,
        call("show", "u1", Some("x")),
    ];
    let Plan::Continue {
        approved, again, ..
    } = cut(log).plan(never)
    else {
        panic!("continued")
    };
    assert!(approved.contains("u1"));
    assert_eq!(again.len(), 1, "the component waits again");
}

#[test]
fn a_logged_error_means_the_run_was_ending() {
    let error = |message: &str| EventKind::Error {
        message: message.into(),
        error_code: crate::protocol::ErrorCode::ToolExecutionError,
        details: None,
        recoverable: true,
    };
    let log = vec![user("go"), speaker(), error("the provider failed")];
    assert_eq!(
        cut(log).plan(never),
        Plan::Finish {
            reason: RunEndReason::Error,
            summarized: false
        }
    );
    let message = format!("{} (20 model turns)", crate::agent::MAX_TURNS_ERROR);
    let log = vec![user("go"), speaker(), error(&message)];
    assert_eq!(
        cut(log).plan(never),
        Plan::Finish {
            reason: RunEndReason::MaxTurns,
            summarized: false
        }
    );
}

fn member_turn(agent: &str, method: &str) -> EventKind {
    EventKind::SelectSpeaker {
        agent: agent.into(),
        method: Some(method.into()),
        reason: None,
    }
}

fn said(agent: &str, text: &str) -> EventKind {
    EventKind::Text {
        agent: agent.into(),
        content: text.into(),
    }
}

#[test]
fn a_group_run_goes_on_where_its_members_turns_stood() {
    // `a` answered, `b` was cut mid-stream in its second model turn.
    let log = vec![
        user("go"),
        member_turn("a", "round_robin"),
        said("a", "plan"),
        member_turn("b", "round_robin"),
        call("lookup", "c1", None),
        response("lookup", "c1"),
        member_turn("b", "continue"),
        print("half"),
    ];
    let Plan::Continue {
        group: Some(place),
        discard,
        ..
    } = cut(log).plan(never)
    else {
        panic!("continued")
    };
    assert_eq!(discard.map(|d| d.1), Some(7));
    assert_eq!(
        (
            place.member.as_str(),
            place.rounds,
            place.model_turns,
            place.done
        ),
        ("b", 2, 1, false)
    );

    // `a` answered and the log stops there: its turn is done, not the run.
    let log = vec![user("go"), member_turn("a", "first"), said("a", "plan")];
    let Plan::Continue {
        group: Some(place), ..
    } = cut(log).plan(never)
    else {
        panic!("a member's answer does not end a group run")
    };
    assert!(place.done);
    assert_eq!(place.last_text.as_deref(), Some("plan"));

    // `a` handed the conversation to `c`.
    let handoff = EventKind::ToolCall {
        tool_name: crate::tools::HANDOFF_TOOL.into(),
        component_type: None,
        awaiting_response: false,
        payload: json!({"agent": "c"}),
        corr: "h1".into(),
        display: Display::Inline,
        agent: Some("a".into()),
    };
    let handed = EventKind::ToolResponse {
        tool_name: crate::tools::HANDOFF_TOOL.into(),
        content: json!({"handoff_to": "c"}),
        success: true,
        corr: "h1".into(),
        agent: Some("a".into()),
    };
    let log = vec![user("go"), member_turn("a", "first"), handoff, handed];
    let Plan::Continue {
        group: Some(place), ..
    } = cut(log).plan(never)
    else {
        panic!("continued")
    };
    assert!(place.done);
    assert_eq!(place.handoff.as_deref(), Some("c"));
}

#[test]
fn a_workflow_run_is_abandoned_mid_action_and_finished_after_it() {
    let invoked = EventKind::ToolCall {
        tool_name: "ship".into(),
        component_type: Some(crate::workflows::WORKFLOW.into()),
        awaiting_response: false,
        payload: json!({"workflow_id": "ship", "parameters": {}}),
        corr: "wf_1".into(),
        display: Display::Inline,
        agent: None,
    };
    // Its steps under way: every call without a result is abandoned.
    let log = vec![user("hi"), invoked.clone(), call("step", "wf_1.1", None)];
    let Plan::Abandon { unanswered, .. } = cut(log).plan(|_| true) else {
        panic!("abandoned")
    };
    let corrs: Vec<&str> = unanswered.iter().map(|c| c.corr.as_str()).collect();
    assert_eq!(corrs, ["wf_1.1", "wf_1"]);
    // Its result logged: the run was ending.
    let log = vec![invoked.clone(), response("ship", "wf_1")];
    assert!(matches!(cut(log).plan(never), Plan::Finish { .. }));
    // A prompt workflow's prompt: the agent's answer goes on.
    let log = vec![invoked, response("ship", "wf_1"), user("Summarize x.")];
    assert!(matches!(cut(log).plan(never), Plan::Continue { .. }));
}

#[test]
fn a_workflow_waiting_for_its_approval_is_invoked_again() {
    let invoked = EventKind::ToolCall {
        tool_name: "ship".into(),
        component_type: Some(crate::workflows::WORKFLOW.into()),
        awaiting_response: false,
        payload: json!({"workflow_id": "ship", "parameters": {"to": "prod"}}),
        corr: "wf_1".into(),
        display: Display::Inline,
        agent: None,
    };
    let gate = EventKind::ToolCall {
        tool_name: "ship".into(),
        component_type: Some(APPROVAL.into()),
        awaiting_response: true,
        payload: json!({"tool_name": "ship", "input": {"to": "prod"}, "tool_call_id": "wf_1"}),
        corr: "wf_1.approval".into(),
        display: Display::Inline,
        agent: None,
    };
    let Plan::Workflow {
        id,
        corr,
        parameters,
        ..
    } = cut(vec![invoked.clone(), gate]).plan(never)
    else {
        panic!("invoked again")
    };
    assert_eq!((id.as_str(), corr.as_str()), ("ship", "wf_1"));
    assert_eq!(parameters, json!({"to": "prod"}));
    // Approved, then cut during its action: abandoned.
    let approved = response("ship", "wf_1.approval");
    let log = vec![invoked, approved];
    assert!(matches!(cut(log).plan(never), Plan::Abandon { .. }));
}

fn untooled(id: &str) -> EventKind {
    EventKind::InputRequest {
        request_id: id.into(),
        prompt: "Who speaks next? a, b".into(),
        corr: id.into(),
        password: false,
        timeout_seconds: None,
        options: Some(vec!["a".into(), "b".into()]),
        tool_name: None,
    }
}

#[test]
fn a_groups_choice_of_speaker_is_asked_again_and_nothing_else_untooled_is() {
    let Plan::Continue { choosing, .. } = cut(vec![user("hi"), untooled("speaker_1")]).plan(never)
    else {
        panic!("continued")
    };
    assert_eq!(choosing.map(|(id, _)| id).as_deref(), Some("speaker_1"));
    // Answered: nothing to ask again.
    let ack = EventKind::InputAck {
        request_id: "speaker_1".into(),
        corr: "speaker_1".into(),
    };
    let Plan::Continue { choosing, .. } =
        cut(vec![user("hi"), untooled("speaker_1"), ack]).plan(never)
    else {
        panic!("continued")
    };
    assert!(choosing.is_none());
    // A request of no tool that is not a speaker's choice cannot go on.
    let plan = cut(vec![user("hi"), untooled("req_1")]).plan(never);
    assert!(matches!(plan, Plan::Interrupt(_)), "{plan:?}");
}

/// What a cut run carries: the `context_type` of the message that started
/// it, and its last `run_usage`; nothing of the runs before it.
#[test]
fn a_cut_run_carries_its_context_type_and_last_usage() {
    let used = |n: u64| {
        let usage = crate::protocol::AgentUsage {
            total_tokens: n + 1,
            prompt_tokens: n,
            completion_tokens: 1,
            cost: None,
        };
        Some(std::collections::BTreeMap::from([(
            "bot".to_owned(),
            usage,
        )]))
    };
    let mut log = vec![
        (user("earlier"), Some("old"), None),
        (text("done"), None, used(50)),
        (
            EventKind::RunComplete {
                reason: RunEndReason::Completed,
            },
            None,
            None,
        ),
        (user("go"), Some("ops"), None),
        (speaker(), None, None),
        (text("a"), None, used(7)),
        (speaker(), None, None),
        (print("b"), None, None),
        (text("b"), None, used(9)),
    ];
    let mut cut = Cut::default();
    for (i, (kind, context_type, run_usage)) in log.drain(..).enumerate() {
        let mut env = Envelope::new(
            kind,
            Uuid::nil(),
            i as u64 + 1,
            "2026-11-25T10:00:00.000Z".into(),
        );
        env.context_type = context_type.map(str::to_owned);
        env.run_usage = run_usage;
        cut.push(&StoredEnvelope {
            seq: env.seq,
            kind: env.kind.type_name().into(),
            json: env.to_json(),
        });
    }
    let carried = cut.carried();
    assert_eq!(carried.context_type.as_deref(), Some("ops"));
    let bot = carried.used["bot"];
    assert_eq!((bot.prompt_tokens, bot.completion_tokens), (9, 1));
    assert_eq!(carried.used.len(), 1);
}

#[test]
fn a_cut_regenerate_carries_the_model_it_chose() {
    let branch = |model: Option<&str>| EventKind::Branch {
        at: 1,
        reason: crate::protocol::BranchReason::Regenerate,
        model: model.map(str::to_owned),
    };
    let cut_with = |model: Option<&str>| {
        cut(vec![
            user("hi"),
            speaker(),
            text("hello"),
            end(),
            branch(model),
            speaker(),
            print("hel"),
        ])
        .carried()
        .model
    };
    assert_eq!(cut_with(Some("qwen")).as_deref(), Some("qwen"));
    assert_eq!(cut_with(None), None);
    // A run after one that a regenerate began keeps nothing of it.
    let later = cut(vec![
        branch(Some("qwen")),
        speaker(),
        text("a"),
        end(),
        user("next"),
        speaker(),
    ]);
    assert_eq!(later.carried().model, None);
}

#[test]
fn an_upstream_run_cut_while_streaming_is_abandoned_unless_idempotent() {
    use super::plan::upstream;
    let said = || EventKind::Text {
        agent: "bot".into(),
        content: "Let me look.".into(),
    };
    let call = |name: &str, component: Option<&str>, payload: Value| EventKind::ToolCall {
        tool_name: name.into(),
        component_type: component.map(str::to_owned),
        awaiting_response: component.is_some(),
        payload,
        corr: "c9".into(),
        display: Display::Inline,
        agent: None,
    };
    let result = EventKind::ToolResponse {
        tool_name: "lookup".into(),
        content: json!("ok"),
        success: true,
        corr: "c9".into(),
        agent: None,
    };
    let streaming = [
        // A turn open, words streamed.
        vec![user("go"), speaker()],
        // Its own call without its result.
        vec![
            user("go"),
            speaker(),
            said(),
            call("lookup", None, json!({})),
        ],
        // Between its call's result and its next words.
        vec![
            user("go"),
            speaker(),
            said(),
            call("lookup", None, json!({})),
            result,
        ],
    ];
    for events in streaming {
        let n = events.len();
        let plan = cut(events.clone()).plan(|_| false);
        assert!(
            matches!(upstream(plan, "byo", false), Plan::Abandon { ref why, .. } if why.contains("outcome of its run is unknown")),
            "{n} events"
        );
        let plan = cut(events).plan(|_| false);
        assert!(
            matches!(upstream(plan, "byo", true), Plan::Continue { .. }),
            "{n} events: idempotent"
        );
    }
    // Waiting for a person: its approval of the agent's own call waits again,
    // one call with the interrupt it resumes.
    let gate = EventKind::ToolCall {
        tool_name: "delete_file".into(),
        component_type: Some(APPROVAL.into()),
        awaiting_response: true,
        payload: json!({"tool_name": "delete_file", "input": {"path": "/a"},
            "tool_call_id": "c9", "interrupt_id": "int-c9"}),
        corr: "c9.approval".into(),
        display: Display::Inline,
        agent: None,
    };
    let events = vec![
        user("go"),
        speaker(),
        call("delete_file", None, json!({"path": "/a"})),
        gate,
    ];
    let Plan::Continue { again, unknown, .. } = upstream(cut(events).plan(|_| false), "byo", false)
    else {
        panic!("waits again")
    };
    assert!(unknown.is_empty());
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].corr, "c9");
    assert_eq!(
        again[0].payload,
        json!({"input": {"path": "/a"}, "interrupt_id": "int-c9"})
    );
}

#[test]
fn an_input_request_waiting_again_offers_its_choices_again() {
    let ask = EventKind::InputRequest {
        request_id: "int-1".into(),
        prompt: "Book it?".into(),
        corr: "int-1".into(),
        password: false,
        timeout_seconds: None,
        options: Some(vec!["yes".into(), "no".into()]),
        tool_name: Some(crate::agent::INTERRUPT_TOOL.into()),
    };
    let Plan::Continue { again, .. } = cut(vec![user("go"), speaker(), ask]).plan(|_| false) else {
        panic!("waits again")
    };
    assert_eq!(
        again[0].payload,
        json!({"prompt": "Book it?", "options": ["yes", "no"]})
    );
}

#[test]
fn a_member_cut_inside_its_nested_chats_is_held_again_whole() {
    // `r`'s turn is a nested chat whose agent called a tool that asked a
    // question, and an inner group's member asked who speaks: none of it
    // is waited on again; `r` goes on, its turn not done.
    let inner_call = |corr: &str| EventKind::ToolCall {
        tool_name: "ask".into(),
        component_type: None,
        awaiting_response: false,
        payload: json!({}),
        corr: corr.into(),
        display: Display::Inline,
        agent: Some("r/critic".into()),
    };
    let log = vec![
        user("go"),
        member_turn("a", "round_robin"),
        said("a", "draft"),
        member_turn("r", "round_robin"),
        member_turn("r/critic", "nested"),
        inner_call("q1"),
        asked("q1", Some("ask")),
        asked("speaker_1", None),
    ];
    let Plan::Continue {
        group: Some(place),
        again,
        choosing,
        ..
    } = cut(log).plan(never)
    else {
        panic!("continued")
    };
    assert_eq!((place.member.as_str(), place.done), ("r", false));
    assert!(again.is_empty(), "{again:?}");
    assert!(choosing.is_none());
}
