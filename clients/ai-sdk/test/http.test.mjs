// The Vercel AI SDK's own chat (`ai` 7: AbstractChat over DefaultChatTransport)
// against agentwire's /v1/ai-sdk/chat: answers, tool calls, an approval given
// and refused, a UI tool and an input request answered the AI SDK way, and a
// resume after the client dropped mid-stream (no part twice, no delta lost).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';

import { startServer } from '../../js/test/support/helpers.mjs';
import { Chat, startWithAgents, textOf, toolParts, until, words } from './support/chat.mjs';

let server;
let base;
let port;
let dir;
before(async () => {
  ({ server, port, dir } = await startWithAgents());
  base = `http://127.0.0.1:${port}`;
});
after(() => server?.kill('SIGKILL'));

const newChat = (agent, extra = {}) => new Chat({
  id: crypto.randomUUID(),
  transport: new DefaultChatTransport({ api: `${base}/v1/ai-sdk/chat`, body: agent ? { agent } : {} }),
  ...extra,
});



test('a demo answer is one assistant message', async () => {
  const chat = newChat();
  await chat.sendMessage({ text: 'hello' });
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.equal(chat.messages.length, 2);
  const [user, answer] = chat.messages;
  assert.equal(user.role, 'user');
  assert.equal(answer.role, 'assistant');
  assert.equal(textOf(answer), 'You said: hello');
  assert.match(answer.id, /^[0-9a-f-]{36}:\d+$/);
  assert.equal(typeof answer.metadata.usage.totalTokens, 'number');
});

test("the model's reasoning is a reasoning part before the answer", async () => {
  const chat = newChat('gated');
  await chat.sendMessage({ text: 'think: tea' });
  assert.equal(chat.status, 'ready', String(chat.error));
  const parts = chat.lastMessage.parts.filter((p) => p.type === 'reasoning' || p.type === 'text');
  assert.deepEqual(parts.map((p) => [p.type, p.text, p.state]), [
    ['reasoning', 'Weighing tea against the alternatives', 'done'],
    ['text', 'Go with tea.', 'done'],
  ]);
});

test('streamed words arrive once, and a tool call has its result', async () => {
  const chat = newChat();
  await chat.sendMessage({ text: 'slow: 30' });
  assert.equal(textOf(chat.lastMessage), words(30));
  await chat.sendMessage({ text: 'progress: 2' });
  const [call] = toolParts(chat.lastMessage);
  assert.equal(call.toolName, 'progress');
  assert.equal(call.state, 'output-available');
  assert.equal(textOf(chat.lastMessage), 'Done');
});

