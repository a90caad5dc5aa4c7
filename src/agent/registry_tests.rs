use super::*;
use crate::tools::ToolKind;

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
    // The YAML reader's snippet names the file too, not `<input>`.
    assert!(!err.contains("<input>"), "{err}");
    assert!(err.matches("bad.yaml").count() >= 2, "{err}");

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

    for (quota, field) in [
        ("{cost_per_day: -1}", "quota.cost_per_day"),
        ("{tokens_per_week: 5}", "tokens_per_week"),
    ] {
        std::fs::write(
            &path,
            format!(
                "id: x\nmodel: {{provider: scripted, script: {{rules: []}}}}\nquota: {quota}\n"
            ),
        )
        .unwrap();
        let err = AgentRegistry::load(dir.path(), true, &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{err}");
    }

    std::fs::write(
        &path,
        "id: helper\nmodel: {provider: scripted, script: {rules: [{reply: hi}]}}\n",
    )
    .unwrap();
    let reg = AgentRegistry::load(dir.path(), true, &[]).unwrap();
    assert_eq!(reg.ids(), vec!["demo", "helper"]);
}

#[tokio::test]
async fn the_example_agents_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/agents");
    let reg = AgentRegistry::load(&dir, true, &[]).unwrap();
    assert_eq!(
        reg.ids(),
        vec![
            "anthropic-assistant",
            "arithmetic-quiz",
            "capitals-quiz",
            "critic",
            "data-analyst",
            "demo",
            "editorial",
            "gemini-assistant",
            "local-weather",
            "local-weather-json",
            "mcp-toolbox",
            "ollama-assistant",
            "research-team",
            "research-team-local",
            "review-panel",
            "support-desk",
            "triage-desk"
        ]
    );
    let flows: Vec<&str> = reg.workflows().all().map(|w| w.id.as_str()).collect();
    assert_eq!(flows, ["batch-job", "summarize", "weather-report"]);
    let team = reg.get("research-team").unwrap();
    let group = team.group.as_ref().unwrap();
    assert_eq!(group.members.len(), 3);
    assert_eq!(group.members[1].agent.tools[0].name, "get_weather");
    let generated = reg
        .get("arithmetic-quiz")
        .unwrap()
        .template
        .clone()
        .unwrap();
    assert!(generated.provide_feedback);
    assert_eq!(generated.skills.len(), 2);
    let quiz = reg.get("capitals-quiz").unwrap();
    assert!(quiz.starts_first);
    assert_eq!(quiz.template.as_ref().unwrap().questions(), 3);
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

#[test]
fn a_bad_template_stops_start_up_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiz.yaml");
    std::fs::write(
        &path,
        "id: quiz\nagent_starts_first: true\nmodel: {provider: scripted, script: {rules: []}}\n\
         template:\n  items:\n    - contents:\n        - {widget_type: multiple_choice, stem: Q, options: [a, b], correct_answer: c}\n",
    )
    .unwrap();
    let err = AgentRegistry::load(dir.path(), true, &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("quiz.yaml")
            && err.contains("template.items[0].contents[0].correct_answer: `c` is not an option"),
        "{err}"
    );

    // A static one loads.
    std::fs::write(
        &path,
        "id: quiz\nagent_starts_first: true\nmodel: {provider: scripted, script: {rules: []}}\n\
         template:\n  items:\n    - contents:\n        - {widget_type: message, stem: Hello}\n",
    )
    .unwrap();
    let reg = AgentRegistry::load(dir.path(), true, &[]).unwrap();
    assert_eq!(
        reg.get("quiz")
            .unwrap()
            .template
            .as_ref()
            .unwrap()
            .items
            .len(),
        1
    );
}

#[test]
fn a_bad_workflow_file_stops_start_up_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let flows = dir.path().join("workflows");
    std::fs::create_dir_all(&flows).unwrap();
    std::fs::write(flows.join("a.yaml"), "id: a\nprompt: hi\n").unwrap();
    std::fs::write(flows.join("b.yaml"), "id: a\nprompt: hi again\n").unwrap();
    let err = AgentRegistry::load(dir.path(), true, &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("b.yaml") && err.contains("id: `a` is already defined"),
        "{err}"
    );
    std::fs::write(flows.join("b.yaml"), "id: b\nprompt: x\nparamters: {}\n").unwrap();
    let err = AgentRegistry::load(dir.path(), true, &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("b.yaml") && err.contains("paramters"), "{err}");
    // A typo in a placeholder stops start-up too, naming the workflow file.
    std::fs::write(
        flows.join("b.yaml"),
        "id: b\nparameters: {type: object, properties: {topic: {type: string}}}\nprompt: \"On {topik}\"\n",
    )
    .unwrap();
    let err = AgentRegistry::load(dir.path(), true, &[])
        .unwrap_err()
        .to_string();
    let file = flows.join("b.yaml").display().to_string();
    assert!(
        err.starts_with(&format!("workflow file {file}: prompt: `{{topik}}`")),
        "{err}"
    );
    std::fs::remove_file(flows.join("b.yaml")).unwrap();
    let reg = AgentRegistry::load(dir.path(), true, &[]).unwrap();
    assert_eq!(reg.workflows().get("a").unwrap().title, "a");
}

