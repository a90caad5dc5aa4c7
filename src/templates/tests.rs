use super::generate::*;
use super::*;

fn parse(yaml: &str) -> Result<Template, String> {
    let spec: TemplateSpec = serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
    Template::from_spec(spec)
}

const QUIZ: &str = r#"
title: Capitals
skills:
  - id: capital
    stem: "Ask for the capital of ${country}"
    options: "4 plausible capitals"
    variables: {country: France}
    difficulty: {min: 1, max: 3}
items:
  - title: Welcome
    contents:
      - widget_type: message
        stem: "Three questions."
  - id: q
    contents:
      - widget_type: multiple_choice
        stem: "Capital of France?"
        options: [London, Paris, Berlin]
        correct_answer: Paris
        widget_config: {shuffle_options: true}
      - widget_type: free_text
        stem: "Why?"
        required: false
        skippable: true
        widget_config: {min_length: 3, max_length: 100, placeholder: "…"}
      - widget_type: code_editor
        stem: "Print it"
        widget_config: {language: python}
      - widget_type: multiple_choice
        is_templated: true
        skill: capital
"#;

#[test]
fn a_quiz_parses_with_ids_filled_in() {
    let t = parse(QUIZ).unwrap();
    assert_eq!(t.items.len(), 2);
    assert_eq!(t.items[0].id, "item-1");
    assert_eq!(t.items[0].title, "Welcome");
    assert_eq!(t.items[1].title, "Item 2");
    assert_eq!(t.items[1].contents[0].id, "q-1");
    assert_eq!(t.questions(), 4);
    assert_eq!(t.on_render_error, OnRenderError::Continue);
    let mc = &t.items[1].contents[0].spec;
    assert!(mc.required && !mc.skippable && mc.show_user_response);
    assert_eq!(mc.correct_answer, Some(Answer::One("Paris".into())));
}

