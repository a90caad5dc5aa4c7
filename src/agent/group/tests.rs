//! Group files through the real loader: what a good one builds, and each
//! mistake stopping start-up with the file and the field named.

use super::super::build::Target;
use super::super::definition::SelectionMethod;
use super::super::registry::AgentRegistry;

const SCRIPT: &str = "{provider: scripted, script: {rules: [{reply: ok}]}}";

fn load(files: &[(&str, String)]) -> Result<AgentRegistry, String> {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    AgentRegistry::load(dir.path(), true, &[]).map_err(|e| e.to_string())
}

fn group(body: &str) -> String {
    format!("id: team\nmodel: {SCRIPT}\ngroup:\n{body}")
}

const HELPER: &str =
    "id: helper\ndescription: Helps\nmodel: {provider: scripted, script: {rules: [{reply: hi}]}}\n";

#[test]
fn a_group_builds_its_members_and_rules() {
    let reg = load(&[
        ("helper.yaml", HELPER.to_owned()),
        (
            "team.yaml",
            group(
                "  speaker_selection: auto\n  max_rounds: 4\n  first: writer\n  termination: {marker: DONE}\n  \
                 handoffs: {tool: true, after: {planner: helper, writer: user}}\n  members:\n    \
                 - {name: planner, description: Plans, system_prompt: Plan.}\n    - {agent: helper}\n    \
                 - {name: writer, model: {provider: scripted, script: {rules: [{reply: w}]}}, max_turns: 2}\n",
            ),
        ),
    ])
    .unwrap();
    let team = reg.get("team").unwrap();
    let g = team.group.as_ref().unwrap();
    let names: Vec<&str> = g.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["planner", "helper", "writer"]);
    assert_eq!(g.method, SelectionMethod::Auto);
    assert_eq!((g.max_rounds, g.first), (4, Some(2)));
    assert_eq!(g.marker.as_deref(), Some("DONE"));
    assert_eq!(g.after.get(&0), Some(&Target::Member(1)));
    assert_eq!(g.after.get(&2), Some(&Target::User));
    assert!(g.handoff_tool.is_some());
    // A member by reference is that agent; inline members lend the group's model.
    assert_eq!(g.members[1].description, "Helps");
    assert!(std::sync::Arc::ptr_eq(
        &g.members[1].agent,
        &reg.get("helper").unwrap()
    ));
    assert!(g.members[0].default_model && !g.members[2].default_model);
    assert_eq!(g.members[2].agent.max_turns, 2);
    assert!(
        g.selector_prompt.contains("planner: Plans")
            && g.selector_prompt.contains("[planner, helper, writer]")
    );
}

