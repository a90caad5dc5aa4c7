//! The property of issue 34: random sequences of messages, edits,
//! regenerations, switches, forks and messages sent during a run (`enqueue`,
//! `interrupt`, `steer`) against the real server, checked after every step
//! against a naive model of the conversation tree (nodes with explicit
//! parents, the pointer's visits by time): the history the model was sent
//! (a scripted agent answers with the user's messages it received), the
//! versions and pointer `GET /v1/chats/{id}/branches` reports, where a switch
//! lands, what a fork holds and what its model is sent, and a replay from a
//! random seq. `PROPTEST_CASES` sets how many sequences run (default 6).

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::*;

const AGENT: &str = "id: echo\nmodel: {provider: scripted, script: {rules: [\
    {prefix: \"slow: \", arg: count, stream: {delay_ms: 20}}, {reply: \"H: {history}\"}]}}\n";

/// What a message sent during a run is answered by: 25 words, 20 ms apart.
const SLOW: &str = "slow: 25";
const MODES: [&str; 3] = ["enqueue", "interrupt", "steer"];

#[derive(Debug, Clone)]
enum Step {
    Say,
    Edit(u16),
    Regenerate(u16),
    Switch(u16),
    /// A slow answer, and a message sent during it by `MODES[n % 3]`.
    During(u8),
    /// A fork at the end of an answer on the active path.
    Fork(u16),
}

fn step() -> impl Strategy<Value = Step> {
    proptest::prop_oneof![
        3 => proptest::strategy::Just(Step::Say),
        2 => proptest::num::u16::ANY.prop_map(Step::Edit),
        2 => proptest::num::u16::ANY.prop_map(Step::Regenerate),
        3 => proptest::num::u16::ANY.prop_map(Step::Switch),
        2 => proptest::num::u8::ANY.prop_map(Step::During),
        1 => proptest::num::u16::ANY.prop_map(Step::Fork),
    ]
}

/// A node of the model: a user's message, or an answer (a run), with its
/// text (an answer's last `chat.text`).
#[derive(Debug)]
struct Node {
    parent: usize,
    user: bool,
    text: String,
    /// Its first and last envelope (the root: 0).
    start: u64,
    end: u64,
    /// When the pointer last stood on it.
    visit: u64,
}

struct Model {
    nodes: Vec<Node>,
    pointer: usize,
    clock: u64,
}

impl Model {
    fn new() -> Self {
        let root = Node {
            parent: 0,
            user: false,
            text: String::new(),
            start: 0,
            end: 0,
            visit: 0,
        };
        Self {
            nodes: vec![root],
            pointer: 0,
            clock: 0,
        }
    }

    fn add(&mut self, parent: usize, user: bool, text: &str, start: u64, end: u64) -> usize {
        self.nodes.push(Node {
            parent,
            user,
            text: text.to_owned(),
            start,
            end,
            visit: 0,
        });
        self.nodes.len() - 1
    }

    fn visit(&mut self, node: usize) {
        self.clock += 1;
        self.nodes[node].visit = self.clock;
        self.pointer = node;
    }

    fn path(&self, mut node: usize) -> Vec<usize> {
        let mut out = Vec::new();
        while node != 0 {
            out.push(node);
            node = self.nodes[node].parent;
        }
        out.reverse();
        out
    }

    /// The answer a run on the path to `node` gives: the user's messages
    /// (the words, to a slow one).
    fn answer(&self, node: usize) -> String {
        let said: Vec<&str> = self
            .path(node)
            .into_iter()
            .filter(|&n| self.nodes[n].user)
            .map(|n| self.nodes[n].text.as_str())
            .collect();
        if said.last() == Some(&SLOW) {
            return words(25);
        }
        format!("H: {}", said.join(" | "))
    }

    /// The conversation on the path to `node`, as `turns` shows it.
    fn turns(&self, node: usize) -> Vec<String> {
        self.path(node)
            .into_iter()
            .map(|n| {
                let who = if self.nodes[n].user { "user" } else { "echo" };
                format!("{who}: {}", self.nodes[n].text)
            })
            .collect()
    }

    /// Logs a run's answer to `user` (`run`: from its first envelope after
    /// the user's text, or after the branch, to its end), the pointer on it.
    fn answered(&mut self, user: usize, run: &[Value]) -> usize {
        let text = last_text(run);
        let answer = self.add(user, false, &text, seq(&run[0]), seq(run.last().unwrap()));
        self.visit(answer);
        answer
    }

