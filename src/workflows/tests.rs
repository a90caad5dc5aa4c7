use serde_json::{Map, Value, json};

use super::*;

fn parse(text: &str) -> Result<Workflow, String> {
    let file: WorkflowFile = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    Workflow::from_file(file)
}

const FORM: &str = "parameters: {type: object, properties: {name: {type: string, minLength: 1}, size: {type: integer}}, required: [name]}\n";

#[test]
fn the_three_kinds_and_their_checks() {
    let http = parse(&format!(
        "id: create\ncategory: Projects\n{FORM}http: {{url: \"http://127.0.0.1:9/x\"}}\n"
    ))
    .unwrap();
    assert_eq!(
        (
            http.action.kind(),
            http.category.as_str(),
            http.title.as_str()
        ),
        ("http", "Projects", "create")
    );
    let prompt = parse(
        "id: draft\nparameters: {type: object, properties: {topic: {type: string}}}\nprompt: \"Write about {topic}\"\n",
    )
    .unwrap();
    assert_eq!(
        (prompt.action.kind(), prompt.category.as_str()),
        ("prompt", DEFAULT_CATEGORY)
    );
    let steps = parse(
        "id: s\nparameters: {type: object, properties: {n: {type: integer}}}\nsteps: [{tool: count, input: {steps: \"{n}\"}}]\ntools: [{name: count, builtin: progress}]\n",
    )
    .unwrap();
    assert_eq!(steps.action.kind(), "steps");

    for (text, field) in [
        ("id: 'a b'\nprompt: x\n", "id:"),
        ("id: a\n", "exactly one of"),
        (
            "id: a\nprompt: x\nhttp: {url: \"http://x\"}\n",
            "exactly one of",
        ),
        ("id: a\nprompt: \" \"\n", "prompt:"),
        (
            "id: a\nprompt: x\nparameters: {type: array}\n",
            "parameters:",
        ),
        (
            "id: a\nprompt: x\nparameters: {type: object, properties: {n: {type: 12}}}\n",
            "parameters: not a valid",
        ),
        ("id: a\nhttp: {url: \"ftp://x\"}\n", "http.url"),
        (
            "id: a\nsteps: [{tool: nope}]\ntools: [{name: t, builtin: progress}]\n",
            "steps[0].tool",
        ),
        (
            "id: a\nsteps: [{tool: t}]\ntools: [{name: t, builtin: nope}]\n",
            "tools[0].builtin",
        ),
        (
            "id: a\nprompt: x\ntools: [{name: t, builtin: progress}]\n",
            "tools: only",
        ),
        ("id: a\nprompt: x\ncategory: ''\n", "category"),
        ("id: a\nprompt: x\nallow: {groups: [x]}\n", "groups"),
    ] {
        let err = parse(text)
            .err()
            .unwrap_or_else(|| panic!("accepted: {text}"));
        assert!(err.contains(field), "{field} not in {err}");
    }
}

#[test]
fn parameters_are_checked_with_the_faulty_field_named() {
    let w = parse(&format!("id: a\n{FORM}prompt: x\n")).unwrap();
    assert!(w.check(&json!({"name": "n", "size": 3})).is_empty());
    let faults = w.check(&json!({"name": "", "size": "big"}));
    let paths: Vec<&str> = faults.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        paths.contains(&"/name") && paths.contains(&"/size"),
        "{faults:?}"
    );
    assert_eq!(w.check(&json!({}))[0].0, "");
}

#[test]
fn who_may_run_it() {
    let w =
        parse("id: a\nprompt: x\nallow: {users: [alice], claims: {role: [admin, ops]}}\n").unwrap();
    let claims = |v: Value| -> Map<String, Value> { v.as_object().unwrap().clone() };
    let none = Map::new();
    assert!(w.allows("alice", &none));
    assert!(!w.allows("bob", &none));
    assert!(w.allows("bob", &claims(json!({"role": "ops"}))));
    assert!(w.allows("bob", &claims(json!({"role": ["user", "admin"]}))));
    assert!(!w.allows("bob", &claims(json!({"role": "user"}))));
    let open = parse("id: b\nprompt: x\n").unwrap();
    assert!(open.allows("anyone", &none));
}

