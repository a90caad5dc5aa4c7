// AgentwireAgent (clients/ag-ui/agent.js): AG-UI's HttpAgent that rejoins a
// run by itself when its stream breaks — a cut connection, a server restart —
// and shows every word once.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { AgentwireAgent, PROTOCOL } from '../agent.js';
import { freePort, startProxy, startServer, tempDir } from '../../js/test/support/helpers.mjs';

const cleanups = [];
after(() => cleanups.forEach((f) => f()));

async function setup(extra = [], agents = {}) {
  const dir = tempDir();
  mkdirSync(join(dir, 'agents'), { recursive: true });
  for (const [name, text] of Object.entries(agents)) writeFileSync(join(dir, 'agents', `${name}.yaml`), text);
  const port = await freePort();
  let server = await startServer(dir, port, ['--continue-runs-after-restart', 'true', ...extra]);
  const proxy = await startProxy(port, { plain: true });
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

function agentAt(base, options = {}) {
  const agent = new AgentwireAgent({ url: `${base}/v1/ag-ui`, rejoinDelayMs: 50, ...options });
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

/** An HS256 token for `sub`, as an identity provider would sign it. */
function token(secret, sub) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub, exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return `${unsigned}.${createHmac('sha256', secret).update(unsigned).digest('base64url')}`;
}

const ECHOER = `id: echoer
model:
  provider: scripted
  script:
    rules:
      - reply: "echoer here"
system_prompt: Test.
`;

test('with sign-in on, the token goes with every request, the rejoin too; `agent` names a new thread\'s agent', async () => {
  const secret = 'a-test-secret-of-32-bytes-length';
  const { proxy, base } = await setup(['--auth', 'jwt', '--jwt-secret', secret], { echoer: ECHOER });
  const ada = token(secret, 'ada');

  const { agent, events, requests } = agentAt(base, { token: ada });
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: 'slow: 40' });
  const running = agent.runAgent({ runId: crypto.randomUUID() });
  await until(() => events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length >= 10);
  proxy.cutAll();
  await running;
  assert.deepEqual(answers(agent), [words(40)]);
  assert.ok(requests.some((r) => r.url.includes('/stream?runId=')), 'rejoined');
  assert.ok(requests.every((r) => r.headers.get('authorization') === `Bearer ${ada}`));

  // A clone keeps the settings; `agent` picks a new thread's agent.
  const named = agentAt(base, { token: ada, agent: 'echoer' }).agent.clone();
  assert.equal(named.agent, 'echoer');
  assert.equal(named.rejoinDelayMs, 50);
  named.addMessage({ id: crypto.randomUUID(), role: 'user', content: 'hello' });
  await named.runAgent({ runId: crypto.randomUUID() });
  assert.deepEqual(answers(named), ['echoer here']);

  // Without the token: refused before the run began.
  const { agent: stranger } = agentAt(base);
  stranger.addMessage({ id: crypto.randomUUID(), role: 'user', content: 'hello' });
  await assert.rejects(stranger.runAgent({ runId: crypto.randomUUID() }), /401/);
});
