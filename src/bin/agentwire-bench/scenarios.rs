//! The scenarios. Each drives a running server over loopback with real
//! WebSocket connections and returns its figures as JSON.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::future::try_join_all;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use uuid::Uuid;

use crate::report::{Latencies, Progress, cpu_seconds, round, rss_kib};
use crate::wire::{Conn, Protocol};

/// Envelopes a `burst: N` run logs besides its N prints: the user's text,
/// `select_speaker`, the reply's text, `usage_summary`, `run_complete`.
pub const BURST_EXTRA: u64 = 5;
/// Connections opened at once.
const CONNECT_CONCURRENCY: usize = 128;

/// Where and how to reach the server.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub protocol: Protocol,
    /// The server's pid, for CPU time and memory (`/proc`).
    pub pid: Option<u32>,
    pub quiet: bool,
}

impl Target {
    /// The server's CPU seconds since `before` (a reading of `cpu_seconds`).
    fn cpu_since(&self, before: Option<f64>) -> Option<f64> {
        self.pid
            .and_then(cpu_seconds)
            .zip(before)
            .map(|(a, b)| a - b)
    }

    pub(crate) async fn connect(&self) -> anyhow::Result<Conn> {
        Conn::connect(&self.url, self.protocol).await
    }

    /// `n` connections, opened `CONNECT_CONCURRENCY` at a time.
    async fn connect_many(&self, n: usize) -> anyhow::Result<Vec<Conn>> {
        let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
        let opened = Arc::new(AtomicU64::new(0));
        let mut progress = Progress::new(self.quiet || n < 500);
        let tasks = (0..n).map(|_| {
            let (gate, opened, target) = (gate.clone(), opened.clone(), self.clone());
            tokio::spawn(async move {
                let _permit = gate.acquire().await?;
                let conn = target.connect().await;
                opened.fetch_add(1, Ordering::Relaxed);
                conn
            })
        });
        let all = futures_util::future::join_all(tasks);
        tokio::pin!(all);
        loop {
            tokio::select! {
                done = &mut all => {
                    progress.done();
                    return done.into_iter().map(|r| r?).collect();
                }
                () = tokio::time::sleep(Duration::from_millis(250)) => {
                    progress.tick(|| format!("connecting: {}/{n}", opened.load(Ordering::Relaxed)));
                }
            }
        }
    }
}

/// The interval between a paced (`slow:`) chat's words.
const PACED_WORD: Duration = Duration::from_millis(20);

/// `stream`: `chats` connections, each starting a chat that runs `burst: n`
/// (or, `paced`, `slow: n`: a word every 20 ms, 50 envelopes/s per chat).
///
/// Paced chats start spread evenly over one word's interval, as independent
/// agents would: the offered rate is then steady, not every chat's word in the
/// same millisecond (that shape is a burst every 20 ms, measured by `burst:`).
pub async fn stream(t: &Target, chats: usize, n: u64, paced: bool) -> anyhow::Result<Value> {
    let word = if paced { "slow" } else { "burst" };
    let conns = t.connect_many(chats).await?;
    let cpu_before = t.pid.and_then(cpu_seconds);
    let delivered = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks = conns.into_iter().enumerate().map(|(i, mut conn)| {
        let delivered = delivered.clone();
        let offset = if paced {
            PACED_WORD * u32::try_from(i).unwrap_or(u32::MAX) / u32::try_from(chats).unwrap_or(1)
        } else {
            Duration::ZERO
        };
        tokio::spawn(async move {
            let mut lat = Latencies::default();
            let chat = Uuid::new_v4();
            tokio::time::sleep_until((started + offset).into()).await;
            conn.start(chat, Some(&format!("{word}: {n}"))).await?;
            read_run(&mut conn, &delivered, &mut lat).await?;
            conn.close().await;
            anyhow::Ok(lat)
        })
    });
    let all = try_join_all(tasks);
    let lats = watch(
        t,
        all,
        &delivered,
        chats as u64 * (n + BURST_EXTRA),
        "envelopes",
    )
    .await?;
    let secs = started.elapsed().as_secs_f64();
    let cpu = t.cpu_since(cpu_before);
    let mut latency = Latencies::default();
    for l in lats {
        latency.extend(l?);
    }
    let total = delivered.load(Ordering::Relaxed);
    Ok(json!({
        "envelopes": total,
        "seconds": round(secs),
        "envelopes_per_s": (total as f64 / secs).round(),
        "server_cpu_s": cpu.map(round),
        "envelopes_per_server_cpu_s": cpu.filter(|c| *c > 0.0).map(|c| (total as f64 / c).round()),
        "latency_ms": latency.summary(),
    }))
}

/// Reads a run to its `chat.run_complete`, counting its envelopes in
/// `delivered` and their latencies in `lat`.
async fn read_run(
    conn: &mut Conn,
    delivered: &AtomicU64,
    lat: &mut Latencies,
) -> anyhow::Result<()> {
    conn.until("chat.run_complete", |r| {
        if r.seq.is_some() {
            delivered.fetch_add(1, Ordering::Relaxed);
            if let Some(ms) = r.latency_ms {
                lat.push(ms);
            }
        }
    })
    .await
}

