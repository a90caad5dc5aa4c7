#!/usr/bin/env bash
# What traces cost (issue 39): paced chats (`slow: 150`, a word every 20 ms)
# on three servers side by side, runs interleaved: the build before traces
# existed (BEFORE_BIN, optional), this build with traces off, and this build
# exporting every run's spans over OTLP/HTTP to a local sink (a Python
# http.server that answers 200 and counts the bytes). Prints one line per
# run; the figures are in bench/notes.md. Uses the release builds
# compare.sh makes.
#
#   BEFORE_BIN=/path/to/old/agentwire bench/tracing.sh [CHATS...]   # default 250 500
#   BIN_DIR=...   # where this build's agentwire and agentwire-bench are
set -u
cd "$(dirname "$0")/.."
bin="${BIN_DIR:-${CARGO_TARGET_DIR:-$HOME/.cache/agentwire/target}/release}"
work=$(mktemp -d); mkdir -p "$work/agents"
pids=()
cleanup() { kill "${pids[@]}" 2> /dev/null; wait 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT

python3 - 18199 > "$work/sink.log" 2>&1 <<'PY' &
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    received = 0
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        self.rfile.read(n)
        Sink.received += n
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        print(Sink.received, flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
PY
pids+=($!)

start() { # label port binary [env...]
  local label=$1 port=$2 server=$3; shift 3
  env "$@" RUST_LOG=warn "$server" serve --listen "127.0.0.1:$port" \
    --database-url "sqlite://$work/$label.db" --agents "$work/agents" \
    --rate-chats-per-minute 0 --rate-messages-per-minute 0 --max-runs-per-user 0 \
    --max-streams-per-user 0 --max-sockets-per-user 0 > "$work/$label.log" 2>&1 &
  pids+=($!)
  eval "pid_$label=$!"
}
servers=(off on)
[ -n "${BEFORE_BIN:-}" ] && { start before 18201 "$BEFORE_BIN"; servers=(before off on); }
start off 18202 "$bin/agentwire" OTEL_SDK_DISABLED=true
start on 18203 "$bin/agentwire" OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:18199 OTEL_BSP_SCHEDULE_DELAY=1000
sleep 2
port() { case $1 in before) echo 18201;; off) echo 18202;; on) echo 18203;; esac; }
fig() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); f=d["figures"]; l=f["latency_ms"]; print("p50", l["p50"], "p99", l["p99"], "p99.9", l.get("p99_9", l.get("p999")), "server cpu s", f["server_cpu_s"], "env/s", f["envelopes_per_s"])'; }
chats=("${@:-250 500}")
for round in 1 2; do
  for c in ${chats[@]}; do
    for s in "${servers[@]}"; do
      pid_var="pid_$s"
      echo "round $round, $c chats, $s: $("$bin/agentwire-bench" stream --url "ws://127.0.0.1:$(port "$s")/v1/ws" --pid "${!pid_var}" --label "$s" --chats "$c" --n 150 --paced 2> /dev/null | fig)"
    done
  done
done
echo "OTLP bytes received by the sink: $(tail -n 1 "$work/sink.log")"
