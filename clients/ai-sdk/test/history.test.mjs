// The whole conversation on load, with the Vercel AI SDK's own chat (`ai` 7):
// GET /v1/ai-sdk/chat/{id}/messages gives the active path as UIMessages, the
// same ids, parts and metadata the stream built on the client, for
// `new Chat({ messages })` after a reload; the conversation goes on from it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  readUIMessageStream,
} from 'ai';

import { BIN } from '../../js/test/support/helpers.mjs';

import { Chat, startWithAgents, textOf, toolParts, until, words } from './support/chat.mjs';

let server;
let base;
let dir;
before(async () => {
  let port;
  ({ server, port, dir } = await startWithAgents());
  base = `http://127.0.0.1:${port}`;
});
after(() => server?.kill('SIGKILL'));

const transport = (agent) => new DefaultChatTransport({ api: `${base}/v1/ai-sdk/chat`, body: agent ? { agent } : {} });
const load = async (id) => {
  const r = await fetch(`${base}/v1/ai-sdk/chat/${id}/messages`);
  assert.equal(r.status, 200);
  return r.json();
};
// As JSON holds it (what a page would have kept): no undefined fields.
const plain = (m) => JSON.parse(JSON.stringify(m));
const shown = (messages) => messages.map((m) => [m.role, textOf(m)]);

/** The loaded messages are the client's: assistants whole, users by their words. */
function sameConversation(loaded, live) {
  assert.equal(loaded.length, live.length, JSON.stringify(loaded));
  live.forEach((m, i) => {
    if (m.role === 'assistant') {
      assert.deepEqual(loaded[i], plain(m), `message ${i}`);
    } else {
      assert.equal(loaded[i].role, 'user');
      assert.deepEqual(loaded[i].parts, plain(m).parts, `message ${i}`);
    }
  });
}

test('several turns load whole after a reload, each once, and go on from there', async () => {
  const id = crypto.randomUUID();
  const chat = new Chat({ id, transport: transport() });
  await chat.sendMessage({ text: 'one' });
  await chat.sendMessage({ text: 'progress: 2' });
  await chat.sendMessage({ text: 'slow: 12' });
  assert.equal(chat.status, 'ready', String(chat.error));
  const loaded = await load(id);
  sameConversation(loaded, chat.messages);

  // A new page: useChat({ messages }) from the route.
  const again = new Chat({ id, transport: transport(), messages: loaded });
  await again.resumeStream();
  assert.equal(again.messages.length, 6, 'nothing in flight: nothing added');
  await again.sendMessage({ text: 'two' });
  assert.equal(again.status, 'ready', String(again.error));
  assert.deepEqual(shown(again.messages).slice(-2), [['user', 'two'], ['assistant', 'You said: two']]);
  // The loaded ids are the server's: a regenerate names its run.
  await again.regenerate({ messageId: loaded[1].id });
  assert.equal(again.status, 'ready', String(again.error));
  assert.deepEqual(shown(again.messages), [['user', 'one'], ['assistant', 'You said: one']]);
  sameConversation(await load(id), again.messages);
  // An unknown conversation has no messages yet.
  assert.deepEqual(await load(crypto.randomUUID()), []);
});