/// Awaits `all`, printing how far `count` got towards `expected`.
async fn watch<T>(
    t: &Target,
    all: impl Future<Output = Result<T, tokio::task::JoinError>>,
    count: &AtomicU64,
    expected: u64,
    what: &str,
) -> anyhow::Result<T> {
    let mut progress = Progress::new(t.quiet);
    tokio::pin!(all);
    loop {
        tokio::select! {
            done = &mut all => {
                progress.done();
                return Ok(done?);
            }
            () = tokio::time::sleep(Duration::from_millis(250)) => {
                progress.tick(|| format!("{what}: {}/{expected}", count.load(Ordering::Relaxed)));
            }
        }
    }
}

/// `fanout`: `subscribers` connections on one chat, one `burst: n` run.
pub async fn fanout(t: &Target, subscribers: usize, n: u64) -> anyhow::Result<Value> {
    let mut conns = t.connect_many(subscribers.max(1)).await?;
    let chat = Uuid::new_v4();
    // The first connection creates the chat; everyone then subscribes.
    conns[0].start(chat, None).await?;
    conns[0].ping().await?;
    let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
    let joined = conns.into_iter().map(|mut c| {
        let gate = gate.clone();
        tokio::spawn(async move {
            let _permit = gate.acquire().await?;
            c.resume(chat, 0).await?;
            c.until("chat.resume_boundary", |_| {}).await?;
            anyhow::Ok(c)
        })
    });
    let mut conns: Vec<Conn> = try_join_all(joined)
        .await?
        .into_iter()
        .collect::<Result<_, _>>()?;
    let mut driver = conns.pop().context("at least one subscriber")?;
    let cpu_before = t.pid.and_then(cpu_seconds);
    let delivered = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    driver.say(chat, &format!("burst: {n}")).await?;
    conns.push(driver);
    let tasks = conns.into_iter().map(|mut conn| {
        let delivered = delivered.clone();
        tokio::spawn(async move {
            let mut lat = Latencies::default();
            read_run(&mut conn, &delivered, &mut lat).await?;
            let last = started.elapsed().as_secs_f64();
            conn.close().await;
            anyhow::Ok((lat, last))
        })
    });
    let expected = subscribers as u64 * (n + BURST_EXTRA);
    let results = watch(t, try_join_all(tasks), &delivered, expected, "delivered").await?;
    let secs = started.elapsed().as_secs_f64();
    let cpu = t.cpu_since(cpu_before);
    let mut all = Latencies::default();
    let mut p50s = Vec::new();
    let mut finish = Vec::new();
    for r in results {
        let (mut lat, last) = r?;
        p50s.push(lat.summary()["p50"].as_f64().unwrap_or(0.0));
        finish.push(last);
        all.extend(lat);
    }
    p50s.sort_by(f64::total_cmp);
    finish.sort_by(f64::total_cmp);
    let total = delivered.load(Ordering::Relaxed);
    Ok(json!({
        "delivered": total,
        "seconds": round(secs),
        "delivered_per_s": (total as f64 / secs).round(),
        "server_cpu_s": cpu.map(round),
        "latency_ms": all.summary(),
        "subscriber_p50_ms": {"min": p50s.first(), "max": p50s.last()},
        "subscriber_done_s": {"first": finish.first().copied().map(round), "last": finish.last().copied().map(round)},
    }))
}

