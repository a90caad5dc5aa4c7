// AgentwireAgent (clients/ag-ui/agent.js): AG-UI's HttpAgent that rejoins a
// run by itself when its stream breaks — a cut connection, a server restart —
// and shows every word once.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import net from 'node:net';

import { AgentwireAgent, PROTOCOL } from '../agent.js';
import { freePort, startServer, tempDir } from '../../js/test/support/helpers.mjs';

/** A plain TCP proxy to 127.0.0.1:`target` whose `cutAll()` drops every
 * connection (the WebSocket proxy of the JS tests reads frames). */
async function startProxy(target) {
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        client.destroy();
        upstream.destroy();
        sockets.delete(s);
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    cutAll() {
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    close() {
      this.cutAll();
      server.close();
    },
  };
}

const cleanups = [];
after(() => cleanups.forEach((f) => f()));

async function setup() {
  const dir = tempDir();
  const port = await freePort();
  let server = await startServer(dir, port, ['--continue-runs-after-restart', 'true']);
  const proxy = await startProxy(port);
  cleanups.push(() => {
    proxy.close();
    server.kill('SIGKILL');
  });
  return {
    proxy,
    base: `http://127.0.0.1:${proxy.port}`,
    async restart() {
      server.kill('SIGKILL');
      await new Promise((r) => server.once('exit', r));
      server = await startServer(dir, port, ['--continue-runs-after-restart', 'true']);
    },
  };
}

async function until(check) {
  for (let i = 0; i < 400; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('timed out');
}

function agentAt(base) {
  const agent = new AgentwireAgent({ url: `${base}/v1/ag-ui`, rejoinDelayMs: 50 });
  const events = [];
  const requests = [];
  const fetcher = agent.fetch;
  agent.fetch = (url, init) => {
    requests.push({ url: String(url), headers: new Headers(init?.headers) });
    return fetcher(url, init);
  };
  agent.subscribe({ onEvent: ({ event }) => { events.push(event); } });
  return { agent, events, requests };
}

const words = (n) => Array.from({ length: n }, (_, i) => `w${i + 1}`).join(' ');
const answers = (agent) => agent.messages.filter((m) => m.role === 'assistant' && m.content).map((m) => m.content);

test('a cut stream is rejoined after the last event: every word once, one verified run', async () => {
  const { proxy, base } = await setup();
  const { agent, events, requests } = agentAt(base);
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: 'slow: 60' });
  const running = agent.runAgent({ runId: crypto.randomUUID() });
  await until(() => events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length >= 10);
  proxy.cutAll();
  await running;
  assert.deepEqual(answers(agent), [words(60)]);
  assert.deepEqual(events.filter((e) => e.type.startsWith('RUN_')).map((e) => e.type), ['RUN_STARTED', 'RUN_FINISHED']);
  // The rejoin asked after the last event it had, naming the run.
  const rejoin = requests.find((r) => r.url.includes('/stream?runId='));
  assert.ok(rejoin, JSON.stringify(requests.map((r) => r.url)));
  assert.match(rejoin.headers.get('last-event-id') ?? '', /^\d+/);
  assert.ok(requests.every((r) => r.headers.get('agentwire-protocol') === String(PROTOCOL)));
});

test('a server restart mid-answer: the cut turn is dropped, the continued answer shows once', async () => {
  const { base, restart } = await setup();
  const { agent, events } = agentAt(base);
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: 'slow: 80' });
  const running = agent.runAgent({ runId: crypto.randomUUID() });
  await until(() => events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length >= 10);
  await restart();
  await running;
  assert.ok(events.some((e) => e.type === 'CUSTOM' && e.name === 'agentwire.turn_discarded'), 'the cut turn was discarded');
  assert.deepEqual(answers(agent), [words(80)], 'no half answer left beside the whole one');
});

test("a request refused before the run began is the caller's error, not retried", async () => {
  const { base } = await setup();
  const { agent, requests } = agentAt(base);
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: 'x'.repeat(2_000_000) });
  await assert.rejects(agent.runAgent({ runId: crypto.randomUUID() }));
  assert.equal(requests.length, 1);
});
