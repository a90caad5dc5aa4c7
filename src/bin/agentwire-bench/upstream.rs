//! `upstream`: chats whose agent is served over AG-UI by another server
//! (issue 37), here one this tool runs itself. Each upstream run streams
//! `words` text deltas at `rate` a second, each carrying the moment it left
//! the upstream; a client reading the chat on agentwire's WebSocket takes
//! its receipt minus that moment: what agentwire adds to each event's
//! latency (reading the SSE, checking the event, the log's commit, the
//! delivery) over the upstream's own. The server's CPU per event comes from
//! `/proc`.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use futures_util::future::try_join_all;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::report::{Latencies, cpu_seconds, round};
use crate::scenarios::Target;
use crate::wire::now_ms;

/// The upstream AG-UI server: every POST is a run of `words` deltas, one
/// every `1/rate` seconds, each `<i>@<unix ms> `.
pub async fn serve(port: u16, words: u64, rate: f64) -> anyhow::Result<()> {
    let every = Duration::from_secs_f64(1.0 / rate);
    let app = axum::Router::new().fallback(move || async move {
        let events = run_events(words, every);
        axum::response::Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(events))
            .unwrap()
    });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(())
}

/// One run's SSE body: its start, `words` stamped deltas, its end.
fn run_events(
    words: u64,
    every: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> {
    let event = |v: Value| Ok(Bytes::from(format!("data: {v}\n\n")));
    let head = futures_util::stream::iter([
        event(json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})),
        event(json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})),
    ]);
    let start = tokio::time::Instant::now();
    let body = futures_util::stream::unfold(0, move |i| async move {
        if i >= words {
            return None;
        }
        tokio::time::sleep_until(start + every * u32::try_from(i).unwrap_or(u32::MAX)).await;
        let delta = format!("{i}@{:.3} ", now_ms());
        let e = json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta});
        Some((Ok(Bytes::from(format!("data: {e}\n\n"))), i + 1))
    });
    let tail = futures_util::stream::iter([
        event(json!({"type": "TEXT_MESSAGE_END", "messageId": "m"})),
        event(json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})),
    ]);
    futures_util::StreamExt::chain(futures_util::StreamExt::chain(head, body), tail)
}

/// `chats` chats of `agent` at once (starting spread over one word's
/// interval), each one upstream run.
pub async fn run(t: &Target, agent: &str, chats: usize, rate: f64) -> anyhow::Result<Value> {
    let every = Duration::from_secs_f64(1.0 / rate);
    let mut conns = Vec::with_capacity(chats);
    for _ in 0..chats {
        conns.push(t.connect().await?);
    }
    let cpu_before = t.pid.and_then(cpu_seconds);
    let prints = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks = conns.into_iter().enumerate().map(|(i, mut conn)| {
        let prints = prints.clone();
        let agent = agent.to_owned();
        let offset = every.mul_f64(i as f64 / chats as f64);
        tokio::spawn(async move {
            let mut lat = Latencies::default();
            tokio::time::sleep_until((started + offset).into()).await;
            conn.start_agent(Uuid::new_v4(), &agent, Some("go")).await?;
            loop {
                let (received, v) = conn.recv_value().await?;
                match v["type"].as_str() {
                    Some("chat.print") => {
                        prints.fetch_add(1, Ordering::Relaxed);
                        let sent = v["content"]
                            .as_str()
                            .and_then(|c| c.trim().split_once('@'))
                            .and_then(|(_, ms)| ms.parse::<f64>().ok());
                        if let Some(sent) = sent {
                            lat.push((received - sent).max(0.0));
                        }
                    }
                    Some("chat.run_complete") => break,
                    Some("chat.error") => anyhow::bail!("the run failed: {v}"),
                    _ => {}
                }
            }
            conn.close().await;
            anyhow::Ok(lat)
        })
    });
    let lats = try_join_all(tasks).await?;
    let secs = started.elapsed().as_secs_f64();
    let cpu = t
        .pid
        .and_then(cpu_seconds)
        .zip(cpu_before)
        .map(|(a, b)| a - b);
    let mut latency = Latencies::default();
    for l in lats {
        latency.extend(l?);
    }
    let total = prints.load(Ordering::Relaxed);
    Ok(json!({
        "events": total,
        "seconds": round(secs),
        "events_per_s": (total as f64 / secs).round(),
        "server_cpu_s": cpu.map(round),
        "server_cpu_us_per_event": cpu.filter(|_| total > 0).map(|c| round(c * 1e6 / total as f64)),
        "added_latency_ms": latency.summary(),
    }))
}