#[test]
fn mistakes_name_the_file_and_the_field() {
    let cases: Vec<(String, &str)> = vec![
        (group("  members: []\n"), "group.members"),
        (
            group("  members: [{name: a}]\n  max_rounds: 0\n"),
            "group.max_rounds",
        ),
        (
            group("  members: [{description: x}]\n"),
            "group.members[0].name",
        ),
        (
            group("  members: [{name: a}, {name: a}]\n"),
            "group.members[1].name",
        ),
        (
            group("  members: [{name: a}, {name: A}]\n"),
            "group.members[1].name",
        ),
        (
            group("  members: [{name: '42'}]\n"),
            "group.members[0].name",
        ),
        (
            group("  members: [{name: user}]\n"),
            "group.members[0].name",
        ),
        (
            group("  members: [{name: team}]\n"),
            "group.members[0].name",
        ),
        (
            group("  members: [{name: 'two words'}]\n"),
            "group.members[0].name",
        ),
        (
            group("  members: [{agent: nobody}]\n"),
            "group.members[0].agent",
        ),
        (
            group("  members: [{name: a}, {name: b}]\n  termination: {pattern: '('}\n"),
            "group.termination.pattern",
        ),
        (
            group("  members: [{name: a}, {name: b}]\n  handoffs: {after_work: nowhere}\n"),
            "group.handoffs.after_work",
        ),
        (
            group("  members: [{name: a}]\n  max_rounds: 1\n"),
            "group.max_rounds",
        ),
        (
            group(
                "  members: [{name: a}, {name: b}]\n  handoffs:\n    conditions: {a: [{to: c, condition: x}]}\n",
            ),
            "group.handoffs.conditions.a[0].to",
        ),
        (
            group(
                "  members: [{name: a}, {name: b}]\n  handoffs:\n    conditions: {c: [{to: b, condition: x}]}\n",
            ),
            "group.handoffs.conditions.c",
        ),
        (
            group(
                "  members: [{name: a}, {name: b}]\n  handoffs:\n    conditions: {a: [{to: b, condition: ' '}]}\n",
            ),
            "group.handoffs.conditions.a[0].condition",
        ),
        (
            group(
                "  members: [{name: a}, {name: b}]\n  handoffs:\n    conditions: {a: [{to: b, condition: x, available: 'verified'}]}\n",
            ),
            "group.handoffs.conditions.a[0].available",
        ),
        (
            group(
                "  members: [{name: a}, {name: b}]\n  handoffs:\n    context_conditions: {b: [{to: a, expression: '${n} >'}]}\n",
            ),
            "group.handoffs.context_conditions.b[0].expression",
        ),
        (
            group(&format!(
                "  members: [{{name: a}}, {{name: {long}}}]\n  handoffs:\n    conditions: {{a: [{{to: {long}, condition: x}}]}}\n",
                long = "b".repeat(60)
            )),
            "group.handoffs.conditions.a[0].to",
        ),
        (
            group("  members: [{name: a}]\n  context_variables: {'bad name': 1}\n"),
            "group.context_variables",
        ),
        (
            group("  members: [{name: a, tools: [{name: update_context, builtin: progress}]}]\n"),
            "group.members[0].tools",
        ),
        (
            group(
                "  members: [{name: a}, {name: b}]\n  allowed_or_disallowed_speaker_transitions: {a: [c]}\n  speaker_transitions_type: allowed\n",
            ),
            "group.allowed_or_disallowed_speaker_transitions.a",
        ),
        (
            group("  members: [{agent: helper, tools: [{name: t, builtin: progress}]}]\n"),
            "group.members[0].tools",
        ),
        (
            group("  members: [{name: a, tools: [{name: t, builtin: nope}]}]\n"),
            "group.members[0].tools[0].builtin",
        ),
        (group("  members: [{name: a}]\n  first: b\n"), "group.first"),
        (
            group("  members: [{name: a}]\n  handoffs: {after: {a: c}}\n"),
            "group.handoffs.after.a",
        ),
        (
            group("  members: [{name: a}]\n  handoffs: {after: {c: a}}\n"),
            "group.handoffs.after.c",
        ),
        (
            group("  members: [{name: a}]\n  speaker_selection: loudest\n"),
            "speaker_selection",
        ),
        (
            group("  members: [{name: a}]\n  max_round: 3\n"),
            "max_round",
        ),
        (
            "id: team\ngroup:\n  members: [{name: a}]\n".to_owned(),
            "group.members[0].model",
        ),
        (
            format!(
                "id: team\ngroup:\n  speaker_selection: auto\n  members: [{{name: a, model: {SCRIPT}}}]\n"
            ),
            "group.selector.model",
        ),
        (
            format!(
                "{}tools: [{{name: t, builtin: progress}}]\n",
                group("  members: [{name: a}]\n")
            ),
            "tools: a group's tools",
        ),
        ("id: solo\n".to_owned(), "model: missing"),
        (
            format!(
                "id: solo\nmodel: {SCRIPT}\ntools: [{{name: handoff_to, builtin: progress}}]\n"
            ),
            "tools[0].name: `handoff_to` is reserved",
        ),
        (
            group("  members: [{name: a, tools: [{name: handoff_to, builtin: progress}]}]\n"),
            "group.members[0].tools[0].name",
        ),
    ];
    for (text, field) in cases {
        let err = load(&[
            ("helper.yaml", HELPER.to_owned()),
            ("team.yaml", text.clone()),
        ])
        .err()
        .unwrap_or_else(|| panic!("accepted:\n{text}"));
        assert!(
            err.contains(field) && (err.contains("team.yaml") || err.contains("solo")),
            "{field} not in: {err}\nfor:\n{text}"
        );
    }
    // A group cannot be a member: only plain agents resolve.
    let err = load(&[
        ("a.yaml", group("  members: [{name: a}]\n")),
        (
            "b.yaml",
            format!("id: other\nmodel: {SCRIPT}\ngroup:\n  members: [{{agent: team}}]\n"),
        ),
    ])
    .err()
    .unwrap();
    assert!(
        err.contains("b.yaml") && err.contains("group.members[0].agent"),
        "{err}"
    );
}

