// The app as a user's: @agentwire/client, @agentwire/react,
// @agentwire/ai-sdk and @agentwire/ag-ui as npm installed them from their
// packed tarballs (never the repository's files), against the real server.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { AgentwireClient, PROTOCOL } from '@agentwire/client';
import { Tree } from '@agentwire/client/tree';
import { applyEnvelopes, initialChatState } from '@agentwire/react';
import { agentwireTransport } from '@agentwire/ai-sdk';
import { AgentwireAgent } from '@agentwire/ag-ui';
import { DefaultChatTransport } from 'ai';

const BIN = process.env.AGENTWIRE_BIN;
if (!BIN) throw new Error('set AGENTWIRE_BIN to the agentwire binary');

const installed = fileURLToPath(import.meta.resolve('@agentwire/client'));
const cleanups = [];
after(() => cleanups.forEach((f) => f()));

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** The installed package's own package.json. */
function manifest(name, file) {
  const main = fileURLToPath(import.meta.resolve(name));
  assert.ok(main.endsWith(`/node_modules/${name}/${file}`), main);
  return JSON.parse(readFileSync(join(main, '..', 'package.json'), 'utf8'));
}

let port;
before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentwire-packed-'));
  port = await freePort();
  const server = spawn(BIN, ['serve', '--listen', `127.0.0.1:${port}`, '--database-url', `sqlite://${join(dir, 'a.db')}`, '--agents', dir], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { PATH: process.env.PATH, RUST_LOG: 'error', AGENTWIRE_TITLE_MODEL: 'none' },
  });
  cleanups.push(() => server.kill('SIGKILL'));
  for (let i = 0; i < 200; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
    if (up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('agentwire did not start');
});

test('the installed packages are the packed ones, and say their protocol', () => {
  assert.match(installed, /node_modules\/@agentwire\/client\/agentwire\.js$/);
  const pkg = JSON.parse(readFileSync(join(installed, '..', 'package.json'), 'utf8'));
  assert.equal(pkg.agentwire.protocol, PROTOCOL);
  assert.deepEqual(Object.keys(pkg.dependencies ?? {}), [], 'no runtime dependency');
  const hook = fileURLToPath(import.meta.resolve('@agentwire/react'));
  assert.match(hook, /node_modules\/@agentwire\/react\/useChat\.js$/);
  const react = JSON.parse(readFileSync(join(hook, '..', 'package.json'), 'utf8'));
  assert.equal(react.agentwire.protocol, PROTOCOL);
  assert.deepEqual(Object.keys(react.dependencies), ['@agentwire/client']);
  assert.deepEqual(Object.keys(react.peerDependencies), ['react']);
  const aiSdk = manifest('@agentwire/ai-sdk', 'transport.js');
  assert.equal(aiSdk.agentwire.protocol, PROTOCOL);
  assert.deepEqual(Object.keys(aiSdk.dependencies ?? {}), [], 'no runtime dependency');
  assert.deepEqual(Object.keys(aiSdk.peerDependencies), ['ai']);
  const agUi = manifest('@agentwire/ag-ui', 'agent.js');
  assert.equal(agUi.agentwire.protocol, PROTOCOL);
  assert.deepEqual(Object.keys(agUi.dependencies ?? {}), [], 'no runtime dependency');
  assert.deepEqual(Object.keys(agUi.peerDependencies), ['@ag-ui/client', 'rxjs']);
});

test('a chat through the installed client, every envelope once and in order', async () => {
  const client = new AgentwireClient(`ws://127.0.0.1:${port}/v1/ws`, { storage: null });
  cleanups.push(() => client.close());
  const chat = client.startChat({ agent: 'demo', message: 'ask: Your name?' });
  chat.on('chat.input_request', (m) => chat.submitInput(m.request_id, 'Ada'));
  const done = new Promise((resolve) => chat.on('chat.run_complete', resolve));
  await done;
  assert.deepEqual(chat.log.map((m) => m.seq), chat.log.map((_, i) => i + 1));
  const said = chat.log.filter((m) => m.type === 'chat.text').map((m) => m.content);
  assert.deepEqual(said, ['ask: Your name?', 'Ada', 'You answered: Ada']);
  const tree = new Tree();
  chat.log.forEach((m) => tree.push(m));
  assert.equal(tree.path().size, chat.log.length);
  // The hook's fold, from the installed @agentwire/react.
  const state = applyEnvelopes(initialChatState(), chat.log);
  assert.deepEqual(state.messages.map((m) => m.text), ['ask: Your name?', 'Ada', 'You answered: Ada']);
  assert.equal(state.run, 'idle');
});

test("the AI SDK's transport with the installed options: an answer streamed", async () => {
  const transport = new DefaultChatTransport(agentwireTransport({ baseUrl: `http://127.0.0.1:${port}`, agent: 'demo' }));
  const stream = await transport.sendMessages({
    chatId: crypto.randomUUID(),
    messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hello' }] }],
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: undefined,
  });
  let text = '';
  for await (const chunk of stream) if (chunk.type === 'text-delta') text += chunk.delta;
  assert.equal(text, 'You said: hello');
});

test('the installed AG-UI agent runs a turn', async () => {
  const agent = new AgentwireAgent({ url: `http://127.0.0.1:${port}/v1/ag-ui`, agent: 'demo' });
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: 'hello' });
  const { newMessages } = await agent.runAgent({ runId: crypto.randomUUID() });
  assert.deepEqual(newMessages.filter((m) => m.role === 'assistant').map((m) => m.content), ['You said: hello']);
});
