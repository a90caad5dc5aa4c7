#!/usr/bin/env bash
# Several agentwire nodes on one throwaway PostgreSQL, their commit notices
# by NOTIFY and by NATS: 1, 2 and 4 nodes (all on this machine: state it),
# each node's clients on their own chats (so nothing is forwarded), under
# the paced load (CHATS chats, WORDS words each at model speed) and a burst
# (100 chats × 2,000 envelopes), split evenly between the nodes. One line per
# node and run: the load's p50/p99 at that node, its CPU per delivered
# envelope, and the commit notices it received per second, its own chats'
# included (`agentwire_cluster_notices_total`). With NOTIFY a node receives
# every chat's; with NATS only those of chats it has an actor for.
#
# With DATABASES=2 the chats are spread over two databases (`[[databases]]`),
# each on a PostgreSQL server of its own (both on this machine), and each
# server's CPU is reported apart.
#
# Needs root, the PostgreSQL server binaries and nats-server (Debian's), and
# the release builds (cargo build --release --bins).
#
#   bench/cluster.sh [CHATS] [WORDS] [DATABASES]     # default 400 150 1
set -u
cd "$(dirname "$0")/.."
bin="${CARGO_TARGET_DIR:-$HOME/.cache/agentwire/target}/release"
nats_bin=$(command -v nats-server || echo /usr/sbin/nats-server)
work=$(mktemp -d); chmod 755 "$work"; mkdir -p "$work/agents"
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | tail -n 1)
C=${1:-400}; N=${2:-150}; DBS=${3:-1}
nodes=(); nats=
stop_nodes() { # (`wait` with no pid would wait for NATS too)
  [ ${#nodes[@]} -gt 0 ] || return 0
  kill "${nodes[@]}" 2> /dev/null; wait "${nodes[@]}" 2> /dev/null; nodes=()
}
cleanup() {
  stop_nodes
  [ -n "$nats" ] && kill "$nats" 2> /dev/null
  for d in $(seq 0 $((DBS - 1))); do
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$work/pg$d/data" -m fast -w stop > /dev/null 2>&1
  done
  rm -rf "$work"
}
trap cleanup EXIT
# One PostgreSQL server per database, on ports 15434, 15435, ...
config=$work/agentwire.toml; : > "$config"
for d in $(seq 0 $((DBS - 1))); do
  pg_dir=$work/pg$d; mkdir -p "$pg_dir"; chown postgres "$pg_dir"; port=$((15434 + d))
  runuser -u postgres -- "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 > /dev/null
  runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$pg_dir -c max_connections=300" -w start > /dev/null
  runuser -u postgres -- "$pg_bin/createdb" -h 127.0.0.1 -p "$port" -U postgres aw
  printf '[[databases]]\nname = "db%s"\nurl = "postgres://postgres@127.0.0.1:%s/aw"\n\n' "$d" "$port" >> "$config"
done
db_args=(--database-url postgres://postgres@127.0.0.1:15434/aw)
[ "$DBS" -gt 1 ] && db_args=(--config "$config")
"$nats_bin" -a 127.0.0.1 -p 14222 -m 18222 > "$work/nats.log" 2>&1 & nats=$!
sleep 1

start() { # port bus
  local extra=()
  [ "$2" = nats ] && extra=(--nats-url nats://127.0.0.1:14222)
  RUST_LOG=warn "$bin/agentwire" serve --listen "127.0.0.1:$1" "${db_args[@]}" \
    --agents "$work/agents" --rate-chats-per-minute 0 --rate-messages-per-minute 0 \
    --max-runs-per-user 0 --max-streams-per-user 0 --max-sockets-per-user 0 "${extra[@]}" \
    > "$work/n$1.log" 2>&1 &
  nodes+=($!)
}
# The commit notices node `port` has received so far (both ways).
notices() {
  curl -s "http://127.0.0.1:$1/metrics" | awk '/^agentwire_cluster_notices_total/ {s += $2} END {print s + 0}'
}
# CPU seconds used so far by processes `pids` (user + system).
cpu_of() {
  local total=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    total=$(awk -v t="$total" -v hz="$(getconf CLK_TCK)" '{print t + ($14 + $15) / hz}' "/proc/$p/stat")
  done
  echo "$total"
}
# The processes of PostgreSQL server `d` (its postmaster and children).
pg_pids() {
  local main; main=$(head -n 1 "$work/pg$1/data/postmaster.pid")
  echo "$main $(pgrep -P "$main" | tr '\n' ' ')"
}
# CPU seconds used so far by each PostgreSQL server, space-separated.
pg_cpu() {
  local d out=()
  for d in $(seq 0 $((DBS - 1))); do out+=("$(cpu_of $(pg_pids "$d"))"); done
  echo "${out[*]}"
}
nats_msgs() { curl -s http://127.0.0.1:18222/varz | python3 -c "import json,sys; v=json.load(sys.stdin); print(v['in_msgs'], v['out_msgs'])"; }
# One load on `n` nodes: each node's share, its figures and its notices/s;
# then PostgreSQL's and NATS's CPU per envelope of the whole run.
run() { # bus n label chats words
  local bus=$1 n=$2 label=$3 chats=$4 words=$5 paced=$6
  local pids=() before=() i port
  for i in $(seq 0 $((n - 1))); do before+=("$(notices $((18201 + i)))"); done
  local pg0 nats0 msgs0; pg0=$(pg_cpu); nats0=$(cpu_of "$nats"); msgs0=$(nats_msgs)
  local t0; t0=$(date +%s.%N)
  for i in $(seq 0 $((n - 1))); do
    port=$((18201 + i))
    "$bin/agentwire-bench" stream --url "ws://127.0.0.1:$port/v1/ws" --pid "${nodes[$i]}" --label "$bus$n" \
      --chats $((chats / n)) --n "$words" $paced > "$work/r$i" 2> /dev/null &
    pids+=($!)
  done
  wait "${pids[@]}"
  local secs; secs=$(python3 -c "import time; print(time.time() - $t0)")
  local pg1 nats1 msgs1; pg1=$(pg_cpu); nats1=$(cpu_of "$nats"); msgs1=$(nats_msgs)
  for i in $(seq 0 $((n - 1))); do
    port=$((18201 + i))
    python3 - "$work/r$i" "$bus" "$n" "$i" "$label" "$(notices $port)" "${before[$i]}" "$secs" << 'EOF'
import json, sys
path, bus, n, i, label, after, before, secs = sys.argv[1:]
f = json.load(open(path))["figures"]
cpu_us = f["server_cpu_s"] / max(f["envelopes"], 1) * 1e6
heard = (float(after) - float(before)) / float(secs)
print(f"{bus:6} {n} nodes, node {i}, {label}: p50 {f['latency_ms']['p50']} p99 {f['latency_ms']['p99']} ms, "
      f"{f['envelopes_per_s']:.0f} env/s, {cpu_us:.1f} µs CPU/envelope, {heard:.0f} notices/s received")
EOF
  done
  local total=0
  for i in $(seq 0 $((n - 1))); do
    total=$((total + $(python3 -c "import json; print(json.load(open('$work/r$i'))['figures']['envelopes'])")))
  done
  python3 - "$bus" "$n" "$label" "$total" "$secs" "$pg0" "$pg1" "$nats0" "$nats1" $msgs0 $msgs1 << 'EOF'
import sys
bus, n, label, total, secs, pg0, pg1, n0, n1, in0, out0, in1, out1 = sys.argv[1:]
total = max(int(total), 1)
each = [(float(b) - float(a)) / total * 1e6 for a, b in zip(pg0.split(), pg1.split())]
pg = f"{sum(each):.1f}" + (" (" + " + ".join(f"{e:.1f}" for e in each) + ")" if len(each) > 1 else "")
print(f"{bus:6} {n} nodes, all, {label}: {total / float(secs):.0f} env/s delivered; PostgreSQL "
      f"{pg} µs CPU/envelope; NATS {(float(n1) - float(n0)) / total * 1e6:.2f} µs "
      f"CPU/envelope, {(int(in1) - int(in0)) / float(secs):.0f} msgs/s in, {(int(out1) - int(out0)) / float(secs):.0f} out")
EOF
}

echo "== $DBS database(s), $C paced chats of $N words"
for bus in notify nats; do
  for n in 1 2 4; do
    for i in $(seq 0 $((n - 1))); do start $((18201 + i)) "$bus"; done
    sleep 3
    run "$bus" "$n" "paced $C" "$C" "$N" --paced
    run "$bus" "$n" "burst 100x2000" 100 2000 ""
    stop_nodes
  done
done
