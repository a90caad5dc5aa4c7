// useChat with React's test tooling (@testing-library/react on jsdom), against
// the real server: a streamed answer, an input request, a UI component.
import { NodeWebSocket } from './support/node-ws.mjs';
import 'global-jsdom/register';

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { act, renderHook, waitFor } from '@testing-library/react';

import { AgentwireClient } from '../../js/agentwire.js';
import { freePort, startServer, tempDir } from '../../js/test/support/helpers.mjs';
import { useChat } from '../useChat.js';

globalThis.IS_REACT_ACT_ENVIRONMENT = true;

let server;
let client;
before(async () => {
  const port = await freePort();
  const dir = tempDir();
  // The example group (its HTTP tool unreachable here: the researcher says so).
  mkdirSync(join(dir, 'agents'), { recursive: true });
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
  copyFileSync(join(root, 'examples', 'agents', 'research-team.yaml'), join(dir, 'agents', 'research-team.yaml'));
  server = await startServer(dir, port);
  client = new AgentwireClient(`ws://127.0.0.1:${port}/v1/ws`, { storage: null, WebSocket: NodeWebSocket });
});
after(() => {
  client?.close();
  server?.kill('SIGKILL');
});

const wait = (f) => waitFor(f, { timeout: 15000, interval: 20 });

function mount(agent = 'demo') {
  const chat = client.startChat({ agent });
  const seen = [];
  const hook = renderHook(() => {
    const state = useChat(client, chat.id);
    seen.push(state);
    return state;
  });
  return { hook, seen, chat };
}

test('a streamed answer', async () => {
  const { hook, seen } = mount();
  await act(async () => hook.result.current.send('slow: 12'));
  await wait(() => assert.equal(hook.result.current.lastRunEnd, 'completed'));
  const state = hook.result.current;
  const words = Array.from({ length: 12 }, (_, i) => `w${i + 1}`).join(' ');
  assert.deepEqual(state.messages.map((m) => [m.role, m.text, m.streaming]), [
    ['user', 'slow: 12', false],
    ['agent', words, false],
  ]);
  assert.ok(seen.some((s) => s.messages[1]?.streaming && s.messages[1].text.length < words.length), 'seen while streaming');
  assert.equal(state.run, 'idle');
  assert.equal(state.usage.length, 1);
  hook.unmount();
});

test('an input request answered', async () => {
  const { hook } = mount();
  await act(async () => hook.result.current.send('ask: Your name?'));
  await wait(() => assert.equal(hook.result.current.pendingInputs.length, 1));
  const req = hook.result.current.pendingInputs[0];
  assert.equal(req.prompt, 'Your name?');
  assert.equal(req.password, false);
  await act(async () => hook.result.current.submitInput(req.requestId, 'Ada'));
  await wait(() => assert.equal(hook.result.current.messages.at(-1).text, 'You answered: Ada'));
  assert.equal(hook.result.current.inputRequests[0].status, 'answered');
  assert.equal(hook.result.current.pendingInputs.length, 0);
  hook.unmount();
});

test('a UI component answered', async () => {
  const { hook } = mount();
  await act(async () => hook.result.current.send('ui: color_picker'));
  await wait(() => assert.equal(hook.result.current.pendingComponents.length, 1));
  const call = hook.result.current.pendingComponents[0];
  assert.equal(call.componentType, 'color_picker');
  await act(async () => hook.result.current.answer(call.corr, { color: 'teal' }));
  await wait(() => assert.equal(hook.result.current.messages.at(-1).text, 'Component returned: {"color":"teal"}'));
  const done = hook.result.current.toolCalls[0];
  assert.deepEqual([done.awaiting, done.success, done.result], [false, true, { color: 'teal' }]);
  hook.unmount();
});

test('a chat opened later is replayed from its start', async () => {
  const chat = client.startChat({ agent: 'demo', message: 'hello' });
  await wait(() => assert.ok(chat.log.some((m) => m.type === 'chat.run_complete')));
  const other = new AgentwireClient(client.url, { storage: null, WebSocket: NodeWebSocket });
  const hook = renderHook(() => useChat(other, chat.id));
  await wait(() => assert.equal(hook.result.current.messages.at(-1)?.text, 'You said: hello'));
  assert.equal(hook.result.current.messages.length, 2);
  hook.unmount();
  other.close();
});

