//! `agentwire-bench`: a load generator for agentwire (and, for comparison, the
//! raw ceiling server in `bench/` and a Socket.IO server), plus the storage
//! ceiling and the report that turns runs into `docs/benchmarks.md`.
//!
//! Each run prints one JSON line on stdout (machine, commit, scenario,
//! parameters, figures) and a table on stderr. See `bench/compare.sh`.

mod after_burst;
mod branched;
mod files;
mod paced;
mod report;
mod scenarios;
mod search;
mod storage;
mod summary;
mod upstream;
mod wire;

use std::time::Duration;

use clap::{Parser, Subcommand};
use serde_json::json;

use scenarios::Target;
use wire::Protocol;

#[derive(Parser)]
#[command(
    name = "agentwire-bench",
    about = "Load generator and benchmarks for agentwire"
)]
struct Cli {
    /// No progress line.
    #[arg(long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(clap::Args, Clone)]
struct Server {
    /// The server's WebSocket address (agentwire: ws://HOST:PORT/v1/ws;
    /// Socket.IO: ws://HOST:PORT).
    #[arg(long, default_value = "ws://127.0.0.1:8080/v1/ws")]
    url: String,
    /// The protocol the server speaks.
    #[arg(long, value_enum, default_value = "agentwire")]
    protocol: Protocol,
    /// The server's pid: CPU time and memory are read from /proc.
    #[arg(long)]
    pid: Option<u32>,
    /// A name for the server in the output (agentwire, raw, socketio…).
    #[arg(long, default_value = "agentwire")]
    label: String,
    #[arg(skip)]
    quiet: bool,
}

impl Server {
    fn target(&self) -> Target {
        Target {
            url: self.url.clone(),
            protocol: self.protocol,
            pid: self.pid,
            quiet: self.quiet,
        }
    }
}

#[derive(Subcommand)]
enum Scenario {
    /// C chats at once, each running `burst: N`: envelopes/s and latency.
    Stream {
        #[command(flatten)]
        server: Server,
        #[arg(long, default_value_t = 20)]
        chats: usize,
        #[arg(long, default_value_t = 5000)]
        n: u64,
        /// `slow: N` (a word every 20 ms) instead of `burst: N`: a fixed rate
        /// of 50 envelopes/s per chat, the chats starting spread over 20 ms.
        #[arg(long)]
        paced: bool,
    },
    /// A `burst:` stream, then paced runs back to back on the same server:
    /// what the work a burst leaves behind does to live streams.
    AfterBurst {
        #[command(flatten)]
        server: Server,
        /// The burst's chats and words per chat.
        #[arg(long, default_value_t = 100)]
        burst_chats: usize,
        #[arg(long, default_value_t = 2000)]
        burst_n: u64,
        /// Each paced run's chats and words per chat (`slow: N`).
        #[arg(long, default_value_t = 50)]
        chats: usize,
        #[arg(long, default_value_t = 150)]
        n: u64,
        /// Paced runs after the burst.
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// C idle connections, each subscribed to a chat: server memory per connection.
    Idle {
        #[command(flatten)]
        server: Server,
        #[arg(long, default_value_t = 1000)]
        connections: usize,
        /// Seconds to wait before reading the server's memory.
        #[arg(long, default_value_t = 2)]
        settle: u64,
    },
    /// A chat of E envelopes, then timed resumes from 0 and of the last 100.
    Resume {
        #[command(flatten)]
        server: Server,
        #[arg(long, default_value_t = 10_000)]
        envelopes: u64,
        #[arg(long, default_value_t = 20)]
        repeats: usize,
    },
    /// A chat of about E envelopes whose P turns are each regenerated once
    /// (P branch points): timed reads of its active path and of its log.
    Branched {
        #[command(flatten)]
        server: Server,
        #[arg(long, default_value_t = 10_000)]
        envelopes: u64,
        #[arg(long, default_value_t = 100)]
        points: u64,
        #[arg(long, default_value_t = 20)]
        repeats: usize,
    },
    /// S subscribers on one chat, one `burst: N` run.
    Fanout {
        #[command(flatten)]
        server: Server,
        #[arg(long, default_value_t = 100)]
        subscribers: usize,
        #[arg(long, default_value_t = 1000)]
        n: u64,
    },
    /// Most connections idle, some streaming, some reconnecting, for a while.
    Mixed {
        #[command(flatten)]
        server: Server,
        #[arg(long, default_value_t = 500)]
        connections: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Words per streamed turn.
        #[arg(long, default_value_t = 200)]
        n: u64,
    },
    /// A file of MIB MiB uploaded and downloaded REPEATS times: throughput
    /// and the server's memory during an upload.
    Files {
        #[command(flatten)]
        server: Server,
        #[arg(long, default_value_t = 50)]
        mib: u64,
        #[arg(long, default_value_t = 3)]
        repeats: usize,
    },
    /// C chats of an agent served over AG-UI by an upstream server this tool
    /// runs on PORT (the server's agent file: `ag_ui: {url:
    /// http://127.0.0.1:PORT/}`), each streaming WORDS at RATE a second:
    /// what agentwire adds to each event's latency, and its CPU per event.
    Upstream {
        #[command(flatten)]
        server: Server,
        #[arg(long, default_value_t = 200)]
        chats: usize,
        #[arg(long, default_value_t = 150)]
        words: u64,
        #[arg(long, default_value_t = 50.0)]
        rate: f64,
        #[arg(long, default_value_t = 8799)]
        port: u16,
        /// The agent whose file points at PORT.
        #[arg(long, default_value = "upstream-bench")]
        agent: String,
    },
    /// The store alone: ROWS envelopes appended in batches of each size.
    Storage {
        /// sqlite://FILE or postgres://…
        #[arg(long)]
        database_url: String,
        #[arg(long, default_value_t = 100_000)]
        rows: u64,
        #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000")]
        batches: Vec<usize>,
    },
    /// Search over CHATS chats of MESSAGES texts (USERS users), seeded
    /// through the store; and what the index adds to the write path.
    Search {
        /// sqlite://FILE or postgres://… (an empty database)
        #[arg(long)]
        database_url: String,
        #[arg(long, default_value_t = 100_000)]
        chats: u64,
        #[arg(long, default_value_t = 50)]
        messages: u64,
        #[arg(long, default_value_t = 1_000)]
        users: u64,
        #[arg(long, default_value_t = 400)]
        queries: usize,
    },
    /// Turns JSON lines (files or stdin) into the Markdown of docs/benchmarks.md.
    Report {
        /// Files of JSON lines; none: stdin.
        files: Vec<std::path::PathBuf>,
        /// Also write the paced sweep's chart here (SVG), embedded by name.
        #[arg(long)]
        svg: Option<std::path::PathBuf>,
    },
}

/// The store a `--database-url` names: `sqlite` or `postgres`.
fn backend(database_url: &str) -> String {
    database_url
        .split(':')
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    agentwire::raise_fd_limit();
    let mut cli = Cli::parse();
    if let Scenario::Stream { server, .. }
    | Scenario::AfterBurst { server, .. }
    | Scenario::Idle { server, .. }
    | Scenario::Resume { server, .. }
    | Scenario::Branched { server, .. }
    | Scenario::Fanout { server, .. }
    | Scenario::Mixed { server, .. }
    | Scenario::Files { server, .. }
    | Scenario::Upstream { server, .. } = &mut cli.scenario
    {
        server.quiet = cli.quiet;
    }
    let (name, server, params, figures) = match cli.scenario {
        Scenario::Stream {
            server,
            chats,
            n,
            paced,
        } => {
            let f = scenarios::stream(&server.target(), chats, n, paced).await?;
            let params = json!({"chats": chats, "n": n, "paced": paced});
            ("stream", server, params, f)
        }
        Scenario::AfterBurst {
            server,
            burst_chats,
            burst_n,
            chats,
            n,
            runs,
        } => {
            let plan = after_burst::Plan {
                burst_chats,
                burst_n,
                chats,
                n,
                runs,
            };
            let f = after_burst::run(&server.target(), &plan).await?;
            let params = json!({"burst_chats": burst_chats, "burst_n": burst_n,
                                "chats": chats, "n": n, "runs": runs});
            ("after-burst", server, params, f)
        }
        Scenario::Idle {
            server,
            connections,
            settle,
        } => {
            let settle = Duration::from_secs(settle);
            let f = scenarios::idle(&server.target(), connections, settle).await?;
            ("idle", server, json!({"connections": connections}), f)
        }
        Scenario::Resume {
            server,
            envelopes,
            repeats,
        } => {
            let f = scenarios::resume(&server.target(), envelopes, repeats).await?;
            (
                "resume",
                server,
                json!({"envelopes": envelopes, "repeats": repeats}),
                f,
            )
        }
        Scenario::Branched {
            server,
            envelopes,
            points,
            repeats,
        } => {
            let f = branched::branched(&server.target(), envelopes, points, repeats).await?;
            (
                "branched",
                server,
                json!({"envelopes": envelopes, "points": points, "repeats": repeats}),
                f,
            )
        }
        Scenario::Fanout {
            server,
            subscribers,
            n,
        } => {
            let f = scenarios::fanout(&server.target(), subscribers, n).await?;
            (
                "fanout",
                server,
                json!({"subscribers": subscribers, "n": n}),
                f,
            )
        }
        Scenario::Mixed {
            server,
            connections,
            seconds,
            n,
        } => {
            let d = Duration::from_secs(seconds);
            let f = scenarios::mixed(&server.target(), connections, d, n).await?;
            (
                "mixed",
                server,
                json!({"connections": connections, "seconds": seconds, "n": n}),
                f,
            )
        }
        Scenario::Files {
            server,
            mib,
            repeats,
        } => {
            let f = files::run(&server.target(), mib, repeats).await?;
            ("files", server, json!({"mib": mib, "repeats": repeats}), f)
        }
        Scenario::Upstream {
            server,
            chats,
            words,
            rate,
            port,
            agent,
        } => {
            upstream::serve(port, words, rate).await?;
            let f = upstream::run(&server.target(), &agent, chats, rate).await?;
            let params = json!({"chats": chats, "words": words, "rate": rate});
            ("upstream", server, params, f)
        }
        Scenario::Storage {
            database_url,
            rows,
            batches,
        } => {
            let f = storage::run(&database_url, rows, &batches).await?;
            let backend = backend(&database_url);
            report::emit(
                "storage",
                json!({"server": backend, "rows": rows, "batches": batches}),
                f,
            );
            return Ok(());
        }
        Scenario::Search {
            database_url,
            chats,
            messages,
            users,
            queries,
        } => {
            let p = search::Params {
                chats,
                messages,
                users,
                queries,
            };
            let f = search::run(&database_url, &p).await?;
            let backend = backend(&database_url);
            report::emit(
                "search",
                json!({"server": backend, "chats": chats, "messages": messages, "users": users, "queries": queries}),
                f,
            );
            return Ok(());
        }
        Scenario::Report { files, svg } => {
            print!("{}", summary::markdown(&files, svg.as_deref())?);
            return Ok(());
        }
    };
    let mut params = params;
    params["server"] = json!(server.label);
    params["protocol"] = json!(server.protocol);
    report::emit(name, params, figures);
    Ok(())
}
