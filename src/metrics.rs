//! Prometheus metrics: the names, the recorder, the `/metrics` text.
//!
//! Code records through the `metrics` facade (`counter!`, `gauge!`,
//! `histogram!`) with the names below; [`install`] sets the process-wide
//! Prometheus recorder once (several servers in one test process share it) and
//! [`render`] writes the text format. Recording costs an atomic add and a
//! lookup; with no recorder installed it costs nothing.
//!
//! Depends on nothing in the crate.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{
    Counter, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge,
    histogram,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Open client connections, by `transport` (`ws`, `sse`).
pub const CONNECTIONS: &str = "agentwire_connections";
/// Chat actors in memory (set at each scrape).
pub const CHAT_ACTORS: &str = "agentwire_chat_actors";
/// Chats asleep: followed by a connection, with no actor (set at each scrape).
pub const CHATS_SLEEPING: &str = "agentwire_chats_sleeping";
/// Runs in flight.
pub const RUNS_ACTIVE: &str = "agentwire_runs_active";
/// Envelopes committed to the log.
pub const ENVELOPES_APPENDED: &str = "agentwire_envelopes_appended_total";
/// Envelopes per group commit.
pub const COMMIT_ENVELOPES: &str = "agentwire_commit_envelopes";
/// Chats (append requests) per group commit.
pub const COMMIT_BATCHES: &str = "agentwire_commit_batches";
/// How long a group commit takes.
pub const COMMIT_SECONDS: &str = "agentwire_commit_seconds";
/// From an append's start to its envelopes in every subscriber's queue.
pub const DELIVERY_SECONDS: &str = "agentwire_delivery_seconds";
/// Connections closed with 1013 because their queue was full.
pub const SLOW_DISCONNECTS: &str = "agentwire_slow_consumer_disconnects_total";
/// Commit notices this node received (of its own commits too), by `via`
/// (`notify`: PostgreSQL's, every chat's; `nats`: the chats it has an actor for).
pub const CLUSTER_NOTICES: &str = "agentwire_cluster_notices_total";
/// Requests this node forwarded to a chat's owner, by `via` (`nats`: a NATS
/// request; `notify`: PostgreSQL's `node_commands`).
pub const CLUSTER_COMMANDS: &str = "agentwire_cluster_commands_total";
/// Commands that came on NATS and were not run, by `why` (unreadable, from
/// a node not known, sent too long ago, does not open, ran already, too
/// many at once).
pub const CLUSTER_COMMANDS_REFUSED: &str = "agentwire_cluster_commands_refused_total";
/// Replays served (`client.resume`, `Last-Event-ID`, `chat.start` of a known chat).
pub const REPLAYS: &str = "agentwire_replays_total";
/// Envelopes per replay.
pub const REPLAY_ENVELOPES: &str = "agentwire_replay_envelopes";
/// From sending a model request to its response headers (retries included), by `vendor`.
pub const PROVIDER_SECONDS: &str = "agentwire_provider_request_seconds";
/// Model requests that failed, by `vendor` and `code`.
pub const PROVIDER_ERRORS: &str = "agentwire_provider_errors_total";
/// From sending a run to an upstream AG-UI agent to its response headers, by `agent`.
pub const UPSTREAM_SECONDS: &str = "agentwire_upstream_request_seconds";
/// Upstream AG-UI runs that failed (unreachable, an error status, a broken
/// or malformed stream, `RUN_ERROR`), by `agent` and `code`.
pub const UPSTREAM_ERRORS: &str = "agentwire_upstream_errors_total";
/// Schedules' due times, by `outcome` (`fired`, `failed`: the run could
/// not start, `skipped`: missed while no node ran).
pub const SCHEDULE_FIRINGS: &str = "agentwire_schedule_firings_total";
/// Webhook attempts, by `outcome` (`delivered`, `failed`: to be tried again).
pub const WEBHOOK_DELIVERIES: &str = "agentwire_webhook_deliveries_total";
/// Webhook events not delivered yet (read about every 10 s).
pub const WEBHOOKS_WAITING: &str = "agentwire_webhooks_waiting";
/// Fetches of the identity provider's keys (JWKS), by `outcome`.
pub const JWKS_FETCHES: &str = "agentwire_jwks_fetches_total";
/// How long a tool call ran, by `kind` (`http`, `ui`, `input`, `builtin`).
pub const TOOL_SECONDS: &str = "agentwire_tool_seconds";
/// Errors sent to clients, by contract `code`.
pub const ERRORS: &str = "agentwire_errors_total";
/// Tokens runs used, by `agent`, `model` and `kind` (`prompt`, `completion`).
pub const TOKENS: &str = "agentwire_tokens_total";
/// What priced runs cost, by `agent`, in 1e-9 of the price table's currency.
pub const COST_NANOS: &str = "agentwire_cost_nanos_total";

