#!/usr/bin/env bash
# One command for docs/benchmarks.md: agentwire side by side with the raw
# ceiling (bench/raw_ceiling.rs), the storage ceilings (agentwire's store
# alone, SQLite and PostgreSQL) and the Socket.IO 4 peer (bench/socketio),
# each driven by the same load generator (agentwire-bench), one after the
# other on this machine.
#
#   bench/compare.sh            # the full sizes (about 10 minutes on 2 cores)
#   SIZE=quick bench/compare.sh # small sizes, to try the script
#   CLEAN_BUILD=1 ...           # also time a clean release build of the server
#   QUIET_LOAD=1.5 ...          # before each run, wait (up to 20 minutes, polling
#                               # every 30 s) for a 1-minute load average below it
#
# Writes bench/results.jsonl (the raw runs) and docs/benchmarks.md (the
# report, then bench/notes.md: the analysis written by hand).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agentwire/target}"
size="${SIZE:-full}"
work=$(mktemp -d)
chmod 755 "$work" # PostgreSQL runs as its own user and must reach its folder
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  if [ -n "${pg_dir:-}" ]; then
    runuser -u postgres -- /usr/lib/postgresql/*/bin/pg_ctl -D "$pg_dir/data" -m fast -w stop > /dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

results="$root/bench/results.jsonl"
# Without CLEAN_BUILD, keep the last measured clean build (it carries its own
# date and commit).
kept_build=$(grep '"scenario":"build"' "$results" 2> /dev/null || true)
: > "$results"
if [ "${CLEAN_BUILD:-0}" != 1 ] && [ -n "$kept_build" ]; then
  echo "$kept_build" >> "$results"
fi

if [ "${CLEAN_BUILD:-0}" = 1 ]; then
  echo "== a clean release build of the server (a fresh target folder)"
  start=$(date +%s)
  CARGO_TARGET_DIR="$work/clean-target" cargo build --release --locked --bin agentwire
  secs=$(($(date +%s) - start))
  echo "{\"scenario\":\"build\",\"params\":{\"server\":\"agentwire\",\"profile\":\"release\",\"cores\":$(nproc)},\"figures\":{\"seconds\":$secs},\"machine\":{\"cores\":$(nproc)},\"commit\":\"$(git rev-parse --short HEAD)\",\"at\":\"$(date -u +%FT%TZ)\"}" >> "$results"
  rm -rf "$work/clean-target"
fi

echo "== building (release)"
cargo build --release --locked --bin agentwire --bin agentwire-bench --bin raw-ceiling
bin="$CARGO_TARGET_DIR/release"
# On a machine shared with other work, wait for it to be quiet first (each
# line records the load average anyway).
wait_quiet() {
  [ -n "${QUIET_LOAD:-}" ] || return 0
  for _ in $(seq 1 40); do
    awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v q="$QUIET_LOAD" 'BEGIN { exit !(l < q) }' && return 0
    sleep 30
  done
  echo "load still $(cut -d' ' -f1 /proc/loadavg) after 20 minutes: measuring anyway" >&2
}
bench() { wait_quiet; "$bin/agentwire-bench" "$@" | tee -a "$results" > /dev/null; }

wait_port() {
  for _ in $(seq 1 200); do
    if (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; then return 0; fi
    sleep 0.05
  done
  echo "nothing listens on port $1" >&2
  return 1
}

if [ "$size" = quick ]; then
  chats=4 n=2000 subs=20 fan_n=500 idle=500 mixed=100 mixed_s=3 resume_big=20000 rows=20000
  sweep="50 250"
else
  chats=20 n=5000 subs=100 fan_n=1000 idle=10000 mixed=1000 mixed_s=20 resume_big=100000 rows=200000
  sweep="50 100 250 500 1000 2000"
fi

start_agentwire() { # port database-url [more serve flags]
  mkdir -p "$work/agents"
  # Every load here comes from one user (`dev`): the per-user rate limits and
  # quotas, which would refuse most of it, are off; the per-connection and
  # size limits stay on.
  RUST_LOG=warn "$bin/agentwire" serve --listen "127.0.0.1:$1" --database-url "$2" \
    --agents "$work/agents" --rate-chats-per-minute 0 --rate-messages-per-minute 0 \
    --max-runs-per-user 0 --max-streams-per-user 0 --max-sockets-per-user 0 "${@:3}" \
    > "$work/agentwire-$1.log" 2>&1 &
  pids+=($!)
  aw_pid=$!
  wait_port "$1"
}

echo "== agentwire (SQLite, embedded defaults)"
# Memory per idle connection first, on a server of its own: a server that has
# already streamed reuses freed memory and would look smaller than it is.
start_agentwire 18079 "sqlite://$work/idle.db"
bench idle --url ws://127.0.0.1:18079/v1/ws --pid "$aw_pid" --label agentwire --connections "$idle"
kill "$aw_pid"; wait "$aw_pid" 2> /dev/null || true
# Again, read once the chats have slept (idle past idle_chat_seconds, here 2 s
# instead of 60): what a connection left idle for a minute costs.
start_agentwire 18079 "sqlite://$work/idle-asleep.db" --idle-chat-seconds 2
bench idle --url ws://127.0.0.1:18079/v1/ws --pid "$aw_pid" --label agentwire --connections "$idle" --settle 6
kill "$aw_pid"; wait "$aw_pid" 2> /dev/null || true

start_agentwire 18080 "sqlite://$work/agentwire.db"
aw=(--url ws://127.0.0.1:18080/v1/ws --pid "$aw_pid" --label agentwire)
bench stream "${aw[@]}" --chats "$chats" --n "$n"
bench stream "${aw[@]}" --chats 100 --n 2000
# The paced sweep (chats of `slow: 150`: a word every 20 ms, 50 envelopes/s
# each), the shape of real model output, on every server below too.
paced() { for c in $sweep; do bench stream "$@" --chats "$c" --n 150 --paced; done; }
paced "${aw[@]}"
bench fanout "${aw[@]}" --subscribers "$subs" --n "$fan_n"
bench resume "${aw[@]}" --envelopes 10000 --repeats 20
bench resume "${aw[@]}" --envelopes "$resume_big" --repeats 5
bench branched "${aw[@]}" --envelopes 10000 --points 100 --repeats 20
bench mixed "${aw[@]}" --connections "$mixed" --seconds "$mixed_s" --n 200
kill "$aw_pid"; wait "$aw_pid" 2> /dev/null || true
# What a burst leaves behind (the journal's folds, the WAL's checkpoints) must
# not stall the live streams after it: a fresh server, the burst, then five
# paced runs back to back, each reported (docs/benchmarks.md's `after-burst`).
start_agentwire 18082 "sqlite://$work/after-burst.db"
bench after-burst --url ws://127.0.0.1:18082/v1/ws --pid "$aw_pid" --label agentwire --runs 5
kill "$aw_pid"; wait "$aw_pid" 2> /dev/null || true

echo "== the raw ceiling"
"$bin/raw-ceiling" 127.0.0.1:18090 2> /dev/null &
pids+=($!); raw_pid=$!
wait_port 18090
raw=(--url ws://127.0.0.1:18090 --pid "$raw_pid" --label raw)
bench stream "${raw[@]}" --chats "$chats" --n "$n"
bench stream "${raw[@]}" --chats 100 --n 2000
paced "${raw[@]}"
bench fanout "${raw[@]}" --subscribers "$subs" --n "$fan_n"
kill "$raw_pid"

echo "== Socket.IO 4 with connection state recovery"
(cd bench/socketio && npm ci --no-audit --no-fund --loglevel=error)
PORT=18091 node bench/socketio/server.mjs 2> /dev/null &
pids+=($!); sio_pid=$!
wait_port 18091
sio=(--url ws://127.0.0.1:18091 --protocol socketio --pid "$sio_pid" --label socketio)
bench stream "${sio[@]}" --chats "$chats" --n "$n"
paced "${sio[@]}"
bench fanout "${sio[@]}" --subscribers "$subs" --n "$fan_n"
kill "$sio_pid"

echo "== the storage ceiling: SQLite"
bench storage --database-url "sqlite://$work/ceiling.db" --rows "$rows" --batches 1,10,100,1000

# Search (issue 35): 100,000 chats of 50 texts seeded through the store, then
# queries and the index's cost on the write path. Its lines go to
# bench/search.jsonl (the report's tables do not read them; bench/notes.md
# quotes them). SEARCH_CHATS=0 skips it (it takes minutes per store).
search_chats=${SEARCH_CHATS:-100000}
: > bench/search.jsonl
if [ "$search_chats" -gt 0 ]; then
  echo "== search: SQLite"
  "$bin/agentwire-bench" search --database-url "sqlite://$work/search.db" --chats "$search_chats" >> bench/search.jsonl
fi

# Files (issue 36): a 50 MiB file up and down three times, on a server of its
# own (the limit raised past the file), into bench/files.jsonl (quoted by
# bench/notes.md).
echo "== files: SQLite"
: > bench/files.jsonl
start_agentwire 18084 "sqlite://$work/files.db" --max-file-bytes 104857600
"$bin/agentwire-bench" files --url ws://127.0.0.1:18084/v1/ws --pid "$aw_pid" --label agentwire --quiet >> bench/files.jsonl
kill "$aw_pid"; wait "$aw_pid" 2> /dev/null || true

# Upstream AG-UI agents (issue 37): 200 chats whose agent is served over
# AG-UI by a server the bench tool runs itself (50 words/s each), into
# bench/upstream.jsonl (quoted by docs/benchmarks.md).
echo "== upstream AG-UI agents: SQLite"
: > bench/upstream.jsonl
printf 'id: upstream-bench\nag_ui: {url: "http://127.0.0.1:18799/"}\n' > "$work/agents/upstream-bench.yaml"
start_agentwire 18085 "sqlite://$work/upstream.db"
"$bin/agentwire-bench" upstream --url ws://127.0.0.1:18085/v1/ws --pid "$aw_pid" --label agentwire \
  --port 18799 --chats 200 --words 150 --rate 50 --quiet >> bench/upstream.jsonl
kill "$aw_pid"; wait "$aw_pid" 2> /dev/null || true
rm "$work/agents/upstream-bench.yaml"

# PostgreSQL, when its server binaries are installed: a throwaway server with
# fsync on (as a real deployment), agentwire on it, then its storage ceiling.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | tail -n 1 || true)
if [ -n "$pg_bin" ] && [ "$(id -u)" = 0 ]; then
  echo "== PostgreSQL"
  pg_dir="$work/pg"
  mkdir -p "$pg_dir" && chown postgres "$pg_dir"
  runuser -u postgres -- "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 > /dev/null
  runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" \
    -o "-c listen_addresses=127.0.0.1 -c port=15432 -c unix_socket_directories=$pg_dir -c max_connections=200" -w start > /dev/null
  runuser -u postgres -- "$pg_bin/createdb" -h 127.0.0.1 -p 15432 -U postgres agentwire
  runuser -u postgres -- "$pg_bin/createdb" -h 127.0.0.1 -p 15432 -U postgres ceiling
  start_agentwire 18081 "postgres://postgres@127.0.0.1:15432/agentwire"
  pg=(--url ws://127.0.0.1:18081/v1/ws --pid "$aw_pid" --label agentwire-postgres)
  bench stream "${pg[@]}" --chats "$chats" --n "$n"
  paced "${pg[@]}"
  bench resume --url ws://127.0.0.1:18081/v1/ws --label agentwire-postgres --envelopes 10000 --repeats 20
  bench branched --url ws://127.0.0.1:18081/v1/ws --label agentwire-postgres --envelopes 10000 --points 100 --repeats 20
  kill "$aw_pid"; wait "$aw_pid" 2> /dev/null || true
  runuser -u postgres -- "$pg_bin/createdb" -h 127.0.0.1 -p 15432 -U postgres after_burst
  start_agentwire 18083 "postgres://postgres@127.0.0.1:15432/after_burst"
  bench after-burst --url ws://127.0.0.1:18083/v1/ws --pid "$aw_pid" --label agentwire-postgres --runs 5
  kill "$aw_pid"; wait "$aw_pid" 2> /dev/null || true
  bench storage --database-url "postgres://postgres@127.0.0.1:15432/ceiling" --rows "$rows" --batches 1,10,100,1000
  echo "== files: PostgreSQL"
  runuser -u postgres -- "$pg_bin/createdb" -h 127.0.0.1 -p 15432 -U postgres files
  start_agentwire 18085 "postgres://postgres@127.0.0.1:15432/files" --max-file-bytes 104857600
  "$bin/agentwire-bench" files --url ws://127.0.0.1:18085/v1/ws --pid "$aw_pid" --label agentwire-postgres --quiet >> bench/files.jsonl
  kill "$aw_pid"; wait "$aw_pid" 2> /dev/null || true
  if [ "$search_chats" -gt 0 ]; then
    echo "== search: PostgreSQL"
    runuser -u postgres -- "$pg_bin/createdb" -h 127.0.0.1 -p 15432 -U postgres search
    "$bin/agentwire-bench" search --database-url "postgres://postgres@127.0.0.1:15432/search" --chats "$search_chats" >> bench/search.jsonl
  fi
fi

echo "== docs/benchmarks.md"
{
  "$bin/agentwire-bench" report --svg docs/paced.svg "$results"
  if [ -f bench/notes.md ]; then echo; cat bench/notes.md; fi
} > docs/benchmarks.md
echo "wrote docs/benchmarks.md, docs/paced.svg and bench/results.jsonl"