test('an approval granted runs the call; one refused does not', async () => {
  for (const approved of [true, false]) {
    const chat = newChat('gated', { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
    await chat.sendMessage({ text: 'go: 2' });
    const [part] = toolParts(chat.lastMessage);
    assert.equal(part.state, 'approval-requested');
    assert.equal(part.toolName, 'guarded');
    await chat.addToolApprovalResponse({ id: part.approval.id, approved, reason: approved ? undefined : 'no' });
    const settled = () => {
      const [p] = toolParts(chat.lastMessage);
      return chat.status === 'ready' && (approved ? textOf(chat.lastMessage).startsWith('Tool said:') : p.state === 'output-denied');
    };
    await until(settled, `the run to go on (approved: ${approved})`);
    assert.equal(chat.messages.length, 2, 'the answer goes on in the same message');
    const [done] = toolParts(chat.lastMessage);
    assert.equal(done.state, approved ? 'output-available' : 'output-denied');
  }
});

test('a UI tool and an input request are answered as tool outputs', async () => {
  const chat = newChat(null, { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
  await chat.sendMessage({ text: 'ui: picker' });
  const [ui] = toolParts(chat.lastMessage);
  assert.equal(ui.state, 'input-available');
  assert.equal(ui.toolMetadata.component_type, 'picker');
  await chat.addToolOutput({ tool: ui.toolName, toolCallId: ui.toolCallId, output: { picked: 2 } });
  await until(() => chat.status === 'ready' && textOf(chat.lastMessage).startsWith('Component returned'), 'the component result');
  assert.equal(textOf(chat.lastMessage), 'Component returned: {"picked":2}');

  await chat.sendMessage({ text: 'ask: Your name?' });
  const [ask] = toolParts(chat.lastMessage);
  assert.equal(ask.toolName, 'ask_user');
  assert.equal(ask.input.prompt, 'Your name?');
  await chat.addToolOutput({ tool: ask.toolName, toolCallId: ask.toolCallId, output: 'Ada' });
  await until(() => chat.status === 'ready' && textOf(chat.lastMessage).startsWith('You answered'), 'the answer');
  assert.equal(textOf(chat.lastMessage), 'You answered: Ada');
  // Sent again once the run is over: nothing waits, the response ends at once.
  await chat.sendMessage();
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.equal(textOf(chat.lastMessage), 'You answered: Ada');
});

test('regenerate() writes an answer again; the old one stays a version in the log', async () => {
  const chat = newChat();
  await chat.sendMessage({ text: 'one' });
  const first = chat.lastMessage;
  await chat.sendMessage({ text: 'two' });
  await chat.regenerate();
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.equal(chat.messages.length, 4);
  assert.equal(textOf(chat.lastMessage), 'You said: two');
  const again = chat.lastMessage.id;
  assert.match(again, /^[0-9a-f-]{36}:\d+$/);
  // An older answer: the client keeps what came before it; the answer streams anew.
  await chat.regenerate({ messageId: first.id });
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.deepEqual(chat.messages.map((m) => [m.role, textOf(m)]), [['user', 'one'], ['assistant', 'You said: one']]);
  assert.notEqual(chat.lastMessage.id, first.id);
  assert.ok(!chat.messages.some((m) => m.id === again), 'the answer it replaced is gone');
  // Both answers to `one` are versions of the chat's tree, the new one active.
  const b = await (await fetch(`${base}/v1/chats/${chat.id}/branches`)).json();
  const [answerSeq] = chat.lastMessage.id.split(':').slice(1).map(Number);
  const point = b.points.find((p) => p.versions.includes(answerSeq + 1) || p.active === answerSeq + 1);
  assert.ok(point, JSON.stringify(b));
  assert.equal(point.versions.length, 2);
  // And the conversation goes on from it.
  await chat.sendMessage({ text: 'three' });
  assert.equal(textOf(chat.lastMessage), 'You said: three');
});

test("regenerate() of a user's message answers that message again", async () => {
  const chat = newChat();
  await chat.sendMessage({ text: 'one' });
  await chat.sendMessage({ text: 'two' });
  const before = (await (await fetch(`${base}/v1/chats/${chat.id}`)).json()).last_seq;
  // The AI SDK keeps the messages up to that user's message and asks again.
  await chat.regenerate({ messageId: chat.messages[0].id });
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.deepEqual(chat.messages.map((m) => [m.role, textOf(m)]), [['user', 'one'], ['assistant', 'You said: one']]);
  // On the server: a regenerate of the first message, not of the last answer.
  const log = await (await fetch(`${base}/v1/chats/${chat.id}/events?after=${before}&limit=100`)).json();
  const branch = log.events.find((e) => e.type === 'chat.branch');
  assert.equal(branch.reason, 'regenerate');
  assert.equal(branch.at, 1, 'the answer to `one`, the first message');
});

test('sendMessage with a messageId edits that message; the conversation goes on from it', async () => {
  const chat = newChat();
  await chat.sendMessage({ text: 'one' });
  await chat.sendMessage({ text: 'two' });
  await chat.sendMessage({ text: 'TWO', messageId: chat.messages[2].id });
  assert.equal(chat.status, 'ready', String(chat.error));
  const shown = () => chat.messages.map((m) => [m.role, textOf(m)]);
  assert.deepEqual(shown(), [['user', 'one'], ['assistant', 'You said: one'], ['user', 'TWO'], ['assistant', 'You said: TWO']]);
  await chat.sendMessage({ text: 'uno', messageId: chat.messages[0].id });
  assert.deepEqual(shown(), [['user', 'uno'], ['assistant', 'You said: uno']]);
  const b = await (await fetch(`${base}/v1/chats/${chat.id}/branches`)).json();
  assert.deepEqual(b.points.map((p) => p.versions.length), [2, 2], JSON.stringify(b));
  assert.equal(b.points[0].at, 0, 'the first message has two versions');
});

test('a client that drops mid-stream resumes: every word once', async () => {
  const id = crypto.randomUUID();
  const transport = new DefaultChatTransport({ api: `${base}/v1/ai-sdk/chat` });
  const first = new Chat({ id, transport });
  const sending = first.sendMessage({ text: 'slow: 60' });
  await until(() => textOf(first.lastMessage ?? { parts: [] }).split(' ').length > 10, 'some words');
  await first.stop();
  await sending;
  // A new page: the history it had, then the transport's resume.
  const again = new Chat({ id, transport });
  again.messages = first.messages.filter((m) => m.role === 'user');
  await again.resumeStream();
  await until(() => again.status === 'ready', 'the resumed stream to end');
  assert.equal(textOf(again.lastMessage), words(60));
  assert.equal(again.lastMessage.parts.filter((p) => p.type === 'text').length, 1);
  // Nothing in flight: the resume is a 204.
  const r = await fetch(`${base}/v1/ai-sdk/chat/${id}/stream`);
  assert.equal(r.status, 204);
});

test('the REST cancel ends the run, and the open stream finishes with it', async () => {
  // Any id of the caller's names their chat, for the cancel too.
  const chat = new Chat({ id: `page-${crypto.randomUUID()}`, transport: new DefaultChatTransport({ api: `${base}/v1/ai-sdk/chat` }) });
  const sending = chat.sendMessage({ text: 'slow: 200' });
  await until(() => textOf(chat.lastMessage ?? { parts: [] }).split(' ').length > 5, 'some words');
  const r = await fetch(`${base}/v1/chats/${chat.id}/cancel`, { method: 'POST' });
  assert.ok(r.ok, await r.text());
  await sending;
  assert.equal(chat.status, 'ready', String(chat.error));
  const said = textOf(chat.lastMessage).split(' ');
  assert.ok(said.length < 200, 'the run ended early');
  const chatId = chat.lastMessage.id.split(':')[0];
  const page = await (await fetch(`${base}/v1/chats/${chatId}/events?after=0&limit=1000`)).json();
  // The run's end (a title may follow it: the chat's first run titles it).
  assert.equal(page.events.findLast((e) => e.type === 'chat.run_complete').reason, 'cancelled');
});

test('a server killed mid-stream continues the run; the resume shows it once', async () => {
  const id = crypto.randomUUID();
  const transport = new DefaultChatTransport({ api: `${base}/v1/ai-sdk/chat` });
  const first = new Chat({ id, transport });
  const sending = first.sendMessage({ text: 'slow: 80' });
  await until(() => textOf(first.lastMessage ?? { parts: [] }).split(' ').length > 10, 'some words');
  server.kill('SIGKILL');
  await new Promise((r) => server.once('exit', r));
  await sending;
  server = await startServer(dir, port);
  const again = new Chat({ id, transport });
  again.messages = first.messages.filter((m) => m.role === 'user');
  await again.resumeStream();
  await until(() => again.status === 'ready', 'the resumed stream to end');
  assert.equal(textOf(again.lastMessage), words(80), 'the words of the discarded turn are gone');
  assert.equal(again.lastMessage.parts.filter((p) => p.type === 'text').length, 1);
});

test("the agent file's tools are named parts, as a server with typed tools sends them", async () => {
  const chat = newChat('gated');
  await chat.sendMessage({ text: 'go: 1' });
  const types = chat.lastMessage.parts.map((p) => p.type).filter((t) => t.includes('tool'));
  assert.deepEqual(types, ['tool-guarded']);
});

test("a run that fails sets the chat's status and error", async () => {
  const chat = newChat();
  await chat.sendMessage({ text: 'fail' });
  assert.equal(chat.status, 'error');
  assert.equal(chat.error?.message, 'The demo tool failed, as asked.');
  // The message so far is kept, with where the response stopped.
  assert.ok(chat.lastMessage.metadata?.agentwire?.seq > 0);
});

test('messages kept without their metadata still answer what the run waits on', async () => {
  const first = newChat('gated');
  await first.sendMessage({ text: 'go: 2' });
  const [part] = toolParts(first.lastMessage);
  assert.equal(part.state, 'approval-requested');
  // An app that stores messages its own way: no metadata comes back.
  const stored = structuredClone(first.messages).map(({ metadata, ...m }) => m);
  const again = new Chat({
    id: first.id,
    messages: stored,
    transport: new DefaultChatTransport({ api: `${base}/v1/ai-sdk/chat` }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await again.addToolApprovalResponse({ id: part.approval.id, approved: true });
  await until(() => again.status === 'ready' && textOf(again.lastMessage).startsWith('Tool said:'), 'the run to go on');
  assert.equal(String(again.error), 'undefined');
  assert.equal(toolParts(again.lastMessage)[0].state, 'output-available');
});

/** A small PNG (its signature and header, then bytes). */
const png = () => Buffer.concat([
  Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'),
  Buffer.from(Array.from({ length: 200 }, (_, i) => (i * 7) % 251)),
]);

test('sendMessage({files}): the file is kept, attached, read by the model and replayed at its URL', async () => {
  const chat = newChat();
  const bytes = png();
  const url = `data:image/png;base64,${bytes.toString('base64')}`;
  await chat.sendMessage({ text: 'look', files: [{ type: 'file', mediaType: 'image/png', filename: 'cat.png', url }] });
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.equal(textOf(chat.lastMessage), `You said: look\nYou attached: cat.png (image/png, ${bytes.length} bytes)`);
  // The whole history goes again with the next message (the data URL
  // too): only the new message is read.
  await chat.sendMessage({ text: 'and now' });
  assert.equal(textOf(chat.lastMessage), 'You said: and now');
  // Loaded back, the user's message holds the file part at its URL here,
  // never the bytes.
  const chatId = chat.lastMessage.id.split(':')[0];
  const loaded = await (await fetch(`${base}/v1/ai-sdk/chat/${chatId}/messages`)).json();
  const [file] = loaded[0].parts.filter((p) => p.type === 'file');
  assert.equal(file.filename, 'cat.png');
  assert.equal(file.mediaType, 'image/png');
  assert.match(file.url, /^\/v1\/files\/[0-9a-f-]{36}$/);
  assert.ok(!JSON.stringify(loaded).includes(bytes.toString('base64')));
  const got = Buffer.from(await (await fetch(base + file.url)).arrayBuffer());
  assert.deepEqual(got, bytes);
  // A chat made from them goes on: the file part names the stored file.
  const again = new Chat({ id: chat.id, messages: loaded,
    transport: new DefaultChatTransport({ api: `${base}/v1/ai-sdk/chat` }) });
  await again.sendMessage({ text: 'once more', files: [file] });
  assert.equal(textOf(again.lastMessage), `You said: once more\nYou attached: cat.png (image/png, ${bytes.length} bytes)`);
  // Another server's URL is never fetched: the send fails, saying so.
  const other = newChat();
  await other.sendMessage({ text: 'x', files: [{ type: 'file', mediaType: 'image/png', url: 'https://example.com/cat.png' }] });
  assert.equal(other.status, 'error');
  assert.match(String(other.error), /fetches no URL/);
});
