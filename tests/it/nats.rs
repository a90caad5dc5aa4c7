//! Several nodes whose commit notices travel on NATS (issue 42): a node
//! hears only the chats its own clients follow; NATS restarted under load
//! loses and doubles nothing; a node cut off from NATS (not from
//! PostgreSQL) still serves its clients, from the store; forwarded
//! requests go as sealed NATS requests, and one replayed or forged by
//! another NATS client does nothing.
//!
//! Needs Debian's `nats-server` (or `AGENTWIRE_NATS_SERVER`); skipped with
//! a message without it, unless `AGENTWIRE_REQUIRE_NATS=1` (`.ci/run`).
//! With `AGENTWIRE_TEST_CLUSTER_BUS=nats`, every node of the cluster tests
//! runs on one NATS server too ([`cluster_nats_url`]: `.ci/run`'s NATS pass).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use crate::cluster::{cluster_database, replay_all};
use crate::support::*;

/// The `nats-server` binary, if there is one.
fn nats_bin() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("AGENTWIRE_NATS_SERVER") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

/// The binary, or `None` (after a message) when none is required.
fn required_bin() -> Option<PathBuf> {
    let found = nats_bin();
    if found.is_none() {
        let required = std::env::var("AGENTWIRE_REQUIRE_NATS").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "AGENTWIRE_REQUIRE_NATS=1 but no nats-server was found"
        );
        eprintln!("note: no nats-server found: skipping the NATS tests");
    }
    found
}

/// One NATS server on a port of its own, killed when dropped.
struct NatsServer {
    bin: PathBuf,
    port: u16,
    child: Option<tokio::process::Child>,
}

impl NatsServer {
    async fn start(bin: PathBuf) -> Self {
        let port = free_addr().port();
        let mut server = Self {
            bin,
            port,
            child: None,
        };
        server.up().await;
        server
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again, on the same port).
    async fn up(&mut self) {
        let child = tokio::process::Command::new(&self.bin)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start nats-server");
        self.child = Some(child);
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("nats-server did not start");
    }

    /// Kills the server (SIGKILL: what it had in flight is lost).
    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.unwrap();
        }
    }
}

/// The NATS server every cluster node of this test process uses in the
/// cluster suite's NATS pass (`AGENTWIRE_TEST_CLUSTER_BUS=nats`), started
/// once, under a watchdog that stops it when the process is gone.
pub fn cluster_nats_url() -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    URL.get_or_init(|| {
        if std::env::var("AGENTWIRE_TEST_CLUSTER_BUS").ok()? != "nats" {
            return None;
        }
        let bin = nats_bin().expect("AGENTWIRE_TEST_CLUSTER_BUS=nats needs nats-server");
        let port = free_addr().port();
        let watchdog = format!(
            "'{}' -a 127.0.0.1 -p {port} >/dev/null 2>&1 & n=$!; \
             while kill -0 {} 2>/dev/null; do sleep 1; done; kill $n",
            bin.display(),
            std::process::id()
        );
        // The watchdog shell outlives this call and ends with the process.
        #[allow(clippy::zombie_processes)]
        std::process::Command::new("sh")
            .args(["-c", &watchdog])
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("start nats-server");
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(format!("nats://127.0.0.1:{port}"));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("nats-server did not start");
    })
    .clone()
}

/// A database for a cluster and the `nats-server` binary, or `None` when
/// this pass skips these tests.
async fn prerequisites() -> Option<(String, PathBuf)> {
    let url = cluster_database().await?;
    Some((url, required_bin()?))
}

/// Two nodes (the real binary) on `url`, their notices on `nats_a` and
/// `nats_b`, a client on each; killed when `nodes` is dropped (bind it).
struct Two {
    a: SocketAddr,
    b: SocketAddr,
    ca: Client,
    cb: Client,
    /// The processes: dropping them kills the nodes.
    nodes: Vec<(tokio::process::Child, tempfile::TempDir)>,
}

