use super::*;

#[test]
fn parses_each_type() {
    let id = Uuid::new_v4();
    let start =
        format!(r#"{{"type":"chat.start","chat_id":"{id}","agent":"demo","message":"hi"}}"#);
    assert_eq!(
        parse_client_frame(&start).unwrap(),
        ClientFrame::ChatStart {
            chat_id: id,
            agent: "demo".into(),
            message: Some("hi".into()),
            context: None,
            attachments: Vec::new(),
        }
    );
    let resume = format!(r#"{{"type":"client.resume","chat_id":"{id}","lastClientIndex":7}}"#);
    assert_eq!(
        parse_client_frame(&resume).unwrap(),
        ClientFrame::ClientResume {
            chat_id: id,
            last_client_index: Some(7)
        }
    );
    assert_eq!(
        parse_client_frame(r#"{"type":"ping"}"#).unwrap(),
        ClientFrame::Ping
    );
}

#[test]
fn refuses_bad_input_with_details() {
    let err = parse_client_frame("{not json").unwrap_err();
    assert!(err.message.contains("not valid JSON"));
    assert_eq!(err.chat_id, None);

    let err = parse_client_frame("[1,2]").unwrap_err();
    assert!(err.message.contains("JSON object"));

    let err = parse_client_frame(r#"{"type":"nope"}"#).unwrap_err();
    assert!(err.message.contains("unknown message type"));

    let id = Uuid::new_v4();
    let err =
        parse_client_frame(&format!(r#"{{"type":"user.message","chat_id":"{id}"}}"#)).unwrap_err();
    assert_eq!(err.chat_id, Some(id), "a readable chat id is kept");
    assert!(err.message.contains("text"), "{}", err.message);

    let err = parse_client_frame(&format!(
        r#"{{"type":"user.message","chat_id":"{id}","text":42}}"#
    ))
    .unwrap_err();
    assert!(err.details.unwrap()["errors"][0]["path"] == "/text");

    let err = parse_client_frame(r#"{"type":"chat.cancel","chat_id":"abc"}"#).unwrap_err();
    assert_eq!(err.chat_id, None);
    assert!(err.message.contains("chat_id"), "{}", err.message);
}

#[test]
fn too_deep_is_refused_before_anything_else() {
    let id = Uuid::new_v4();
    let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    // 62 levels under `data` (63 with the message itself): accepted.
    let ok = format!(
        r#"{{"type":"inline_component.result","chat_id":"{id}","corr":"c","data":{}}}"#,
        deep(limits::MAX_JSON_DEPTH - 1)
    );
    assert!(parse_client_frame(&ok).is_ok());
    let bad = format!(
        r#"{{"type":"inline_component.result","chat_id":"{id}","corr":"c","data":{}}}"#,
        deep(limits::MAX_JSON_DEPTH)
    );
    let e = parse_client_frame(&bad).unwrap_err();
    assert_eq!(e.chat_id, Some(id));
    assert!(e.message.contains("levels deep"), "{}", e.message);
}
