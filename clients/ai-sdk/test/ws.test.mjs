// The Vercel AI SDK's WebSocketChatTransport (`ai` 7) against agentwire's
// /v1/ai-sdk/ws: several chats on one socket, an approval, abort (which
// cancels the run), and a resume after the socket closed mid-stream.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { WebSocketChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';

import { Chat, startWithAgents, textOf, toolParts, until, words } from './support/chat.mjs';

let server;
let base;
before(async () => {
  let port;
  ({ server, port } = await startWithAgents());
  base = `127.0.0.1:${port}`;
});
after(() => server?.kill('SIGKILL'));

const transports = [];
const newTransport = (body = {}) => {
  const t = new WebSocketChatTransport({ url: `ws://${base}/v1/ai-sdk/ws`, body });
  transports.push(t);
  return t;
};
after(() => transports.forEach((t) => t.close()));



/** The chat's log as JSON pages. */
async function log(id) {
  const r = await fetch(`http://${base}/v1/chats/${id}/events?after=0&limit=1000`);
  return (await r.json()).events;
}

test('two chats stream on one socket, each answer whole', async () => {
  const transport = newTransport();
  const a = new Chat({ id: crypto.randomUUID(), transport });
  const b = new Chat({ id: crypto.randomUUID(), transport });
  await Promise.all([a.sendMessage({ text: 'slow: 40' }), b.sendMessage({ text: 'hello' })]);
  assert.equal(a.status, 'ready', String(a.error));
  assert.equal(textOf(a.lastMessage), words(40));
  assert.equal(textOf(b.lastMessage), 'You said: hello');
});

test('regenerate() over the socket streams a new answer', async () => {
  const chat = new Chat({ id: crypto.randomUUID(), transport: newTransport() });
  await chat.sendMessage({ text: 'hello' });
  const old = chat.lastMessage.id;
  await chat.regenerate();
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.equal(chat.messages.length, 2);
  assert.notEqual(chat.lastMessage.id, old);
  assert.equal(textOf(chat.lastMessage), 'You said: hello');
  const branch = (await log(chat.id)).find((e) => e.type === 'chat.branch');
  assert.equal(branch.reason, 'regenerate');
});

test('an approval is asked and, once given, the call runs', async () => {
  const chat = new Chat({
    id: crypto.randomUUID(),
    transport: newTransport({ agent: 'gated' }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await chat.sendMessage({ text: 'go: 2' });
  const [part] = toolParts(chat.lastMessage);
  assert.equal(part.state, 'approval-requested');
  await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
  await until(() => chat.status === 'ready' && textOf(chat.lastMessage).startsWith('Tool said:'), 'the call to run');
  assert.equal(toolParts(chat.lastMessage)[0].state, 'output-available');
  assert.equal(chat.messages.length, 2);
});

test('abort cancels the run', async () => {
  const id = crypto.randomUUID();
  const chat = new Chat({ id, transport: newTransport() });
  const sending = chat.sendMessage({ text: 'slow: 300' });
  await until(() => textOf(chat.lastMessage ?? { parts: [] }).split(' ').length > 5, 'some words');
  await chat.stop();
  await sending;
  let end;
  for (let i = 0; i < 100 && !end; i++) {
    end = (await log(id)).find((e) => e.type === 'chat.run_complete');
    if (!end) await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(end?.reason, 'cancelled');
});

test('a socket closed mid-stream: a new one resumes the run, every word once', async () => {
  const id = crypto.randomUUID();
  const first = newTransport();
  const chat = new Chat({ id, transport: first });
  const sending = chat.sendMessage({ text: 'slow: 60' });
  await until(() => textOf(chat.lastMessage ?? { parts: [] }).split(' ').length > 10, 'some words');
  first.close();
  await sending.catch(() => {});
  const again = new Chat({ id, transport: newTransport() });
  again.messages = chat.messages.filter((m) => m.role === 'user');
  await again.resumeStream();
  await until(() => again.status === 'ready', 'the resumed stream to end');
  assert.equal(textOf(again.lastMessage), words(60));
  // The run was not cancelled by the close.
  const end = (await log(id)).find((e) => e.type === 'chat.run_complete');
  assert.equal(end.reason, 'completed');
});