const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];
const SIZE_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0, 10000.0, 100_000.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The handles of the metrics recorded per envelope or per commit, taken once
/// the recorder is installed: `histogram!` looks its key up in the registry
/// on every call (~1 % of the CPU of paced streaming, `bench/notes.md`).
struct Hot {
    delivery: Histogram,
    appended: Counter,
    commit_envelopes: Histogram,
    commit_batches: Histogram,
    commit_seconds: Histogram,
}

static HOT: OnceLock<Hot> = OnceLock::new();

fn hot() -> Option<&'static Hot> {
    HOT.get()
}

/// Installs the Prometheus recorder for this process (once; later calls do
/// nothing). `None` if another recorder was installed first.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Suffix("_envelopes".into()), SIZE_BUCKETS)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Suffix("_batches".into()), SIZE_BUCKETS)
                })
                .expect("bucket lists are not empty")
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            describe();
            let _ = HOT.set(Hot {
                delivery: histogram!(DELIVERY_SECONDS),
                appended: counter!(ENVELOPES_APPENDED),
                commit_envelopes: histogram!(COMMIT_ENVELOPES),
                commit_batches: histogram!(COMMIT_BATCHES),
                commit_seconds: histogram!(COMMIT_SECONDS),
            });
            Some(handle)
        })
        .as_ref()
}

/// The metrics in Prometheus text format (empty without a recorder).
pub fn render() -> String {
    match HANDLE.get().and_then(Option::as_ref) {
        Some(handle) => {
            handle.run_upkeep();
            handle.render()
        }
        None => String::new(),
    }
}

fn describe() {
    describe_gauge!(CONNECTIONS, "Open client connections, by transport.");
    describe_gauge!(CHAT_ACTORS, "Chat actors in memory.");
    describe_gauge!(
        CHATS_SLEEPING,
        "Idle chats followed by a connection whose actor has stopped."
    );
    describe_gauge!(RUNS_ACTIVE, "Agent runs in flight.");
    describe_counter!(ENVELOPES_APPENDED, "Envelopes committed to the log.");
    describe_histogram!(COMMIT_ENVELOPES, "Envelopes per group commit.");
    describe_histogram!(COMMIT_BATCHES, "Append requests (chats) per group commit.");
    describe_histogram!(COMMIT_SECONDS, Unit::Seconds, "Group commit duration.");
    describe_histogram!(
        DELIVERY_SECONDS,
        Unit::Seconds,
        "From an append's start to its envelopes in every subscriber's queue."
    );
    describe_counter!(
        SLOW_DISCONNECTS,
        "Connections closed with 1013: queue full."
    );
    describe_counter!(REPLAYS, "Replays served.");
    describe_counter!(
        CLUSTER_NOTICES,
        "Commit notices this node received, by via (notify: every chat's; nats: the chats it has an actor for)."
    );
    describe_counter!(
        CLUSTER_COMMANDS,
        "Requests this node forwarded to a chat's owner, by via (nats or notify)."
    );
    describe_counter!(
        CLUSTER_COMMANDS_REFUSED,
        "Commands that came on NATS and were not run, by why."
    );
    describe_histogram!(REPLAY_ENVELOPES, "Envelopes per replay.");
    describe_histogram!(
        PROVIDER_SECONDS,
        Unit::Seconds,
        "Model request to response headers, retries included."
    );
    describe_counter!(PROVIDER_ERRORS, "Model requests that failed.");
    describe_histogram!(
        UPSTREAM_SECONDS,
        Unit::Seconds,
        "Upstream AG-UI run request to response headers."
    );
    describe_counter!(UPSTREAM_ERRORS, "Upstream AG-UI runs that failed.");
    describe_counter!(SCHEDULE_FIRINGS, "Schedules' due times, by outcome.");
    describe_counter!(WEBHOOK_DELIVERIES, "Webhook attempts, by outcome.");
    describe_gauge!(WEBHOOKS_WAITING, "Webhook events not delivered yet.");
    describe_counter!(JWKS_FETCHES, "Fetches of the identity provider's keys.");
    describe_histogram!(TOOL_SECONDS, Unit::Seconds, "Tool call duration.");
    describe_counter!(ERRORS, "Errors sent to clients, by code.");
    describe_counter!(TOKENS, "Tokens runs used, by agent, model and kind.");
    describe_counter!(
        COST_NANOS,
        "What priced runs cost, by agent, in 1e-9 of the price table's currency."
    );
}

