// The Vercel AI SDK's own chat (`ai` 7: AbstractChat over DefaultChatTransport)
// against agentwire's /v1/ai-sdk/chat: answers, tool calls, an approval given
// and refused, a UI tool and an input request answered the AI SDK way, and a
// resume after the client dropped mid-stream (no part twice, no delta lost).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';

import { freePort, startServer, tempDir } from '../../js/test/support/helpers.mjs';

/** The plain state a framework binding would keep. */
class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot(thing) { return structuredClone(thing); }
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new State() }); }
}

const GATED = `id: gated
model:
  provider: scripted
  script:
    rules:
      - prefix: "go: "
        arg: count
        max: 5
        call: {tool: guarded, input: {steps: "{arg}"}}
        then: "Tool said: {result}"
      - reply: "ok"
system_prompt: Test.
tools:
  - name: guarded
    input_schema: {type: object, properties: {steps: {type: integer, minimum: 1}}, required: [steps]}
    builtin: progress
    requires_approval: true
`;

let server;
let base;
let port;
let dir;
before(async () => {
  port = await freePort();
  dir = tempDir();
  mkdirSync(join(dir, 'agents'), { recursive: true });
  writeFileSync(join(dir, 'agents', 'gated.yaml'), GATED);
  server = await startServer(dir, port);
  base = `http://127.0.0.1:${port}`;
});
after(() => server?.kill('SIGKILL'));

const newChat = (agent, extra = {}) => new Chat({
  id: crypto.randomUUID(),
  transport: new DefaultChatTransport({ api: `${base}/v1/ai-sdk/chat`, body: agent ? { agent } : {} }),
  ...extra,
});

const textOf = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
const toolParts = (m) => m.parts.filter((p) => p.type === 'dynamic-tool');

/** Waits until `check()` holds. */
async function until(check, what) {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

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
  assert.equal(answer.metadata.usage.totalTokens >= 0, true);
});

test('streamed words arrive once, and a tool call has its result', async () => {
  const chat = newChat();
  await chat.sendMessage({ text: 'slow: 30' });
  const words = Array.from({ length: 30 }, (_, i) => `w${i + 1}`).join(' ');
  assert.equal(textOf(chat.lastMessage), words);
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
  const words = Array.from({ length: 60 }, (_, i) => `w${i + 1}`).join(' ');
  assert.equal(textOf(again.lastMessage), words);
  assert.equal(again.lastMessage.parts.filter((p) => p.type === 'text').length, 1);
  // Nothing in flight: the resume is a 204.
  const r = await fetch(`${base}/v1/ai-sdk/chat/${id}/stream`);
  assert.equal(r.status, 204);
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
  const words = Array.from({ length: 80 }, (_, i) => `w${i + 1}`).join(' ');
  assert.equal(textOf(again.lastMessage), words, 'the words of the discarded turn are gone');
  assert.equal(again.lastMessage.parts.filter((p) => p.type === 'text').length, 1);
});
