//! The files a tool's result carries (an MCP server's image, audio or
//! binary resource), kept as files of the chat and named in the logged
//! result by `file_id` instead of their base64 (issue 36): every client
//! that replays the log gets a small envelope, and the bytes once, at
//! `/v1/files/{id}`.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::link::RunLink;

/// `result` with each of its `content` blocks' bytes kept as a file: an
/// `image` or `audio` block's `data`, a `resource` block's `blob`. A kept
/// block keeps its type and `mimeType` and gains `file_id`, `name` and
/// `size`; one that could not be kept becomes a text block saying why.
pub(super) async fn keep_files(link: &RunLink, tool: &str, mut result: Value) -> Value {
    let Some(blocks) = result.get_mut("content").and_then(Value::as_array_mut) else {
        return result;
    };
    for (i, block) in blocks.iter_mut().enumerate() {
        let (data, declared) = match block["type"].as_str() {
            Some("image" | "audio") => (block["data"].as_str(), block["mimeType"].as_str()),
            Some("resource") => (
                block["resource"]["blob"].as_str(),
                block["resource"]["mimeType"].as_str(),
            ),
            _ => continue,
        };
        let Some(data) = data else { continue };
        let declared = declared.map(str::to_owned);
        let name = format!("{tool}-{}.{}", i + 1, extension(declared.as_deref()));
        let kept = match (
            base64::engine::general_purpose::STANDARD.decode(data.trim()),
            link.files(),
        ) {
            (Err(_), _) => Err("its data is not base64".to_owned()),
            (Ok(_), None) => Err("this run keeps no files".to_owned()),
            (Ok(bytes), Some(files)) => files.keep(&name, declared.as_deref(), &bytes).await,
        };
        *block = match kept {
            Ok(file) => {
                let mut kept = block.clone();
                let own = if block["type"] == "resource" {
                    &mut kept["resource"]
                } else {
                    &mut kept
                };
                if let Some(map) = own.as_object_mut() {
                    map.remove("data");
                    map.remove("blob");
                    map.insert("file_id".into(), json!(file.file_id));
                    map.insert("name".into(), json!(file.name));
                    map.insert("size".into(), json!(file.size));
                    map.insert("mimeType".into(), json!(file.media_type));
                }
                kept
            }
            Err(why) => {
                json!({"type": "text", "text": format!("[a file of the result was not kept: {why}]")})
            }
        };
    }
    result
}

/// A file name's extension for a media type (`image/png` → `png`).
fn extension(media_type: Option<&str>) -> String {
    let sub = media_type
        .and_then(|t| t.split('/').nth(1))
        .unwrap_or("bin")
        .split(['+', ';'])
        .next()
        .unwrap_or("bin");
    match sub {
        "jpeg" => "jpg".into(),
        "svg" => "svg".into(),
        s if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()) => s.into(),
        _ => "bin".into(),
    }
}
