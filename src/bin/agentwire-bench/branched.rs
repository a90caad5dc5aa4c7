//! `branched`: a chat whose conversation is a tree (issue 34). Its turns are
//! `burst:` runs, each regenerated once, so every turn is a point with two
//! versions; then timed, as a reloading client reads it: the active path
//! whole through `GET /v1/chats/{id}/path` (pages of 1000), and the whole
//! log's replay from 0 over the WebSocket (what a client that folds the tree
//! itself reads, as the page does).

use std::time::Instant;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::report::{Latencies, round};
use crate::scenarios::{BURST_EXTRA, Target};

/// The `GET /v1/chats/{id}/path` page size (the route's largest).
const PAGE: u32 = 1000;

/// A chat of about `envelopes` envelopes with `points` branch points, then
/// `repeats` timed reads of each kind.
pub async fn branched(
    t: &Target,
    envelopes: u64,
    points: u64,
    repeats: usize,
) -> anyhow::Result<Value> {
    // Each point: a run and its regenerate, each a burst's prints and the
    // five envelopes around them (the regenerate's chat.branch in place of
    // the user's text).
    let n = (envelopes / (2 * points.max(1)))
        .saturating_sub(BURST_EXTRA)
        .max(1);
    let mut conn = t.connect().await?;
    let chat = Uuid::new_v4();
    let mut last = 0;
    let built = Instant::now();
    for i in 0..points {
        let text = format!("burst: {n}");
        if i == 0 {
            conn.start(chat, Some(&text)).await?;
        } else {
            conn.say(chat, &text).await?;
        }
        let question = last + 1;
        conn.until("chat.run_complete", |r| last = r.seq.unwrap_or(last))
            .await?;
        conn.regenerate(chat, question).await?;
        conn.until("chat.run_complete", |r| last = r.seq.unwrap_or(last))
            .await?;
    }
    let build_s = built.elapsed().as_secs_f64();

    let base = t
        .url
        .strip_prefix("ws://")
        .and_then(|u| u.split('/').next())
        .context("a ws:// url")?;
    // reqwest is built without a default crypto provider (the server
    // installs ring's too); plain HTTP here, but the client wants one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let mut active = Latencies::default();
    let mut path_len = 0;
    for _ in 0..repeats {
        let started = Instant::now();
        let (mut after, mut leaf, mut got) = (0, None::<u64>, 0);
        loop {
            let mut url = format!("http://{base}/v1/chats/{chat}/path?limit={PAGE}&after={after}");
            if let Some(leaf) = leaf {
                url.push_str(&format!("&leaf={leaf}"));
            }
            let page: Value = http
                .get(&url)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            got += page["events"].as_array().map_or(0, Vec::len);
            leaf = page["leaf"].as_u64();
            match page["next_after"].as_u64() {
                Some(next) => after = next,
                None => break,
            }
        }
        active.push(started.elapsed().as_secs_f64() * 1000.0);
        path_len = got;
    }
    if path_len == 0 {
        bail!("the active path read nothing");
    }
    let mut whole = Latencies::default();
    let mut replayed = 0;
    for _ in 0..repeats {
        let started = Instant::now();
        conn.resume(chat, 0).await?;
        replayed = 0;
        conn.until("chat.resume_boundary", |r| replayed += u64::from(r.replay))
            .await?;
        whole.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let branches: Value = http
        .get(format!("http://{base}/v1/chats/{chat}/branches"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(json!({
        "log_envelopes": last,
        "branch_points": branches["points"].as_array().map_or(0, Vec::len),
        "build_s": round(build_s),
        "active_path": {"envelopes": path_len, "ms": active.summary()},
        "whole": {"replayed": replayed, "ms": whole.summary()},
    }))
}