#[test]
fn nested_chats_name_agents_that_can_take_them() {
    // A group may nest another group, built first whatever the file order.
    let reg = load(&[
        (
            "a.yaml",
            format!(
                "id: outer\nmodel: {SCRIPT}\ngroup:\n  members: [{{name: a}}, {{name: r, nested: [{{agent: inner}}, {{agent: helper, summary: reflection_with_llm}}]}}]\n"
            ),
        ),
        ("b.yaml", group("  members: [{name: a}, {name: b}]\n").replace("id: team", "id: inner")),
        ("c.yaml", HELPER.to_owned()),
    ])
    .unwrap();
    let outer = reg.get("outer").unwrap();
    let nested = &outer.group.as_ref().unwrap().members[1].nested;
    assert_eq!(nested.len(), 2);
    assert!(nested[0].agent.group.is_some());
    assert_eq!(nested[0].message, "{message}");

    let cases = [
        (
            format!(
                "id: x\nmodel: {SCRIPT}\ngroup:\n  members: [{{name: r, nested: [{{agent: nobody}}]}}]\n"
            ),
            "group.members[0].nested[0].agent",
        ),
        (
            format!(
                "id: x\nmodel: {SCRIPT}\ngroup:\n  members: [{{name: r, system_prompt: hi, nested: [{{agent: helper}}]}}]\n"
            ),
            "group.members[0].system_prompt",
        ),
        (
            format!(
                "id: x\nmodel: {SCRIPT}\ngroup:\n  members: [{{agent: helper, nested: [{{agent: helper}}]}}]\n"
            ),
            "group.members[0].nested",
        ),
        (
            format!(
                "id: x\nmodel: {SCRIPT}\ngroup:\n  members: [{{name: r, nested: [{{agent: helper, message: ''}}]}}]\n"
            ),
            "group.members[0].nested[0].message",
        ),
        (format!("id: a/b\nmodel: {SCRIPT}\n"), "id"),
        (
            format!(
                "id: x\nmodel: {SCRIPT}\ngroup:\n  handoffs: {{conditions: {{r: [{{to: a, condition: c}}]}}}}\n  members: [{{name: a}}, {{name: r, nested: [{{agent: helper}}]}}]\n"
            ),
            "group.handoffs.conditions.r",
        ),
        (
            format!(
                "id: x\nmodel: {SCRIPT}\ntools: [{{name: select_speaker, builtin: progress}}]\n"
            ),
            "tools[0].name",
        ),
    ];
    for (text, field) in cases {
        let err = load(&[("x.yaml", text.clone()), ("h.yaml", HELPER.to_owned())])
            .err()
            .unwrap_or_else(|| panic!("accepted:\n{text}"));
        assert!(err.contains(field), "{field} not in: {err}");
    }
    // Two groups that nest each other: a circle, named.
    let nesting = |id: &str, other: &str| {
        format!(
            "id: {id}\nmodel: {SCRIPT}\ngroup:\n  members: [{{name: r, nested: [{{agent: {other}}}]}}]\n"
        )
    };
    let err = load(&[("p.yaml", nesting("p", "q")), ("q.yaml", nesting("q", "p"))])
        .err()
        .unwrap();
    assert!(err.contains("circle"), "{err}");
}
