use super::*;

#[test]
fn demo_loads_with_its_tools() {
    let reg = AgentRegistry::load(Path::new("/nonexistent-agents-dir"), false, &[]).unwrap();
    let demo = reg.get("demo").unwrap();
    assert_eq!(demo.max_turns, 20);
    assert!(demo.tool("ask_secret").is_some());
    assert!(matches!(
        demo.tool("ask_secret").unwrap().kind,
        ToolKind::InputRequest { password: true, .. }
    ));
}

#[test]
fn a_required_missing_folder_is_an_error() {
    let err = AgentRegistry::load(Path::new("/nonexistent-agents-dir"), true, &[]).unwrap_err();
    assert!(err.to_string().contains("agents folder"), "{err}");
}

#[test]
fn bad_files_name_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "id: x\nmodel: {provider: scripted, script: {rules: []}}\nmax_turnz: 3\n",
    )
    .unwrap();
    let err = AgentRegistry::load(dir.path(), true, &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bad.yaml") && err.contains("max_turnz"),
        "{err}"
    );

    std::fs::write(
        &path,
        "id: x\nmodel: {provider: scripted, script: {rules: []}}\ntools:\n  - {name: t, builtin: nope}\n",
    )
    .unwrap();
    let err = AgentRegistry::load(dir.path(), true, &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("tools[0].builtin"), "{err}");

    std::fs::write(
        &path,
        "id: demo\nmodel: {provider: scripted, script: {rules: []}}\n",
    )
    .unwrap();
    let err = AgentRegistry::load(dir.path(), true, &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("already defined"), "{err}");

    std::fs::write(
        &path,
        "id: helper\nmodel: {provider: scripted, script: {rules: [{reply: hi}]}}\n",
    )
    .unwrap();
    let reg = AgentRegistry::load(dir.path(), true, &[]).unwrap();
    assert_eq!(reg.ids(), vec!["demo", "helper"]);
}

#[test]
fn the_example_agents_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/agents");
    let reg = AgentRegistry::load(&dir, true, &[]).unwrap();
    assert_eq!(
        reg.ids(),
        vec!["demo", "local-weather", "local-weather-json"]
    );
    let agent = reg.get("local-weather").unwrap();
    assert!(matches!(
        agent.tool("get_weather").unwrap().kind,
        ToolKind::Http(_)
    ));
    assert!(matches!(
        agent.tool("pick_city").unwrap().kind,
        ToolKind::Ui { .. }
    ));
}