    fn children(&self, node: usize) -> Vec<usize> {
        (1..self.nodes.len())
            .filter(|&n| self.nodes[n].parent == node)
            .collect()
    }

    fn users(&self) -> Vec<usize> {
        (1..self.nodes.len())
            .filter(|&n| self.nodes[n].user)
            .collect()
    }

    /// The ends of the branches: nodes nothing follows.
    fn leaves(&self) -> Vec<usize> {
        (1..self.nodes.len())
            .filter(|&n| self.children(n).is_empty())
            .collect()
    }

    /// Nodes that begin one of several versions.
    fn versions(&self) -> Vec<usize> {
        (1..self.nodes.len())
            .filter(|&n| self.children(self.nodes[n].parent).len() > 1)
            .collect()
    }

    /// Where the pointer last stood under `node`.
    fn last_visit(&self, node: usize) -> usize {
        (1..self.nodes.len())
            .filter(|&n| self.path(n).contains(&node))
            .max_by_key(|&n| self.nodes[n].visit)
            .unwrap()
    }

    /// What `GET …/branches` must say.
    fn branches(&self) -> (u64, Value) {
        let active = self.path(self.pointer);
        let mut points: Vec<(u64, Value)> = (0..self.nodes.len())
            .filter_map(|n| {
                let kids = self.children(n);
                (kids.len() > 1).then(|| {
                    let mut versions: Vec<u64> =
                        kids.iter().map(|&k| self.nodes[k].start).collect();
                    versions.sort_unstable();
                    let on = kids
                        .iter()
                        .find(|k| active.contains(k))
                        .map(|&k| self.nodes[k].start);
                    let at = self.nodes[n].end;
                    (at, json!({"at": at, "versions": versions, "active": on}))
                })
            })
            .collect();
        points.sort_by_key(|(at, _)| *at);
        (
            self.nodes[self.pointer].end,
            Value::Array(points.into_iter().map(|(_, p)| p).collect()),
        )
    }
}

fn seq(m: &Value) -> u64 {
    m["seq"].as_u64().unwrap()
}

/// The path to `leaf` (default: the active one) through `GET …/path`, in
/// pages of `page`.
async fn read_path(server: &Server, chat: Uuid, leaf: Option<u64>, page: u64) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let mut uri = format!("/v1/chats/{chat}/path?limit={page}&after={after}");
        if let Some(leaf) = leaf {
            uri.push_str(&format!("&leaf={leaf}"));
        }
        let (status, body) = http_json(server, "GET", &uri, "").await;
        assert_eq!(status, 200, "{body}");
        let events = body["events"].as_array().unwrap();
        assert!(events.len() as u64 <= page);
        out.extend(events.iter().cloned());
        match body["next_after"].as_u64() {
            Some(next) => {
                assert_eq!(events.len() as u64, page, "a page before the last is full");
                after = next;
            }
            None => return out,
        }
    }
}