/// Counts what a run of `agent` on `model` used (its `chat.usage_summary`).
pub fn run_usage(agent: &str, model: &str, prompt: u64, completion: u64, cost: Option<f64>) {
    let (agent, model) = (agent.to_owned(), model.to_owned());
    let kind = |kind: &'static str| counter!(TOKENS, "agent" => agent.clone(), "model" => model.clone(), "kind" => kind);
    kind("prompt").increment(prompt);
    kind("completion").increment(completion);
    if let Some(cost) = cost {
        counter!(COST_NANOS, "agent" => agent).increment((cost.max(0.0) * 1e9).round() as u64);
    }
}

/// Counts an open connection until dropped.
#[derive(Debug)]
pub struct ConnectionGauge(&'static str);

impl ConnectionGauge {
    pub fn open(transport: &'static str) -> Self {
        gauge!(CONNECTIONS, "transport" => transport).increment(1.0);
        Self(transport)
    }
}

impl Drop for ConnectionGauge {
    fn drop(&mut self) {
        gauge!(CONNECTIONS, "transport" => self.0).decrement(1.0);
    }
}

/// Counts a run in flight until dropped.
#[derive(Debug)]
pub struct RunGauge;

impl RunGauge {
    pub fn start() -> Self {
        gauge!(RUNS_ACTIVE).increment(1.0);
        Self
    }
}

impl Drop for RunGauge {
    fn drop(&mut self) {
        gauge!(RUNS_ACTIVE).decrement(1.0);
    }
}

/// An error sent to a client, by its contract code (`SCREAMING_SNAKE`).
pub fn error_sent(code: &str) {
    counter!(ERRORS, "code" => code.to_owned()).increment(1);
}

/// A group commit of `batches` append requests holding `envelopes`.
pub fn committed(batches: usize, envelopes: usize, took: Duration) {
    if let Some(hot) = hot() {
        hot.appended.increment(envelopes as u64);
        hot.commit_envelopes.record(envelopes as f64);
        hot.commit_batches.record(batches as f64);
        hot.commit_seconds.record(took);
        return;
    }
    counter!(ENVELOPES_APPENDED).increment(envelopes as u64);
    histogram!(COMMIT_ENVELOPES).record(envelopes as f64);
    histogram!(COMMIT_BATCHES).record(batches as f64);
    histogram!(COMMIT_SECONDS).record(took);
}

/// Records an append's time from its start to its envelopes in every
/// subscriber's queue.
pub fn delivered(took: Duration) {
    match hot() {
        Some(hot) => hot.delivery.record(took),
        None => histogram!(DELIVERY_SECONDS).record(took),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_renders_what_was_recorded() {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
            .unwrap()
            .build_recorder();
        let handle = recorder.handle();
        let open = metrics::with_local_recorder(&recorder, || {
            committed(2, 7, Duration::from_millis(3));
            error_sent("RUN_IN_PROGRESS");
            drop(ConnectionGauge::open("ws"));
            ConnectionGauge::open("ws")
        });
        let text = handle.render();
        drop(open);
        assert!(
            text.contains("agentwire_envelopes_appended_total 7"),
            "{text}"
        );
        assert!(
            text.contains(r#"agentwire_errors_total{code="RUN_IN_PROGRESS"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"agentwire_connections{transport="ws"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("agentwire_commit_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
    }
}
