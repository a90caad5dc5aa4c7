#!/usr/bin/env bash
# Two agentwire nodes on one throwaway PostgreSQL against one node: paced
# chats split between the nodes (each client on the node that created its
# chats), then a burst. Prints one line per run; the figures are in
# bench/notes.md. Needs root and the PostgreSQL server binaries, like
# compare.sh; uses the release builds compare.sh makes.
#
#   bench/two_nodes.sh [CHATS] [WORDS]     # default 500 150
set -u
cd "$(dirname "$0")/.."
bin="${CARGO_TARGET_DIR:-$HOME/.cache/agentwire/target}/release"
work=$(mktemp -d); chmod 755 $work; mkdir -p $work/agents
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | tail -n 1)
pg_dir=$work/pg; mkdir -p $pg_dir; chown postgres $pg_dir
a=; b=
cleanup() {
  kill $a $b 2> /dev/null; wait $a $b 2> /dev/null
  runuser -u postgres -- $pg_bin/pg_ctl -D $pg_dir/data -m fast -w stop > /dev/null 2>&1
  rm -rf $work
}
trap cleanup EXIT
runuser -u postgres -- $pg_bin/initdb -D $pg_dir/data -U postgres -A trust -E UTF8 --locale=C.UTF-8 > /dev/null
runuser -u postgres -- $pg_bin/pg_ctl -D $pg_dir/data -l $pg_dir/server.log -o "-c listen_addresses=127.0.0.1 -c port=15433 -c unix_socket_directories=$pg_dir -c max_connections=200" -w start > /dev/null
runuser -u postgres -- $pg_bin/createdb -h 127.0.0.1 -p 15433 -U postgres aw
url=postgres://postgres@127.0.0.1:15433/aw
start() { # port
  RUST_LOG=warn "$bin/agentwire" serve --listen "127.0.0.1:$1" --database-url "$url" \
    --agents "$work/agents" --rate-chats-per-minute 0 --rate-messages-per-minute 0 \
    --max-runs-per-user 0 --max-streams-per-user 0 --max-sockets-per-user 0 > "$work/n$1.log" 2>&1 &
}
fig() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); f=d["figures"]; print(d["params"].get("chats"), "p50", f["latency_ms"]["p50"], "p99", f["latency_ms"]["p99"], "env/s", f["envelopes_per_s"], "cpu", f["server_cpu_s"])'; }
start 18101; a=$!; start 18102; b=$!; sleep 2
C=${1:-500}; N=${2:-150}
for i in 1 2; do
  echo "one node, $C chats: $($bin/agentwire-bench stream --url ws://127.0.0.1:18101/v1/ws --pid $a --label one --chats $C --n $N --paced 2>/dev/null | fig)"
  $bin/agentwire-bench stream --url ws://127.0.0.1:18101/v1/ws --pid $a --label twoA --chats $((C/2)) --n $N --paced 2>/dev/null | fig > $work/ra & ra=$!
  $bin/agentwire-bench stream --url ws://127.0.0.1:18102/v1/ws --pid $b --label twoB --chats $((C/2)) --n $N --paced 2>/dev/null | fig > $work/rb & rb=$!
  wait $ra $rb
  echo "two nodes, $((C/2)) each: A: $(cat $work/ra) | B: $(cat $work/rb)"
done
echo "burst one node: $($bin/agentwire-bench stream --url ws://127.0.0.1:18101/v1/ws --pid $a --label one --chats 100 --n 2000 2>/dev/null | fig)"
$bin/agentwire-bench stream --url ws://127.0.0.1:18101/v1/ws --pid $a --label twoA --chats 50 --n 2000 2>/dev/null | fig > $work/ra & ra=$!
$bin/agentwire-bench stream --url ws://127.0.0.1:18102/v1/ws --pid $b --label twoB --chats 50 --n 2000 2>/dev/null | fig > $work/rb & rb=$!
wait $ra $rb
echo "burst two nodes 50 each: A: $(cat $work/ra) | B: $(cat $work/rb)"