async fn two_nodes(url: &str, nats_a: &str, nats_b: &str) -> Two {
    let mut nodes = Vec::new();
    let mut addrs = Vec::new();
    for nats in [nats_a, nats_b] {
        let agents = tempfile::tempdir().unwrap();
        let (child, addr) = spawn_agentwire(url, agents.path(), &["--nats-url", nats]).await;
        nodes.push((child, agents));
        addrs.push(addr);
    }
    Two {
        a: addrs[0],
        b: addrs[1],
        ca: Client::connect(&format!("ws://{}/v1/ws", addrs[0])).await,
        cb: Client::connect(&format!("ws://{}/v1/ws", addrs[1])).await,
        nodes,
    }
}

/// A counter of the node's `/metrics` with one label, 0 if absent.
async fn counter(addr: SocketAddr, name: &str, label: &str, value: &str) -> f64 {
    let (_, text) = http_get(addr, "/metrics", &[]).await;
    let key = format!("{name}{{{label}=\"{value}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// Commit notices the node received, by `via`.
async fn notices(addr: SocketAddr, via: &str) -> f64 {
    counter(addr, "agentwire_cluster_notices_total", "via", via).await
}

/// Requests the node forwarded, by `via`.
async fn commands(addr: SocketAddr, via: &str) -> f64 {
    counter(addr, "agentwire_cluster_commands_total", "via", via).await
}

/// Starts `chat` on `owner`'s node and has `follower` follow it from its
/// start (checked to be the same); the first turn's envelopes.
async fn shared_chat(owner: &mut Client, follower: &mut Client, chat: Uuid) -> Vec<Value> {
    owner.start(chat, "hello").await;
    let first = owner.until_complete(chat).await;
    assert_eq!(follow(follower, chat).await, first);
    first
}

/// Follows `chat` from its start: what was replayed.
async fn follow(c: &mut Client, chat: Uuid) -> Vec<Value> {
    c.resume(chat, 0).await;
    let mut got = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
    got.pop();
    got.iter().map(without_replay).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_node_hears_only_the_chats_its_clients_follow() {
    let Some((url, bin)) = prerequisites().await else {
        return;
    };
    let nats = NatsServer::start(bin).await;
    let Two {
        b,
        mut ca,
        mut cb,
        nodes: _running,
        ..
    } = two_nodes(&url, &nats.url(), &nats.url()).await;
    // Two chats run on A; B's client follows only the second.
    let (busy, followed) = (Uuid::new_v4(), Uuid::new_v4());
    ca.start(busy, "hello").await;
    ca.until_complete(busy).await;
    shared_chat(&mut ca, &mut cb, followed).await;

    // The busy chat's 300-odd envelopes: B hears none of them.
    let (heard, notified) = (notices(b, "nats").await, notices(b, "notify").await);
    ca.say(busy, "burst: 300").await;
    ca.until_complete(busy).await;
    // A's commits are announced by the time its client has them; give
    // anything in flight to B a moment to land before counting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        notices(b, "nats").await,
        heard,
        "B heard the chat it does not follow"
    );

    // The followed chat's: B hears them (at most one notice a commit).
    ca.say(followed, "burst: 40").await;
    let seen = ca.until_complete(followed).await;
    assert_eq!(
        cb.until_complete(followed).await,
        seen,
        "B's client misses nothing"
    );
    let now = notices(b, "nats").await;
    assert!(now > heard, "B heard the chat it follows");
    assert!(
        now - heard <= seen.len() as f64,
        "{now} - {heard} notices for {} envelopes",
        seen.len()
    );
    assert_eq!(
        notices(b, "notify").await,
        notified,
        "no commit went by NOTIFY"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_restarted_under_load_loses_and_doubles_nothing() {
    let Some((url, bin)) = prerequisites().await else {
        return;
    };
    let mut nats = NatsServer::start(bin).await;
    let Two {
        mut ca,
        mut cb,
        nodes: _running,
        ..
    } = two_nodes(&url, &nats.url(), &nats.url()).await;
    let chat = Uuid::new_v4();
    let first = shared_chat(&mut ca, &mut cb, chat).await;

    ca.say(chat, "slow: 150").await;
    // Some words in, NATS goes away and comes back on the same port.
    let mut on_b = Vec::new();
    while on_b.len() < 20 {
        on_b.push(cb.recv().await);
    }
    nats.kill().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    nats.up().await;
    let on_a = ca.until_complete(chat).await;
    on_b.extend(cb.until_complete(chat).await);
    assert_eq!(
        on_b, on_a,
        "every envelope once, in order, on the other node"
    );
    let all: Vec<Value> = [first, on_a].concat();
    assert_gap_free(&seqs(&all));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_nats_still_serves_its_clients() {
    let Some((url, bin)) = prerequisites().await else {
        return;
    };
    let nats = NatsServer::start(bin).await;
    // B's NATS address refuses connections: it never connects, PostgreSQL is fine.
    let (_held, refused) = refused_addr();
    let nowhere = format!("nats://{refused}");
    // A has two addresses, the dead one among them (a list, as nats_url takes).
    let both = format!("{nowhere}, {}", nats.url());
    let Two {
        a,
        b,
        mut ca,
        mut cb,
        nodes: _running,
    } = two_nodes(&url, &both, &nowhere).await;

    // A chat of A's, followed from B: B reads the store every tick.
    let chat = Uuid::new_v4();
    shared_chat(&mut ca, &mut cb, chat).await;
    let notified = notices(b, "notify").await;
    ca.say(chat, "burst: 50").await;
    let on_a = ca.until_complete(chat).await;
    assert_eq!(cb.until_complete(chat).await, on_a);
    // A is on NATS (through its list): none of its commits went by NOTIFY.
    assert_eq!(notices(b, "notify").await, notified);

    // A chat of B's, followed from A: B's commits go by NOTIFY.
    let other = Uuid::new_v4();
    shared_chat(&mut cb, &mut ca, other).await;
    cb.say(other, "burst: 50").await;
    let on_b = cb.until_complete(other).await;
    assert_eq!(ca.until_complete(other).await, on_b);
    assert!(
        notices(a, "notify").await >= 1.0,
        "A heard B's commits by NOTIFY"
    );

    // Requests cross both ways: B's through PostgreSQL; A's on NATS reach
    // nobody (B is not on it), so they go through PostgreSQL too.
    ca.say(other, "from a").await;
    assert_eq!(
        last_text(&ca.until_complete(other).await),
        "You said: from a"
    );
    cb.say(chat, "from b").await;
    assert_eq!(
        last_text(&cb.until_complete(chat).await),
        "You said: from b"
    );
    assert!(commands(a, "notify").await >= 1.0);
    assert!(commands(b, "notify").await >= 1.0);
    assert_eq!(commands(a, "nats").await + commands(b, "nats").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_request_goes_on_nats_sealed_and_a_replay_or_forgery_does_nothing() {
    use futures_util::StreamExt;
    let Some((url, bin)) = prerequisites().await else {
        return;
    };
    let nats = NatsServer::start(bin).await;
    let Two {
        a,
        b,
        mut ca,
        mut cb,
        nodes: _running,
    } = two_nodes(&url, &nats.url(), &nats.url()).await;
    // Any client the NATS server lets subscribe sees the commands.
    let spy = async_nats::connect(nats.url()).await.unwrap();
    let mut seen = spy.subscribe("agentwire.node.>").await.unwrap();
    spy.flush().await.unwrap();

    let chat = Uuid::new_v4();
    let first = shared_chat(&mut ca, &mut cb, chat).await;
    // B's client speaks in A's chat: B forwards it to A, on NATS.
    cb.say(chat, "secret-Qv7 from b").await;
    let on_b = cb.until_complete(chat).await;
    assert_eq!(last_text(&on_b), "You said: secret-Qv7 from b");
    assert!(commands(b, "nats").await >= 1.0, "B forwarded on NATS");
    assert_eq!(
        commands(b, "notify").await,
        0.0,
        "nothing through PostgreSQL"
    );
    let sent = tokio::time::timeout(Duration::from_secs(5), seen.next())
        .await
        .expect("the spy saw the command")
        .unwrap();
    assert!(
        !sent.payload.windows(10).any(|w| w == b"secret-Qv7"),
        "the command is sealed"
    );

    // The same command again, as it was, then one forged in B's name:
    // A answers neither (on the inbox each names) and runs nothing.
    let text = String::from_utf8_lossy(&sent.payload).into_owned();
    let mut words = text.split(' ');
    let from = words.next().unwrap().to_owned();
    let inbox = text
        .lines()
        .next()
        .unwrap()
        .split(' ')
        .nth(3)
        .unwrap()
        .to_owned();
    let mut to_b = spy.subscribe(inbox).await.unwrap();
    let mut to_spy = spy.subscribe("_INBOX.spy").await.unwrap();
    spy.flush().await.unwrap();
    spy.publish(sent.subject.clone(), sent.payload.clone())
        .await
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let forged = format!("{from} {} {now} _INBOX.spy\n", Uuid::new_v4()).into_bytes();
    let forged = [forged, vec![7_u8; 200]].concat();
    spy.publish(sent.subject.clone(), forged.into())
        .await
        .unwrap();
    spy.flush().await.unwrap();
    let quiet = Duration::from_secs(1);
    assert!(
        tokio::time::timeout(quiet, to_b.next()).await.is_err(),
        "a replay was answered"
    );
    assert!(
        tokio::time::timeout(quiet, to_spy.next()).await.is_err(),
        "a forgery was answered"
    );
    for why in ["ran already", "does not open"] {
        let refused = counter(a, "agentwire_cluster_commands_refused_total", "why", why);
        assert_eq!(refused.await, 1.0, "{why}");
    }

    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut fresh = Client::connect(&format!("ws://{a}/v1/ws")).await;
    let (log, _) = replay_all(&mut fresh, chat).await;
    let live: Vec<Value> = [first, on_b].concat();
    assert_eq!(log, live, "A ran the message once, and nothing else");

    // A client that answers on a request's inbox before A (here: "go
    // another way" at once): B sends it through PostgreSQL with the same
    // id, and A, which ran it from NATS, does not run it again.
    let racer = spy.clone();
    let mut requests = racer.subscribe("agentwire.node.>").await.unwrap();
    racer.flush().await.unwrap();
    tokio::spawn(async move {
        while let Some(m) = requests.next().await {
            let line = m.payload.split(|&b| b == b'\n').next().unwrap().to_vec();
            let line = String::from_utf8(line).unwrap();
            let inbox = line.split(' ').nth(3).unwrap().to_owned();
            racer.publish(inbox, "?".into()).await.unwrap();
        }
    });
    spy.flush().await.unwrap();
    // (Tried again in the rare case A's answer beats the racer's.)
    let mut raced = None;
    for attempt in 0..3 {
        let through_pg = commands(b, "notify").await;
        let text = format!("raced {attempt} from b");
        cb.say(chat, &text).await;
        let mut got = cb.until_complete(chat).await;
        // The forward's own answer may come after the run's end.
        while let Ok(m) = tokio::time::timeout(Duration::from_millis(700), cb.recv()).await {
            got.push(m);
        }
        if commands(b, "notify").await > through_pg {
            raced = Some((text, got));
            break;
        }
    }
    let (raced, got) = raced.expect("the racer's answer came first once in three");
    assert!(
        got.iter().all(|m| m["type"] != "chat.error"),
        "the client is told what the run did: {got:#?}"
    );
    let mut again = Client::connect(&format!("ws://{a}/v1/ws")).await;
    let (log, _) = replay_all(&mut again, chat).await;
    let asked: Vec<&Value> = log
        .iter()
        .filter(|m| m["type"] == "chat.text" && m["content"] == format!("You said: {raced}"))
        .collect();
    assert_eq!(asked.len(), 1, "run once: {asked:#?}");
}