test('a group: one message per member turn, each under its name', async () => {
  const { hook } = mount('research-team');
  await act(async () => hook.result.current.send('trip to Lisbon'));
  await wait(() => assert.equal(hook.result.current.lastRunEnd, 'completed'));
  const state = hook.result.current;
  assert.deepEqual(state.messages.map((m) => m.agent), ['user', 'planner', 'researcher', 'writer']);
  assert.ok(state.messages.every((m) => !m.streaming));
  assert.equal(state.toolCalls[0].agent, 'researcher');
  assert.equal(state.toolCalls[0].success, false, 'no weather server here');
  assert.deepEqual(Object.keys(state.usage[0].byAgent).sort(), ['planner', 'researcher', 'writer']);
  hook.unmount();
});

test('edit, regenerate, switch versions; a message typed during a run interrupts it', async () => {
  const { hook, chat } = mount();
  const now = () => hook.result.current;
  const shown = () => now().messages.map((m) => [m.role, m.text, m.versions ? `${m.versions.index + 1}/${m.versions.all.length}` : '']);
  await act(async () => now().send('first'));
  await wait(() => assert.equal(now().lastRunEnd, 'completed'));
  await act(async () => now().edit(now().messages[0].seq, 'second'));
  await wait(() => assert.deepEqual(shown(), [['user', 'second', '2/2'], ['agent', 'You said: second', '']]));
  await wait(() => assert.equal(now().run, 'idle'));
  await act(async () => now().regenerate());
  await wait(() => assert.deepEqual(shown(), [['user', 'second', '2/2'], ['agent', 'You said: second', '2/2']]));
  await wait(() => assert.equal(now().run, 'idle'));
  // Back to the first version of the question: its own answer again.
  await act(async () => now().switchTo(now().messages[0].versions.all[0]));
  await wait(() => assert.deepEqual(shown(), [['user', 'first', '1/2'], ['agent', 'You said: first', '']]));

  // A slow answer cut off by a message sent with `interrupt`.
  await act(async () => now().send('slow: 200'));
  await wait(() => assert.ok(now().messages.at(-1).role === 'agent' && now().messages.at(-1).text.startsWith('w1')));
  await act(async () => now().send('enough', { multitaskStrategy: 'interrupt' }));
  await wait(() => assert.equal(now().messages.at(-1).text, 'You said: enough'));
  const cut = now().messages.at(-3);
  assert.equal(cut.partial, true);
  assert.match(cut.text, /^w1( w\d+)* ?$/);
  assert.deepEqual(now().queued, []);
  assert.equal(now().messages.at(-2).text, 'enough');
  // Opened by another client: the whole log replayed, folded at once, shows the same.
  const view = (state) => state.messages.map((m) => [m.role, m.text, m.versions ? `${m.versions.index + 1}/${m.versions.all.length}` : '', m.partial ?? false]);
  const mine = view(now());
  const other = new AgentwireClient(client.url, { storage: null, WebSocket: NodeWebSocket });
  const later = renderHook(() => useChat(other, chat.id));
  await wait(() => assert.deepEqual(view(later.result.current), mine));
  later.unmount();
  other.close();
  hook.unmount();
});

test('sendFiles uploads, attaches and folds the files on the message', async () => {
  const { hook } = mount();
  const notes = new Blob(['tide at 6:40'], { type: 'text/plain' });
  await act(async () => { await hook.result.current.sendFiles('read this', [notes]); });
  await wait(() => assert.equal(hook.result.current.lastRunEnd, 'completed'));
  const [user, answer] = hook.result.current.messages;
  assert.equal(user.text, 'read this');
  assert.equal(user.attachments.length, 1);
  assert.equal(user.attachments[0].media_type, 'text/plain');
  assert.equal(user.attachments[0].size, 12);
  assert.equal(answer.text, `You said: read this\nYou attached: ${user.attachments[0].name} (text/plain, 12 characters)`);
  const blob = await client.fetchFile(user.attachments[0].file_id);
  assert.equal(await blob.text(), 'tide at 6:40');
  hook.unmount();
});

test('a socket that opened between the render and the effect still shows as open', async () => {
  await wait(() => assert.equal(client.state, 'open'));
  // The render reads `connecting`; the socket opens before the effect
  // listens, so no `state` event reaches the hook: it reads the state again.
  let reads = 0;
  const view = new Proxy(client, {
    get(target, key) {
      if (key === 'state') return reads++ === 0 ? 'connecting' : target.state;
      const value = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const hook = renderHook(() => useChat(view, null));
  await wait(() => assert.equal(hook.result.current.connection, 'open'));
  hook.unmount();
});
