//! Files (issue 36): a file of MIB MiB uploaded to a chat and downloaded
//! again, REPEATS times, each time other bytes (so no upload is a content
//! the server has): throughput both ways, and the server's memory while a
//! file comes in (sampled from `/proc` every 10 ms), which shows whether an
//! upload is streamed or held.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::report::{Latencies, rss_kib};
use crate::scenarios::Target;

/// The server's HTTP base, from its WebSocket address.
fn base(target: &Target) -> anyhow::Result<String> {
    let rest = target
        .url
        .strip_prefix("ws://")
        .ok_or_else(|| anyhow::anyhow!("--url must be ws://HOST:PORT/v1/ws"))?;
    let host = rest.split('/').next().unwrap_or(rest);
    Ok(format!("http://{host}"))
}

/// A PNG's signature, then `len` random bytes.
fn image(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    let mut rng = StdRng::seed_from_u64(seed);
    bytes.extend((0..len).map(|_| rng.random::<u8>()));
    bytes
}

pub async fn run(target: &Target, mib: u64, repeats: usize) -> anyhow::Result<Value> {
    let base = base(target)?;
    let http = agentwire::llm::http_client();
    let chat = Uuid::new_v4();
    let made = http
        .post(format!("{base}/v1/chats"))
        .json(&json!({"agent": "demo", "chat_id": chat}))
        .send()
        .await?;
    anyhow::ensure!(made.status() == 201, "creating a chat: {}", made.status());
    let len = usize::try_from(mib << 20)?;
    let (mut up, mut down) = (Latencies::default(), Latencies::default());
    let (mut up_rates, mut down_rates) = (Vec::new(), Vec::new());
    let rss_before = target.pid.and_then(rss_kib);
    let mut rss_peak = rss_before;
    for i in 0..repeats {
        let bytes = image(len, i as u64);
        let size = bytes.len() as f64 / f64::from(1 << 20);
        // The server's memory, sampled while the file comes in.
        let pid = target.pid;
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let sampler = tokio::spawn(async move {
            let mut peak = None;
            loop {
                peak = peak.max(pid.and_then(rss_kib));
                tokio::select! {
                    _ = &mut stopped => return peak,
                    () = tokio::time::sleep(Duration::from_millis(10)) => {}
                }
            }
        });
        let started = Instant::now();
        let r = http
            .post(format!("{base}/v1/chats/{chat}/files?name=bench.png"))
            .header("content-type", "image/png")
            .body(bytes)
            .send()
            .await?;
        let took = started.elapsed();
        let _ = stop.send(());
        rss_peak = rss_peak.max(sampler.await?);
        anyhow::ensure!(r.status() == 201, "upload: {}", r.status());
        let file: Value = r.json().await?;
        up.push(took.as_secs_f64() * 1000.0);
        up_rates.push(size / took.as_secs_f64());

        let started = Instant::now();
        let r = http
            .get(format!(
                "{base}/v1/files/{}",
                file["id"].as_str().unwrap_or("")
            ))
            .send()
            .await?;
        anyhow::ensure!(r.status() == 200, "download: {}", r.status());
        let mut got = 0;
        let mut body = r.bytes_stream();
        while let Some(piece) = body.next().await {
            got += piece?.len();
        }
        let took = started.elapsed();
        anyhow::ensure!(got == len + 16, "downloaded {got} bytes");
        down.push(took.as_secs_f64() * 1000.0);
        down_rates.push(size / took.as_secs_f64());
        if !target.quiet {
            eprintln!("file {}/{repeats}: down {took:?}", i + 1);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let mib_of = |kib: Option<u64>| kib.map(|k| k as f64 / 1024.0);
    Ok(json!({
        "upload_mib_s": median(up_rates),
        "download_mib_s": median(down_rates),
        "upload_ms": up.summary(),
        "download_ms": down.summary(),
        "rss_before_mib": mib_of(rss_before),
        "rss_peak_during_upload_mib": mib_of(rss_peak),
    }))
}