/// `resume`: a chat of `envelopes` envelopes, then `repeats` resumes from 0
/// and from 100 before the end, timed to their `chat.resume_boundary`.
pub async fn resume(t: &Target, envelopes: u64, repeats: usize) -> anyhow::Result<Value> {
    let n = envelopes.saturating_sub(BURST_EXTRA).max(1);
    let mut conn = t.connect().await?;
    let chat = Uuid::new_v4();
    let mut last = 0;
    let built = Instant::now();
    conn.start(chat, Some(&format!("burst: {n}"))).await?;
    conn.until("chat.run_complete", |r| last = r.seq.unwrap_or(last))
        .await?;
    let build_s = built.elapsed().as_secs_f64();
    let mut time = async |after: u64| -> anyhow::Result<(Latencies, u64)> {
        let mut lat = Latencies::default();
        let mut count = 0;
        for _ in 0..repeats {
            let started = Instant::now();
            conn.resume(chat, after).await?;
            count = 0;
            conn.until("chat.resume_boundary", |r| count += u64::from(r.replay))
                .await?;
            lat.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        Ok((lat, count))
    };
    let (mut whole, replayed) = time(0).await?;
    let (mut tail, tail_replayed) = time(last.saturating_sub(100)).await?;
    Ok(json!({
        "log_envelopes": last,
        "build_s": round(build_s),
        "whole": {"replayed": replayed, "ms": whole.summary()},
        "last_100": {"replayed": tail_replayed, "ms": tail.summary()},
    }))
}

/// `idle`: `connections` connections, each subscribed to a chat of its own,
/// doing nothing; the server's memory per connection.
pub async fn idle(t: &Target, connections: usize, settle: Duration) -> anyhow::Result<Value> {
    let rss_before = t.pid.and_then(rss_kib);
    let mut conns = t.connect_many(connections).await?;
    let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
    let subscribed = conns.drain(..).map(|mut c| {
        let gate = gate.clone();
        tokio::spawn(async move {
            let _permit = gate.acquire().await?;
            c.start(Uuid::new_v4(), None).await?;
            c.ping().await?;
            anyhow::Ok(c)
        })
    });
    let conns: Vec<Conn> = try_join_all(subscribed)
        .await?
        .into_iter()
        .collect::<Result<_, _>>()?;
    tokio::time::sleep(settle).await;
    let rss_after = t.pid.and_then(rss_kib);
    let asleep = chats_asleep(t).await;
    let per_conn = rss_before
        .zip(rss_after)
        .map(|(b, a)| round(a.saturating_sub(b) as f64 / connections.max(1) as f64));
    let open = conns.len();
    for c in conns {
        c.close().await;
    }
    Ok(json!({
        "open": open,
        "server_rss_kib": {"before": rss_before, "after": rss_after},
        "server_kib_per_connection": per_conn,
        "chats_asleep": asleep,
    }))
}

/// How many chats an agentwire server holds asleep (followed, with no actor:
/// `agentwire_chats_sleeping` on its `/metrics`); `None` for another server.
async fn chats_asleep(t: &Target) -> Option<u64> {
    if t.protocol != Protocol::Agentwire {
        return None;
    }
    let base = t.url.strip_prefix("ws://")?.split('/').next()?;
    // reqwest is built without a default crypto provider (the server
    // installs ring's too); plain HTTP here, but the client wants one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let text = reqwest::get(format!("http://{base}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("agentwire_chats_sleeping "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// `mixed`: for `duration`, most connections idle, some streaming
/// `burst: n` turns back to back, some dropping and resuming.
pub async fn mixed(
    t: &Target,
    connections: usize,
    duration: Duration,
    n: u64,
) -> anyhow::Result<Value> {
    let streaming = (connections * 15 / 100).max(1);
    let reconnecting = (connections * 5 / 100).max(1);
    let idle = connections.saturating_sub(streaming + reconnecting);
    let mut idle_conns = t.connect_many(idle).await?;
    for c in &mut idle_conns {
        c.start(Uuid::new_v4(), None).await?;
    }
    let deadline = Instant::now() + duration;
    let delivered = Arc::new(AtomicU64::new(0));
    let cpu_before = t.pid.and_then(cpu_seconds);
    let streams = (0..streaming).map(|_| {
        let (t, delivered) = (t.clone(), delivered.clone());
        tokio::spawn(async move {
            let mut conn = t.connect().await?;
            let chat = Uuid::new_v4();
            let mut lat = Latencies::default();
            let mut turns = 0u64;
            conn.start(chat, None).await?;
            while Instant::now() < deadline {
                conn.say(chat, &format!("burst: {n}")).await?;
                read_run(&mut conn, &delivered, &mut lat).await?;
                turns += 1;
            }
            conn.close().await;
            anyhow::Ok((lat, turns))
        })
    });
    let reconnects = (0..reconnecting).map(|_| {
        let t = t.clone();
        tokio::spawn(async move {
            let chat = Uuid::new_v4();
            let mut conn = t.connect().await?;
            conn.start(chat, Some("hello")).await?;
            let mut last = 0;
            conn.until("chat.run_complete", |r| last = r.seq.unwrap_or(last))
                .await?;
            let mut lat = Latencies::default();
            let mut count = 0u64;
            while Instant::now() < deadline {
                conn.close().await;
                let started = Instant::now();
                conn = t.connect().await?;
                conn.resume(chat, last).await?;
                conn.until("chat.resume_boundary", |_| {}).await?;
                lat.push(started.elapsed().as_secs_f64() * 1000.0);
                count += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            conn.close().await;
            anyhow::Ok((lat, count))
        })
    });
    let (streams, reconnects) = tokio::join!(
        watch(
            t,
            try_join_all(streams),
            &delivered,
            0,
            "mixed: envelopes delivered (of ∞)"
        ),
        try_join_all(reconnects)
    );
    let cpu = t.cpu_since(cpu_before);
    let (mut lat, mut turns) = (Latencies::default(), 0);
    for r in streams? {
        let (l, n) = r?;
        lat.extend(l);
        turns += n;
    }
    let (mut resume_lat, mut resumes) = (Latencies::default(), 0);
    for r in reconnects? {
        let (l, n) = r?;
        resume_lat.extend(l);
        resumes += n;
    }
    for c in idle_conns {
        c.close().await;
    }
    let secs = duration.as_secs_f64();
    let total = delivered.load(Ordering::Relaxed);
    Ok(json!({
        "idle": idle, "streaming": streaming, "reconnecting": reconnecting,
        "envelopes": total,
        "envelopes_per_s": (total as f64 / secs).round(),
        "turns": turns,
        "server_cpu_s": cpu.map(round),
        "latency_ms": lat.summary(),
        "resumes": resumes,
        "reconnect_resume_ms": resume_lat.summary(),
    }))
}