#[tokio::test]
async fn mcp_servers_are_read_in_the_shapes_other_hosts_write() {
    use crate::agent::definition::AgentFile;
    let read = |yaml: &str| {
        let file: AgentFile = serde_saphyr::from_str(yaml).unwrap();
        file.mcp_servers
            .into_iter()
            .map(|s| s.nested())
            .collect::<Result<Vec<_>, _>>()
    };
    // Claude Desktop's map by name, flat; VS Code's `type`.
    let servers = read(
        "id: a\nmcp_servers:\n  files: {command: npx, args: [-y, server-files], env: {ROOT: /tmp}}\n  \
         remote: {type: http, url: \"https://mcp.example/mcp\", headers: {X-Key: k}}\n",
    )
    .unwrap();
    assert_eq!(servers[0].name, "files");
    let stdio = servers[0].stdio.as_ref().unwrap();
    assert_eq!((stdio.command.as_str(), stdio.args.len()), ("npx", 2));
    assert_eq!(stdio.env["ROOT"], "/tmp");
    assert_eq!(servers[1].name, "remote");
    assert_eq!(servers[1].http.as_ref().unwrap().headers["X-Key"], "k");
    // agentwire's own nested list reads as it is.
    let servers =
        read("id: a\nmcp_servers:\n  - {name: box, stdio: {command: python3}}\n").unwrap();
    assert_eq!(servers[0].stdio.as_ref().unwrap().command, "python3");
    // Mixed or contradicting shapes are refused, saying why.
    let err =
        read("id: a\nmcp_servers:\n  - {name: b, command: x, stdio: {command: y}}\n").unwrap_err();
    assert!(err.contains("not both"), "{err}");
    let err =
        read("id: a\nmcp_servers:\n  - {name: b, type: stdio, url: \"http://x\"}\n").unwrap_err();
    assert!(err.contains("type `stdio`"), "{err}");
    let err =
        read("id: a\nmcp_servers:\n  - {name: b, url: \"http://x\", args: [a]}\n").unwrap_err();
    assert!(
        err.contains("args, env, envFile and cwd go with `command`"),
        "{err}"
    );
    // An unknown field is named (the map form too).
    let err = serde_saphyr::from_str::<AgentFile>("id: a\nmcp_servers:\n  x: {comand: y}\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("comand"), "{err}");
}

#[tokio::test]
async fn mcp_entries_pasted_from_other_hosts_start_or_say_why_not() {
    use crate::agent::definition::AgentFile;
    let file = |yaml: &str| serde_saphyr::from_str::<AgentFile>(yaml);
    // Claude Desktop's and VS Code's `disabled`, Cline's `autoApprove`,
    // VS Code's `envFile` and its `inputs` next to the servers: read.
    let servers = file(
        "id: a\nmcp_servers:\n  off: {command: x, disabled: true}\n  \
         on: {command: y, autoApprove: [add], envFile: .env}\n  \
         inputs: [{id: key, type: promptString, password: true}]\n",
    )
    .unwrap()
    .mcp_servers;
    assert_eq!(servers.len(), 2, "inputs is no server");
    assert!(servers[0].disabled && !servers[1].disabled);
    assert_eq!(
        servers[1].auto_approve.as_deref(),
        Some(&["add".to_owned()][..])
    );
    let on = servers[1].clone().nested().unwrap();
    assert_eq!(on.stdio.unwrap().env_file.as_deref(), Some(".env"));
    // A list under any other name is no server.
    let err = file("id: a\nmcp_servers:\n  box: [a]\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("mcp_servers.box"), "{err}");
    // The legacy SSE transport is named as not supported.
    let sse = file("id: a\nmcp_servers:\n  old: {type: sse, url: \"http://x/sse\"}\n").unwrap();
    let err = sse.mcp_servers[0].clone().nested().unwrap_err();
    assert!(
        err.contains("legacy HTTP+SSE transport") && err.contains("not supported"),
        "{err}"
    );

    // A disabled server is not started (nor checked: its command may be
    // missing here); the agent loads with the others.
    let model = "model: {provider: scripted, script: {rules: []}}\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        format!("id: a\n{model}mcp_servers:\n  off: {{command: \"\", disabled: true}}\n"),
    )
    .unwrap();
    let reg = AgentRegistry::load(dir.path(), true, &[]).unwrap();
    assert!(reg.get("a").unwrap().mcp.is_empty());
}

#[tokio::test]
async fn a_secret_named_by_env_must_be_set_and_the_error_names_file_server_and_variable() {
    let dir = tempfile::tempdir().unwrap();
    let model = "model: {provider: scripted, script: {rules: []}}\n";
    for (file, entry) in [
        (
            "stdio.yaml",
            "box: {command: x, env: {TOKEN: \"${env:AGENTWIRE_TEST_SURELY_UNSET}\"}}",
        ),
        (
            "http.yaml",
            "box: {url: \"http://127.0.0.1:9/mcp\", headers: {Authorization: \"Bearer ${env:AGENTWIRE_TEST_SURELY_UNSET}\"}}",
        ),
    ] {
        std::fs::write(
            dir.path().join(file),
            format!("id: a\n{model}mcp_servers:\n  {entry}\n"),
        )
        .unwrap();
        let err = AgentRegistry::load(dir.path(), true, &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(file)
                && err.contains("`box`")
                && err.contains("AGENTWIRE_TEST_SURELY_UNSET"),
            "{err}"
        );
        std::fs::remove_file(dir.path().join(file)).unwrap();
    }
}