test('tool parts load in their final states: approvals, a UI tool, an input request, reasoning', async () => {
  const id = crypto.randomUUID();
  const gated = new Chat({ id, transport: transport('gated'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
  await gated.sendMessage({ text: 'think: tea' });
  for (const approved of [true, false]) {
    await gated.sendMessage({ text: 'go: 2' });
    const [part] = toolParts(gated.lastMessage);
    await gated.addToolApprovalResponse({ id: part.approval.id, approved });
    const settled = () => gated.status === 'ready' && ['output-available', 'output-denied'].includes(toolParts(gated.lastMessage)[0].state);
    await until(settled, 'the approval to settle');
    await until(() => gated.status === 'ready', 'the run to end');
  }
  sameConversation(await load(id), gated.messages);
  const states = (await load(id)).flatMap((m) => toolParts(m).map((p) => [p.state, p.approval?.approved]));
  assert.deepEqual(states, [['output-available', true], ['output-denied', false]]);

  const other = crypto.randomUUID();
  const ui = new Chat({ id: other, transport: transport(), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
  await ui.sendMessage({ text: 'ui: picker' });
  const [call] = toolParts(ui.lastMessage);
  await ui.addToolOutput({ tool: call.toolName, toolCallId: call.toolCallId, output: { picked: 2 } });
  await until(() => ui.status === 'ready' && textOf(ui.lastMessage).startsWith('Component returned'), 'the component result');
  await ui.sendMessage({ text: 'ask: Your name?' });
  const [ask] = toolParts(ui.lastMessage);
  await ui.addToolOutput({ tool: ask.toolName, toolCallId: ask.toolCallId, output: 'Ada' });
  await until(() => ui.status === 'ready' && textOf(ui.lastMessage).startsWith('You answered'), 'the answer');
  const loaded = await load(other);
  assert.deepEqual(shown(loaded), shown(ui.messages));
  const finals = loaded.flatMap((m) => toolParts(m).map((p) => [p.toolName, p.state]));
  assert.deepEqual(finals, [[call.toolName, 'output-available'], ['ask_user', 'output-available']]);
  sameConversation(loaded, ui.messages);
});

test('a client that dropped mid-answer and came back after the run ended shows the whole answer', async () => {
  const id = crypto.randomUUID();
  const first = new Chat({ id, transport: transport() });
  const sending = first.sendMessage({ text: 'slow: 40' });
  await until(() => textOf(first.lastMessage ?? { parts: [] }).split(' ').length > 5, 'some words');
  await first.stop();
  await sending;
  // Away until the run is over.
  for (let i = 0; i < 200; i++) {
    const chat = await (await fetch(`${base}/v1/chats/${id}`)).json();
    if (chat.state === 'idle') break;
    await new Promise((r) => setTimeout(r, 25));
  }
  // The resume has nothing in flight (204): the app loads the messages again.
  const again = new Chat({ id, transport: transport(), messages: first.messages.filter((m) => m.role === 'user') });
  await again.resumeStream();
  assert.equal(again.messages.length, 1, 'the resume brought nothing');
  again.messages = await load(id);
  assert.deepEqual(shown(again.messages), [['user', 'slow: 40'], ['assistant', words(40)]]);
  assert.equal(again.lastMessage.parts.filter((p) => p.type === 'text').length, 1, 'the answer once');
});

/** The JSON chunks of an SSE body (`[DONE]` left out). */
const chunksOf = (body) => body.split('\n\n')
  .flatMap((event) => event.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)))
  .filter((d) => d !== '[DONE]')
  .map((d) => JSON.parse(d));

test("a backend's post (a text, a widget, a file) loads as an assistant message, folds in `ai`, and the chat goes on", async () => {
  const id = crypto.randomUUID();
  const chat = new Chat({ id, transport: transport() });
  await chat.sendMessage({ text: 'hello' });
  await until(() => chat.status === 'ready', 'the answer');
  // The backend's key, made beside the running server.
  const made = spawnSync(BIN, ['keys', 'create', '--name', 'crm', '--scopes', 'publish'], {
    env: { PATH: process.env.PATH, AGENTWIRE_DATABASE_URL: `sqlite://${join(dir, 'data', 'agentwire.db')}` },
    encoding: 'utf8',
  });
  assert.equal(made.status, 0, made.stderr);
  const auth = { authorization: `Bearer ${made.stdout.trim()}` };
  const up = await fetch(`${base}/v1/server/chats/${id}/files?user=dev&name=q3.csv`, {
    method: 'POST', headers: { ...auth, 'content-type': 'text/csv' }, body: 'month,total\nJuly,42\n',
  });
  assert.equal(up.status, 201);
  const file = await up.json();
  const before = (await (await fetch(`${base}/v1/chats/${id}`)).json()).last_seq;
  const posted = await fetch(`${base}/v1/server/chats/${id}/posts`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ user: 'dev', text: 'Your report is ready.', widget: { component_type: 'report_card', payload: { rows: 3 } }, attachments: [{ file_id: file.id }] }),
  });
  assert.equal(posted.status, 201);

  // Loaded: the post is an assistant message of its own after the answer.
  const loaded = await load(id);
  assert.deepEqual(loaded.map((m) => m.role), ['user', 'assistant', 'assistant']);
  const post = loaded[2];
  assert.equal(textOf(post), 'Your report is ready.');
  const card = post.parts.find((p) => p.type === 'data-component');
  assert.equal(card?.data.component_type, 'report_card', JSON.stringify(post.parts));
  const tools = toolParts(post);
  assert.deepEqual(tools.map((p) => [p.toolName, p.state]), [['share_file', 'output-available']]);
  assert.deepEqual(tools[0].output, { type: 'file', file_id: file.id, name: 'q3.csv', media_type: 'text/csv', size: 20 });

  // The post's stream, as a rejoin after its opening gives it, folds in the
  // `ai` package (which refuses an output for a call it has no part of) to
  // the message loaded.
  const r = await fetch(`${base}/v1/ai-sdk/chat/${id}/stream`, { headers: { 'last-event-id': `w${before}-0` } });
  assert.equal(r.status, 200);
  const chunks = chunksOf(await r.text());
  const stream = new ReadableStream({
    start(c) {
      c.enqueue({ type: 'start', messageId: post.id });
      chunks.forEach((x) => c.enqueue(x));
      c.close();
    },
  });
  let folded;
  for await (const m of readUIMessageStream({ stream, terminateOnError: true })) folded = m;
  assert.deepEqual(plain(folded.parts), post.parts);

  // A page loaded from these messages goes on.
  const again = new Chat({ id, transport: transport(), messages: loaded });
  await again.sendMessage({ text: 'thanks' });
  await until(() => again.status === 'ready' && again.messages.length === 5, 'the next answer');
  assert.equal(textOf(again.lastMessage), 'You said: thanks');
});