#[test]
fn templates_fill_parameters() {
    let p = json!({"name": "Apollo", "size": 3, "tags": ["a"]});
    assert_eq!(
        fill_text("Create {name} ({size}) {tags} {missing}", &p),
        "Create Apollo (3) [\"a\"]"
    );
    // Braces around anything but a name are text.
    assert_eq!(
        fill_text("As {\"json\": {size}} or { name } or {}", &p),
        "As {\"json\": 3} or { name } or {}"
    );
    assert_eq!(
        fill_json(
            &json!({"n": "{size}", "label": "x-{name}", "list": ["{tags}"], "gone": "{missing}", "k": 1}),
            &p
        ),
        json!({"n": 3, "label": "x-Apollo", "list": [["a"]], "gone": null, "k": 1})
    );
}

#[test]
fn a_value_is_never_read_for_placeholders() {
    // Filled in one scan: `{b}` inside a's value stays as it is.
    let p = json!({"a": "{b}{b}{b}", "b": "xxxxxxxx"});
    assert_eq!(fill_text("<{a}|{b}>", &p), "<{b}{b}{b}|xxxxxxxx>");
    assert_eq!(fill_text("{unclosed {a}", &p), "{unclosed {b}{b}{b}");
    assert_eq!(fill_text("}{}{", &p), "}{}{");
}

#[test]
fn defaults_fill_what_the_caller_left_out() {
    let w = parse("id: a\nparameters: {type: object, properties: {len: {type: string, default: short}, t: {type: string}}}\nprompt: \"{t} in {len}\"\n").unwrap();
    let p = w.with_defaults(json!({"t": "tides"}));
    assert_eq!(w.prompt(&p).unwrap(), "tides in short");
    assert_eq!(
        w.with_defaults(json!({"t": "x", "len": "long"}))["len"],
        "long"
    );
    for (text, field) in [
        ("id: categories\nprompt: x\n", "reserved"),
        ("id: a\nprompt: x\nallow: {}\n", "allow:"),
        (
            "id: a\nsteps: [{tool: t}]\ntools: [{name: t, builtin: progress, context_types: [x]}]\n",
            "tools[0].context_types",
        ),
    ] {
        let err = parse(text)
            .err()
            .unwrap_or_else(|| panic!("accepted: {text}"));
        assert!(err.contains(field), "{field} not in {err}");
    }
}

#[test]
fn every_placeholder_must_name_a_parameter() {
    let form =
        "parameters: {type: object, properties: {topic: {type: string}, tone: {type: string}}}\n";
    for (text, says) in [
        (
            format!("id: a\n{form}prompt: \"Write about {{topik}}\"\n"),
            "prompt: `{topik}` is not a parameter (parameters.properties has `tone`, `topic`)",
        ),
        (
            "id: a\nprompt: \"Write about {topic}\"\n".to_owned(),
            "prompt: `{topic}` is not a parameter (this workflow declares none",
        ),
        (
            format!(
                "id: a\n{form}steps: [{{tool: t, input: {{text: \"on {{topic}} by {{author}}\"}}}}]\ntools: [{{name: t, builtin: progress}}]\n"
            ),
            "steps[0].input: `{author}` is not a parameter",
        ),
    ] {
        let err = parse(&text)
            .err()
            .unwrap_or_else(|| panic!("accepted: {text}"));
        assert!(err.contains(says), "{says} not in {err}");
    }
    // JSON in a prompt is not a placeholder.
    parse(&format!(
        "id: a\n{form}prompt: 'Answer as {{\"title\": \"…\"}} about {{topic}}'\n"
    ))
    .unwrap();
}

#[test]
fn an_absent_optional_value_leaves_no_trace() {
    let p = json!({"topic": "tides", "tone": "", "nothing": null});
    for (template, filled) in [
        (
            "Write about {topic} in a {tone} voice.",
            "Write about tides in a voice.",
        ),
        ("Summarize {topic} {tone}.", "Summarize tides."),
        ("{tone} Write about {topic}", "Write about tides"),
        ("Hello {who}, about {topic}", "Hello, about tides"),
        ("Topic: {topic}\n{tone}\nEnd", "Topic: tides\nEnd"),
        ("Topic: {topic}\n\n{tone}\n\nEnd", "Topic: tides\n\nEnd"),
        ("{tone}\n\nWrite about {topic}", "Write about tides"),
        ("Write about {topic}\n{nothing}", "Write about tides\n"),
        ("({tone})", "()"),
    ] {
        assert_eq!(fill_text(template, &p), filled, "{template}");
    }
}