#[test]
fn generated_content_is_checked() {
    let mc = WidgetType::MultipleChoice;
    let good = r#"Sure! ```json
{"stem": "2 + 2?", "options": ["3", "4", "5"], "correct_answer": "4"}
```"#;
    let g = parse_generated(good, mc).unwrap();
    assert_eq!(g.stem, "2 + 2?");
    assert_eq!(g.correct_answer.as_deref(), Some("4"));
    let cases = [
        ("no json here", "no JSON object in the reply"),
        (
            r#"{"stem": "", "options": ["a","b","c"], "correct_answer": "a"}"#,
            "\"stem\" is empty",
        ),
        (
            r#"{"stem": "s", "options": ["a","b"], "correct_answer": "a"}"#,
            "\"options\" has 2 entries, not 3 to 5",
        ),
        (
            r#"{"stem": "s", "options": ["a","b","a"], "correct_answer": "a"}"#,
            "\"options\" must be non-empty and distinct",
        ),
        (
            r#"{"stem": "s", "options": ["a","b","c"], "correct_answer": "d"}"#,
            "\"correct_answer\" `d` is not one of \"options\"",
        ),
        (
            r#"{"stem": "s", "options": ["a","b","c"]}"#,
            "\"correct_answer\" is missing",
        ),
    ];
    for (reply, why) in cases {
        assert_eq!(parse_generated(reply, mc).unwrap_err(), why, "{reply}");
    }
    assert!(
        parse_generated(r#"{"stem": 3}"#, mc)
            .unwrap_err()
            .starts_with("not the JSON asked for")
    );
    // A generated message needs a stem only.
    assert!(parse_generated(r#"{"stem": "Hi"}"#, WidgetType::Message).is_ok());
}

#[test]
fn the_prompt_fills_the_skill() {
    let t = parse(QUIZ).unwrap();
    let p = generation_prompt(&t.skills[0], WidgetType::MultipleChoice);
    assert!(
        p.contains("Stem template: Ask for the capital of France"),
        "{p}"
    );
    assert!(p.contains("Difficulty: from 1 to 3"), "{p}");
    assert!(p.contains("\"correct_answer\""), "{p}");
}

#[test]
fn mistakes_name_their_field() {
    let cases = [
        (
            "items: []",
            "template.items: a template needs at least one item",
        ),
        (
            "items: [{contents: [{widget_type: message}]}]",
            "template.items[0].contents[0].stem: must not be empty",
        ),
        (
            "items: [{contents: [{widget_type: multiple_choice, stem: s, options: [a]}]}]",
            "template.items[0].contents[0].options: 2 to 20 options",
        ),
        (
            "items: [{contents: [{widget_type: multiple_choice, stem: s, options: [a, a]}]}]",
            "template.items[0].contents[0].options: options are non-empty and distinct",
        ),
        (
            "items: [{contents: [{widget_type: multiple_choice, stem: s, options: [a, b], correct_answer: c}]}]",
            "template.items[0].contents[0].correct_answer: `c` is not an option",
        ),
        (
            "items: [{contents: [{widget_type: multiple_choice, stem: s, options: [a, b], correct_answer: [a, b]}]}]",
            "template.items[0].contents[0].correct_answer: several answers need widget_config.allow_multiple",
        ),
        (
            "items: [{contents: [{widget_type: free_text, stem: s, widget_config: {min_length: 9, max_length: 3}}]}]",
            "template.items[0].contents[0].widget_config: min_length is above max_length",
        ),
        (
            "items: [{contents: [{widget_type: free_text, stem: s, skippable: true}]}]",
            "template.items[0].contents[0].skippable: a required content cannot be skippable",
        ),
        (
            "items: [{contents: [{widget_type: multiple_choice, is_templated: true, skill: nope}]}]",
            "template.items[0].contents[0].skill: no skill `nope` in template.skills",
        ),
        (
            "items: [{contents: [{widget_type: free_text, stem: s, widget_config: {language: rust}}]}]",
            "template.items[0].contents[0].widget_config: language is for code_editor",
        ),
        (
            "items: [{id: a, contents: [{widget_type: message, stem: s}]}, {id: a, contents: [{widget_type: message, stem: s}]}]",
            "template.items[1].id: is used twice",
        ),
        (
            "skills: [{id: s, stem: x, difficulty: {min: 3, max: 1}}]\nitems: [{contents: [{widget_type: message, stem: s}]}]",
            "template.skills[0].difficulty: min is above max",
        ),
    ];
    for (yaml, expected) in cases {
        assert_eq!(parse(yaml).unwrap_err(), expected, "{yaml}");
    }
    let unknown =
        parse("items: [{contents: [{widget_type: message, stem: s, colour: red}]}]").unwrap_err();
    assert!(unknown.contains("colour"), "{unknown}");
    let bad_type = parse("items: [{contents: [{widget_type: slider, stem: s}]}]").unwrap_err();
    assert!(bad_type.contains("slider"), "{bad_type}");
}

#[test]
fn a_widgets_file_is_read_from_inside_the_agents_folder_only() {
    let with = |kind: &str, path: &str| {
        format!(
            "items:\n  - contents:\n      - widget_type: {kind}\n        stem: Look\n        file: {path}\n"
        )
    };
    let err = parse(&with("message", "a.txt")).unwrap_err();
    assert!(
        err.contains("contents[0].file: only a widget that asks"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    std::fs::write(dir.path().join("files/sheet.csv"), "a,b\n").unwrap();
    let mut t = parse(&with("free_text", "files/sheet.csv")).unwrap();
    t.read_files(dir.path()).unwrap();
    let file = &t.files[&t.items[0].contents[0].id];
    assert_eq!(
        (file.name.as_str(), file.bytes.as_slice()),
        ("sheet.csv", &b"a,b\n"[..])
    );
    for bad in ["../secret.txt", "/etc/passwd", "files/../../x"] {
        let mut t = parse(&with("free_text", bad)).unwrap();
        let err = t.read_files(dir.path()).unwrap_err();
        assert!(
            err.contains("must be a path inside the agents folder"),
            "{bad}: {err}"
        );
    }
    let mut t = parse(&with("free_text", "files/missing.csv")).unwrap();
    assert!(
        t.read_files(dir.path())
            .unwrap_err()
            .contains("cannot read")
    );
}