fn words(n: usize) -> String {
    (1..=n)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `steps` on a new chat and checks the model after each.
async fn run(server: &Server, steps: &[Step], salt: u64) {
    let chat = Uuid::new_v4();
    let mut c = server.client().await;
    let mut model = Model::new();
    let mut said = 0;
    let mut rng = salt;
    let ctx = |i: usize| format!("steps {steps:?}, at step {i}");
    for (i, step) in std::iter::once(&Step::Say).chain(steps).enumerate() {
        let mut step = step.clone();
        let users = model.users();
        let versions = model.versions();
        if versions.is_empty() && matches!(step, Step::Switch(_)) {
            step = Step::Say;
        }
        match step {
            Step::Say => {
                said += 1;
                let text = format!("m{said}");
                if i == 0 {
                    c.start_with(chat, "echo", &text).await;
                } else {
                    c.say(chat, &text).await;
                }
                let run = c.until_complete(chat).await;
                assert_eq!(run[0]["content"], text.as_str(), "{}", ctx(i));
                let user = model.add(model.pointer, true, &text, seq(&run[0]), seq(&run[0]));
                model.visit(user);
                let answer = model.answered(user, &run[1..]);
                assert_eq!(model.nodes[answer].text, model.answer(answer), "{}", ctx(i));
            }
            Step::Edit(k) => {
                let u = users[k as usize % users.len()];
                said += 1;
                let text = format!("m{said}");
                c.send(json!({"type": "chat.edit", "chat_id": chat, "seq": model.nodes[u].start, "text": text}))
                    .await;
                let run = c.until_complete(chat).await;
                let parent = model.nodes[u].parent;
                assert_eq!(run[0]["type"], "chat.branch", "{}", ctx(i));
                assert_eq!(run[0]["at"], model.nodes[parent].end, "{}", ctx(i));
                model.visit(parent);
                let user = model.add(parent, true, &text, seq(&run[1]), seq(&run[1]));
                model.visit(user);
                let answer = model.answered(user, &run[2..]);
                assert_eq!(model.nodes[answer].text, model.answer(answer), "{}", ctx(i));
            }
            Step::Regenerate(k) => {
                let u = users[k as usize % users.len()];
                c.send(json!({"type": "chat.regenerate", "chat_id": chat, "seq": model.nodes[u].start}))
                    .await;
                let run = c.until_complete(chat).await;
                assert_eq!(run[0]["type"], "chat.branch", "{}", ctx(i));
                assert_eq!(run[0]["at"], model.nodes[u].start, "{}", ctx(i));
                model.visit(u);
                let answer = model.answered(u, &run[1..]);
                assert_eq!(model.nodes[answer].text, model.answer(answer), "{}", ctx(i));
            }
            Step::Switch(k) => {
                let to = versions[k as usize % versions.len()];
                let lands = model.last_visit(to);
                c.send(
                    json!({"type": "chat.switch", "chat_id": chat, "to": model.nodes[to].start}),
                )
                .await;
                c.send(json!({"type": "ping"})).await;
                let got = c.recv_until(|m| m["type"] == "pong").await;
                if lands == model.pointer {
                    assert_eq!(got.len(), 1, "nothing logged: {}", ctx(i));
                } else {
                    assert_eq!(got[0]["type"], "chat.branch", "{}", ctx(i));
                    assert_eq!(got[0]["at"], model.nodes[lands].end, "{}", ctx(i));
                    model.visit(lands);
                }
            }
            Step::During(n) => {
                let mode = MODES[n as usize % MODES.len()];
                c.say(chat, SLOW).await;
                let mut slow = c.recv_until(|m| m["type"] == "chat.print").await;
                said += 1;
                let text = format!("m{said}");
                c.send(json!({"type": "user.message", "chat_id": chat, "text": text, "multitask_strategy": mode}))
                    .await;
                slow.extend(c.until_complete(chat).await);
                let next = c.until_complete(chat).await;
                let user = model.add(model.pointer, true, SLOW, seq(&slow[0]), seq(&slow[0]));
                model.visit(user);
                let cut = model.answered(user, &slow[1..]);
                let queued: Vec<&Value> =
                    slow.iter().filter(|m| m["type"] == "chat.queued").collect();
                assert_eq!(queued.len(), 1, "{}", ctx(i));
                assert_eq!(queued[0]["mode"], mode, "{}", ctx(i));
                let reason = &slow.last().unwrap()["reason"];
                let partial = slow.iter().rfind(|m| m["type"] == "chat.text").unwrap();
                // 25 words 20 ms apart: the message comes long before the end.
                if mode == "interrupt" {
                    assert_eq!(reason, "cancelled", "{}", ctx(i));
                    let full = model.answer(cut);
                    let got = model.nodes[cut].text.clone();
                    assert_eq!(partial["partial"], true, "{}", ctx(i));
                    assert!(
                        full.starts_with(got.trim_end()) && got.len() < full.len(),
                        "{got}: {}",
                        ctx(i)
                    );
                } else {
                    assert_eq!(reason, "completed", "{}", ctx(i));
                    assert!(partial.get("partial").is_none(), "{partial}: {}", ctx(i));
                    assert_eq!(model.nodes[cut].text, model.answer(cut), "{}", ctx(i));
                }
                // The message, taken when the slow run ended, and its run.
                assert_eq!(next[0]["content"], text.as_str(), "{}", ctx(i));
                assert_eq!(next[0]["queued"], queued[0]["seq"], "{}", ctx(i));
                let user = model.add(cut, true, &text, seq(&next[0]), seq(&next[0]));
                model.visit(user);
                let answer = model.answered(user, &next[1..]);
                assert_eq!(model.nodes[answer].text, model.answer(answer), "{}", ctx(i));
            }
            Step::Fork(k) => {
                let answers: Vec<usize> = model
                    .path(model.pointer)
                    .into_iter()
                    .filter(|&n| !model.nodes[n].user)
                    .collect();
                let at = answers[k as usize % answers.len()];
                let into = Uuid::new_v4();
                let body = json!({"at": model.nodes[at].end, "chat_id": into}).to_string();
                let (status, forked) =
                    http_json(server, "POST", &format!("/v1/chats/{chat}/fork"), &body).await;
                assert_eq!(status, 201, "{forked}: {}", ctx(i));
                let mut f = server.client().await;
                f.resume(into, 0).await;
                let copy = f.recv_until(|m| m["type"] == "chat.resume_boundary").await;
                let copy = &copy[..copy.len() - 1];
                assert_gap_free(&seqs(copy));
                assert_eq!(turns(copy), model.turns(at), "{}", ctx(i));
                // Marked as the source's are (a cut answer stays partial).
                let source = read_path(server, chat, Some(model.nodes[at].end), 1000).await;
                let marks = |log: &[Value]| -> Vec<(Value, Value)> {
                    log.iter()
                        .filter(|m| m["type"] == "chat.text")
                        .map(|m| (m["content"].clone(), m["partial"].clone()))
                        .collect()
                };
                assert_eq!(marks(copy), marks(&source), "{}", ctx(i));
                // Its model is sent that history, and what the fork adds.
                said += 1;
                let text = format!("m{said}");
                f.say(into, &text).await;
                let mut users: Vec<String> = model
                    .path(at)
                    .into_iter()
                    .filter(|&n| model.nodes[n].user)
                    .map(|n| model.nodes[n].text.clone())
                    .collect();
                users.push(text);
                let answer = last_text(&f.until_complete(into).await);
                assert_eq!(answer, format!("H: {}", users.join(" | ")), "{}", ctx(i));
            }
        }
        // The tree the server reports.
        let (status, b) = http_json(server, "GET", &format!("/v1/chats/{chat}/branches"), "").await;
        assert_eq!(status, 200);
        let (pointer, points) = model.branches();
        assert_eq!(b["pointer"], pointer, "{}", ctx(i));
        assert_eq!(b["points"], points, "{}", ctx(i));
        // Every branch read whole (`GET …/path?leaf=`, in pages of a random
        // size): exactly the envelopes of the model's path, and its turns.
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let page = 1 + (rng >> 33) % 40;
        for leaf in model.leaves() {
            let end = model.nodes[leaf].end;
            let read = read_path(server, chat, Some(end), page).await;
            let want: Vec<u64> = model
                .path(leaf)
                .into_iter()
                .flat_map(|n| model.nodes[n].start..=model.nodes[n].end)
                .collect();
            assert_eq!(
                read.iter().map(seq).collect::<Vec<_>>(),
                want,
                "leaf {end}, pages of {page}: {}",
                ctx(i)
            );
            assert_eq!(turns(&read), model.turns(leaf), "leaf {end}: {}", ctx(i));
        }
        let active = read_path(server, chat, None, page).await;
        assert_eq!(turns(&active), model.turns(model.pointer), "{}", ctx(i));
        // A replay from a random seq: exactly what follows it.
        let last = b["last_seq"].as_u64().unwrap();
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let from = (rng >> 33) % (last + 1);
        c.resume(chat, from).await;
        let replay = c.recv_until(|m| m["type"] == "chat.resume_boundary").await;
        let got: Vec<u64> = replay[..replay.len() - 1].iter().map(seq).collect();
        assert_eq!(got, (from + 1..=last).collect::<Vec<_>>(), "{}", ctx(i));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_tree_steps_agree_with_a_model_tree() {
    let server = Server::start_with(Opts {
        agents: vec![("echo.yaml".into(), AGENT.into())],
        ..Default::default()
    })
    .await;
    let cases: u32 = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(6);
    let mut runner = TestRunner::default();
    let steps = proptest::collection::vec(step(), 0..16);
    for case in 0..cases {
        let steps = steps.new_tree(&mut runner).unwrap().current();
        run(&server, &steps, u64::from(case) + 7).await;
    }
}
