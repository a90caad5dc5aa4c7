// The peer: a Socket.IO 4 server with connection state recovery, sending what
// agentwire's `burst: N` (all at once) and `slow: N` (a word every 20 ms) runs send (the same envelope JSON, one event each) to
// every socket in the chat's room. Driven by `agentwire-bench --protocol
// socketio`, which speaks Engine.IO v4 over a WebSocket.
//
//   PORT=8091 node bench/socketio/server.mjs
import { Server } from "socket.io";

const port = Number(process.env.PORT || 8091);
const io = new Server(port, {
  transports: ["websocket"],
  // Missed packets are kept (in memory) for reconnecting clients: the
  // closest Socket.IO comes to agentwire's durable log.
  connectionStateRecovery: { maxDisconnectionDuration: 2 * 60 * 1000, skipMiddlewares: true },
  maxHttpBufferSize: 1e6,
});

const ts = () => new Date().toISOString();

// Yield to the event loop every so often so sockets drain while a burst runs.
const YIELD_EVERY = 256;

async function burst(chat, message) {
  const m = /^(burst|slow): (\d+)$/.exec(message || "");
  const n = m ? Number(m[2]) : 1;
  const slow = m && m[1] === "slow";
  let seq = 0;
  const send = (env) => {
    seq += 1;
    io.to(chat).emit("env", JSON.stringify({ ...env, chat_id: chat, seq, ts: ts() }));
  };
  send({ type: "chat.text", agent: "user", content: message });
  send({ type: "chat.select_speaker", agent: "demo" });
  let words = "";
  for (let i = 1; i <= n; i++) {
    const word = i === n ? `w${i}` : `w${i} `;
    words += word;
    send({ type: "chat.print", agent: "demo", content: word });
    if (slow) await new Promise((r) => setTimeout(r, 20));
    else if (i % YIELD_EVERY === 0) await new Promise(setImmediate);
  }
  send({ type: "chat.text", agent: "demo", content: words });
  send({ type: "chat.usage_summary", agent: "demo", usage: { input_tokens: 2, output_tokens: n }, cost: 0 });
  send({ type: "chat.run_complete", reason: "completed" });
}

io.on("connection", (socket) => {
  socket.on("ping", () => socket.emit("env", JSON.stringify({ type: "pong" })));
  socket.on("chat.start", (m) => {
    socket.join(m.chat_id);
    if (m.message) burst(m.chat_id, m.message);
  });
  socket.on("client.resume", (m) => {
    socket.join(m.chat_id);
    socket.emit("env", JSON.stringify({ type: "chat.resume_boundary", chat_id: m.chat_id, last_seq: 0, recovered: false, ts: ts() }));
  });
  socket.on("user.message", (m) => burst(m.chat_id, m.text));
});

console.error(`socket.io peer listening on ${port}`);
