//! Search over a large store (issue 35): CHATS chats of MESSAGES texts each,
//! spread over USERS users, appended through the store as the server does
//! (so the index is written as the log is); then queries of words common,
//! middling and rare, each as a random user, timed at the store. Also what
//! indexing adds to the write path: the same rows appended as `chat.text`
//! (indexed; on PostgreSQL, a commit holding one is a transaction) and as
//! `chat.print` (not indexed), ten to a commit as a run's end logs them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire::store::search::Terms;
use agentwire::store::{AppendBatch, ChatRecord, ChatState, NewEnvelope, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::report::Latencies;

/// Distinct words of the generated texts.
const VOCABULARY: usize = 5000;

/// Chats appended in one commit while seeding.
const CHATS_PER_COMMIT: usize = 20;

/// The what-indexing-costs rows, and their rows per commit.
const WRITE_ROWS: u64 = 20_000;
const WRITE_BATCH: usize = 10;

/// What to build and ask.
pub struct Params {
    pub chats: u64,
    pub messages: u64,
    pub users: u64,
    pub queries: usize,
}

/// A word of the vocabulary: 4 to 9 letters, the same for the same index.
fn word(i: usize) -> String {
    let mut rng = StdRng::seed_from_u64(i as u64 ^ 0x5eed);
    let len = rng.random_range(4..=9);
    (0..len)
        .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
        .collect()
}

/// A word's index, skewed as a language's are: low indices are common.
fn pick(rng: &mut StdRng) -> usize {
    let u: f64 = rng.random();
    ((u * u * u) * VOCABULARY as f64) as usize % VOCABULARY
}

fn text_envelope(chat: Uuid, seq: u64, kind: &'static str, content: &str) -> NewEnvelope {
    let ts = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let agent = if seq % 2 == 1 { "user" } else { "demo" };
    let json = json!({"type": kind, "chat_id": chat, "seq": seq, "ts": ts, "agent": agent, "content": content});
    NewEnvelope {
        seq,
        kind,
        ts_ms: chrono::Utc::now().timestamp_millis(),
        corr: None,
        client_msg_id: None,
        json: json.to_string().into(),
    }
}

fn sentence(rng: &mut StdRng, words: &[String]) -> String {
    let n = rng.random_range(6..=14);
    (0..n)
        .map(|_| words[pick(rng)].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

async fn create(store: &Arc<dyn Store>, owner: String) -> anyhow::Result<Uuid> {
    let now = chrono::Utc::now().timestamp_millis();
    let chat = ChatRecord {
        id: Uuid::new_v4(),
        owner,
        agent: "demo".into(),
        state: ChatState::Idle,
        context: None,
        model: None,
        archived: false,
        conversation_state: None,
        created_at: now,
        updated_at: now,
        listing: Default::default(),
    };
    Ok(store.create_chat(&chat).await?.id)
}

/// Fills the store; returns how long it took.
async fn seed(store: &Arc<dyn Store>, p: &Params, words: &[String]) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(35);
    let mut made = 0;
    while made < p.chats {
        let n = (p.chats - made).min(CHATS_PER_COMMIT as u64);
        let owners: Vec<String> = (made..made + n)
            .map(|i| format!("u{}", i % p.users))
            .collect();
        let ids = futures_util::future::try_join_all(owners.into_iter().map(|o| create(store, o)))
            .await?;
        let batches: Vec<AppendBatch> = ids
            .iter()
            .map(|&chat| AppendBatch {
                chat_id: chat,
                envelopes: (1..=p.messages)
                    .map(|seq| text_envelope(chat, seq, "chat.text", &sentence(&mut rng, words)))
                    .collect(),
                state: None,
                conversation_state: None,
                fence: None,
            })
            .collect();
        store.append(&batches).await?;
        made += n;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Rows/s and per-commit latency of appending `kind` rows.
async fn write_path(
    store: &Arc<dyn Store>,
    kind: &'static str,
    words: &[String],
) -> anyhow::Result<Value> {
    let chat = create(store, "writer".into()).await?;
    let mut rng = StdRng::seed_from_u64(7);
    let mut commits = Latencies::default();
    let started = Instant::now();
    let mut seq = 1;
    while seq <= WRITE_ROWS {
        let end = (seq + WRITE_BATCH as u64 - 1).min(WRITE_ROWS);
        let batch = AppendBatch {
            chat_id: chat,
            envelopes: (seq..=end)
                .map(|s| text_envelope(chat, s, kind, &sentence(&mut rng, words)))
                .collect(),
            state: None,
            conversation_state: None,
            fence: None,
        };
        let at = Instant::now();
        store.append(std::slice::from_ref(&batch)).await?;
        commits.push(at.elapsed().as_secs_f64() * 1000.0);
        seq = end + 1;
    }
    let per_s = WRITE_ROWS as f64 / started.elapsed().as_secs_f64();
    Ok(json!({"rows_per_s": per_s.round(), "commit_ms": commits.summary()}))
}

/// Seeds, asks, and measures the write path.
pub async fn run(url: &str, p: &Params) -> anyhow::Result<Value> {
    let store = crate::storage::open(url).await?;
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    let seed_s = seed(&store, p, &words).await?;
    let mut rng = StdRng::seed_from_u64(99);
    let classes: [(&str, std::ops::Range<usize>, usize); 4] = [
        ("common", 0..10, 1),
        ("middling", 200..400, 1),
        ("rare", 3000..5000, 1),
        ("two_words", 0..400, 2),
    ];
    let mut by_class = serde_json::Map::new();
    let mut all = Latencies::default();
    let mut hits = 0usize;
    for (name, range, n) in classes {
        let mut lat = Latencies::default();
        for _ in 0..p.queries / 4 {
            let q: Vec<&str> = (0..n)
                .map(|_| words[rng.random_range(range.clone())].as_str())
                .collect();
            let terms = Terms::parse(&q.join(" ")).map_err(anyhow::Error::msg)?;
            let Some(terms) = terms else { continue };
            let owner = format!("u{}", rng.random_range(0..p.users));
            let at = Instant::now();
            let found = store
                .search_chats(&owner, &terms, false, 20, Duration::from_secs(2))
                .await?;
            let ms = at.elapsed().as_secs_f64() * 1000.0;
            hits += found.len();
            lat.push(ms);
            all.push(ms);
        }
        by_class.insert(name.into(), lat.summary());
    }
    let indexed = write_path(&store, "chat.text", &words).await?;
    let plain = write_path(&store, "chat.print", &words).await?;
    Ok(json!({
        "seed_s": crate::report::round(seed_s),
        "search_ms": all.summary(),
        "search_ms_by_class": by_class,
        "mean_hits": crate::report::round(hits as f64 / p.queries.max(1) as f64),
        "write_indexed": indexed,
        "write_unindexed": plain,
    }))
}
