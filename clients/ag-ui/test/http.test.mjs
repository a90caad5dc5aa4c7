// AG-UI's own client (@ag-ui/client 1.0's HttpAgent, with its event
// verification) against agentwire's /v1/ag-ui: an answer, a tool call,
// interrupts (an approval, an input request, a UI tool) answered through the
// next run's `resume[]`, frontend tools (the run input's `tools`, answered by
// a `tool` message), and the durable rejoin of a run in flight.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { HttpAgent } from '@ag-ui/client';

import { freePort, startServer, tempDir } from '../../js/test/support/helpers.mjs';

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
      - prefix: "plan: "
        call: {tool: plan, input: {steps: 1, description: "{arg}"}}
        then: "Plan: {result}"
      - prefix: "think: "
        think: "Weighing {arg} against the alternatives"
        reply: "Go with {arg}."
      - prefix: "weather: "
        call: {tool: get_weather, input: {city: "{arg}"}}
        then: "Weather: {result}"
system_prompt: Test.
tools:
  - name: plan
    input_schema: {type: object, properties: {steps: {type: integer}, description: {type: string}}, required: [steps, description]}
    builtin: progress
    preview: {component_type: plan_preview, fields: {description: /input/description, outcome: /result}}
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

/** An agent on a new thread; every event it saw, in order. */
function agentOn(threadId = crypto.randomUUID()) {
  const agent = new HttpAgent({ url: `${base}/v1/ag-ui`, threadId });
  const events = [];
  agent.subscribe({ onEvent: ({ event }) => { events.push(event); } });
  return { agent, events };
}

const say = (agent, text, extra = {}) => {
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: text });
  return agent.runAgent({ runId: crypto.randomUUID(), ...extra });
};

const lastAssistant = (agent) => agent.messages.filter((m) => m.role === 'assistant' && m.content).at(-1)?.content;
const types = (events) => events.map((e) => e.type);

test('an answer is one verified run', async () => {
  const { agent, events } = agentOn();
  await say(agent, 'hello');
  assert.equal(lastAssistant(agent), 'You said: hello');
  assert.deepEqual(types(events).filter((t) => t.startsWith('RUN_')), ['RUN_STARTED', 'RUN_FINISHED']);
  assert.ok(types(events).includes('STEP_STARTED'));
});

test('a run input that goes back on the thread forks there: that message is edited', async () => {
  const threadId = crypto.randomUUID();
  const { agent } = agentOn(threadId);
  await say(agent, 'one');
  await say(agent, 'two');
  // The client goes back to after the first answer and says something else.
  agent.setMessages(agent.messages.slice(0, 2));
  await say(agent, 'TWO');
  assert.equal(lastAssistant(agent), 'You said: TWO');
  const b = await (await fetch(`${base}/v1/chats/${threadId}/branches`)).json();
  assert.equal(b.points.length, 1, JSON.stringify(b));
  assert.equal(b.points[0].versions.length, 2);
  // The thread goes on from the new version; its snapshot is that path.
  await say(agent, 'three');
  assert.equal(lastAssistant(agent), 'You said: three');
  const r = await fetch(`${base}/v1/chats/${threadId}/events?after=0&limit=1000`);
  const texts = (await r.json()).events.filter((e) => e.type === 'chat.text' && e.agent === 'user').map((e) => e.content);
  assert.deepEqual(texts, ['one', 'two', 'TWO', 'three'], 'the log keeps both versions');
});

test('a tool call has its result; streamed words arrive once', async () => {
  const { agent } = agentOn();
  await say(agent, 'progress: 2');
  const call = agent.messages.find((m) => m.toolCalls?.length);
  assert.equal(call.toolCalls[0].function.name, 'progress');
  const result = agent.messages.find((m) => m.role === 'tool');
  assert.equal(result.toolCallId, call.toolCalls[0].id);
  assert.equal(lastAssistant(agent), 'Done');
  await say(agent, 'slow: 25');
  assert.equal(lastAssistant(agent), Array.from({ length: 25 }, (_, i) => `w${i + 1}`).join(' '));
});

test('an approval is an interrupt; resume[] answers it and the run goes on', async () => {
  const { agent, events } = agentOn();
  await say(agent, 'go: 2', { forwardedProps: { agent: 'gated' } });
  assert.equal(agent.pendingInterrupts.length, 1);
  const [interrupt] = agent.pendingInterrupts;
  assert.equal(interrupt.reason, 'approval');
  const finished = events.filter((e) => e.type === 'RUN_FINISHED').at(-1);
  assert.equal(finished.outcome.type, 'interrupt');
  await agent.runAgent({
    runId: crypto.randomUUID(),
    resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }],
  });
  assert.equal(agent.pendingInterrupts.length, 0);
  assert.match(lastAssistant(agent), /^Tool said:/);
});

test('an approval refused: the call does not run, the model is told', async () => {
  const { agent } = agentOn();
  await say(agent, 'go: 2', { forwardedProps: { agent: 'gated' } });
  const [interrupt] = agent.pendingInterrupts;
  await agent.runAgent({
    runId: crypto.randomUUID(),
    resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: false, reason: 'not now' } }],
  });
  assert.equal(agent.pendingInterrupts.length, 0);
  assert.match(lastAssistant(agent), /refused this tool call: not now/);
  assert.ok(!agent.messages.some((m) => m.role === 'tool' && /completed/.test(m.content)), 'the tool did not run');
});

test('a cancelled interrupt cancels the run', async () => {
  const { agent, events } = agentOn();
  await say(agent, 'ask: Your name?');
  const [interrupt] = agent.pendingInterrupts;
  await agent.runAgent({ runId: crypto.randomUUID(), resume: [{ interruptId: interrupt.id, status: 'cancelled' }] });
  const finished = events.filter((e) => e.type === 'RUN_FINISHED').at(-1);
  assert.deepEqual(finished.outcome, { type: 'cancelled' });
  assert.equal(agent.pendingInterrupts.length, 0);
  const chat = await (await fetch(`${base}/v1/chats/${agent.threadId}/events?after=0&limit=1000`)).json();
  // The run's end (the chat's first run: its title follows it).
  assert.equal(chat.events.findLast((e) => e.type === 'chat.run_complete').reason, 'cancelled');
});

test("the model's reasoning is a reasoning message, verified", async () => {
  const { agent, events } = agentOn();
  await say(agent, 'think: tea', { forwardedProps: { agent: 'gated' } });
  const reasoning = agent.messages.filter((m) => m.role === 'reasoning');
  assert.deepEqual(reasoning.map((m) => m.content), ['Weighing tea against the alternatives']);
  assert.equal(lastAssistant(agent), 'Go with tea.');
  const t = types(events);
  assert.ok(t.indexOf('REASONING_END') < t.indexOf('TEXT_MESSAGE_START'), t.join());
});

test('an artifact (a preview) is shared state', async () => {
  const { agent } = agentOn();
  await say(agent, 'plan: ship it', { forwardedProps: { agent: 'gated' } });
  const keys = Object.keys(agent.state).filter((k) => k.startsWith('artifact:'));
  assert.equal(keys.length, 1, JSON.stringify(agent.state));
  const artifact = agent.state[keys[0]];
  assert.equal(artifact.component_type, 'plan_preview');
  assert.equal(artifact.payload.description, 'ship it');
});

test('an input request and a UI tool are answered through resume[]', async () => {
  const { agent } = agentOn();
  await say(agent, 'ask: Your name?');
  let [interrupt] = agent.pendingInterrupts;
  assert.equal(interrupt.reason, 'input');
  assert.equal(interrupt.message, 'Your name?');
  await agent.runAgent({ runId: crypto.randomUUID(), resume: [{ interruptId: interrupt.id, status: 'resolved', payload: 'Ada' }] });
  assert.equal(lastAssistant(agent), 'You answered: Ada');

  await say(agent, 'ui: picker');
  [interrupt] = agent.pendingInterrupts;
  assert.equal(interrupt.reason, 'component');
  await agent.runAgent({ runId: crypto.randomUUID(), resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { picked: 1 } }] });
  assert.equal(lastAssistant(agent), 'Component returned: {"picked":1}');
});

const WEATHER = [{
  name: 'get_weather',
  description: 'The weather in a city, as the user sees it',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

test('a frontend tool: the model calls it, the run finishes pending it, its tool message answers', async () => {
  const { agent, events } = agentOn();
  await say(agent, 'weather: Oslo', { forwardedProps: { agent: 'gated' }, tools: WEATHER });
  const finished = events.filter((e) => e.type === 'RUN_FINISHED').at(-1);
  assert.equal(finished.outcome.type, 'success');
  assert.equal(agent.pendingInterrupts.length, 0);
  const call = agent.messages.find((m) => m.toolCalls?.length).toolCalls[0];
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Oslo' });
  assert.deepEqual(finished.outcome.pendingToolCallIds, [call.id]);

  // The application runs the tool and runs the agent again with its result.
  agent.addMessage({ id: crypto.randomUUID(), role: 'tool', toolCallId: call.id, content: 'sunny, 21 °C' });
  const before = events.length;
  await agent.runAgent({ runId: crypto.randomUUID(), tools: WEATHER });
  assert.equal(lastAssistant(agent), 'Weather: sunny, 21 °C');
  assert.equal(agent.messages.filter((m) => m.role === 'tool').length, 1, 'no second tool message');
  const again = types(events.slice(before));
  assert.ok(!again.includes('TOOL_CALL_START') && !again.includes('TOOL_CALL_RESULT'), again.join());

  // The same run input again (its response was lost): nothing runs twice,
  // and the client gets what it lacks, once.
  const count = agent.messages.length;
  agent.messages.pop();
  await agent.runAgent({ runId: crypto.randomUUID(), tools: WEATHER });
  assert.equal(agent.messages.length, count);
  assert.equal(lastAssistant(agent), 'Weather: sunny, 21 °C');
  assert.equal(agent.messages.filter((m) => m.role === 'tool').length, 1);
  assert.equal(events.at(-1).type, 'RUN_FINISHED');
  const page = await (await fetch(`${base}/v1/chats/${agent.threadId}/events?after=0&limit=1000`)).json();
  assert.equal(page.events.filter((e) => e.type === 'chat.run_complete').length, 1, 'one run');
});

test('a frontend tool waiting when the server is killed still waits after the restart', async () => {
  const { agent } = agentOn();
  await say(agent, 'weather: Bergen', { forwardedProps: { agent: 'gated' }, tools: WEATHER });
  const call = agent.messages.find((m) => m.toolCalls?.length).toolCalls[0];
  server.kill('SIGKILL');
  await new Promise((r) => server.once('exit', r));
  server = await startServer(dir, port);
  agent.addMessage({ id: crypto.randomUUID(), role: 'tool', toolCallId: call.id, content: 'rain' });
  await agent.runAgent({ runId: crypto.randomUUID() });
  assert.equal(lastAssistant(agent), 'Weather: rain');
});

test('a tool message answers only a frontend tool; an input request waits for resume[]', async () => {
  const { agent } = agentOn();
  await say(agent, 'ask: Your name?');
  const [interrupt] = agent.pendingInterrupts;
  const post = (body) => fetch(`${base}/v1/ag-ui`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  const r = await post({
    threadId: agent.threadId, runId: 'r',
    messages: [...agent.messages, { id: 't', role: 'tool', toolCallId: interrupt.toolCallId, content: 'Eve' }],
  });
  assert.equal(r.status, 400, 'nothing to run: the tool message answers nothing');
  await agent.runAgent({ runId: crypto.randomUUID(), resume: [{ interruptId: interrupt.id, status: 'resolved', payload: 'Ada' }] });
  assert.equal(lastAssistant(agent), 'You answered: Ada');
});

test('bad frontend tools are refused before anything runs', async () => {
  for (const tools of [[{ name: 'has space', description: '' }], [{ name: 't', description: '', parameters: { type: 'string' } }],
    Array.from({ length: 65 }, (_, i) => ({ name: `t${i}`, description: '' }))]) {
    const threadId = crypto.randomUUID();
    const r = await fetch(`${base}/v1/ag-ui`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ threadId, runId: 'r', messages: [{ id: 'u', role: 'user', content: 'hi' }], tools }),
    });
    assert.equal(r.status, 400, await r.text());
    assert.equal((await fetch(`${base}/v1/chats/${threadId}`)).status, 404, 'no chat was made');
  }
});

test('a client that joins a run in flight gets the thread and the whole run once', async () => {
  const threadId = crypto.randomUUID();
  const { agent } = agentOn(threadId);
  await say(agent, 'hello');
  const running = say(agent, 'slow: 60');
  await new Promise((r) => setTimeout(r, 300));
  // Another page joins over the rejoin stream, with AG-UI's own client.
  const joined = new HttpAgent({ url: `${base}/v1/ag-ui/${threadId}/stream`, threadId });
  joined.requestInit = (input) => ({ method: 'GET', headers: { accept: 'text/event-stream' } });
  await joined.runAgent({ runId: 'rejoin' });
  await running;
  const texts = joined.messages.filter((m) => m.content).map((m) => [m.role, m.content]);
  const words = Array.from({ length: 60 }, (_, i) => `w${i + 1}`).join(' ');
  assert.deepEqual(texts, [
    ['user', 'hello'],
    ['assistant', 'You said: hello'],
    ['user', 'slow: 60'],
    ['assistant', words],
  ]);
  // Nothing in flight now.
  const r = await fetch(`${base}/v1/ag-ui/${threadId}/stream`);
  assert.equal(r.status, 204);

  // A client that lost its stream mid-run asks after the last event it had.
  const page = await (await fetch(`${base}/v1/chats/${threadId}/events?after=0&limit=1000`)).json();
  const turn = page.events.filter((e) => e.type === 'chat.select_speaker').at(-1);
  const rest = await fetch(`${base}/v1/ag-ui/${threadId}/stream`, { headers: { 'last-event-id': String(turn.seq + 5) } });
  assert.equal(rest.status, 200);
  const events = (await rest.text())
    .split('\n\n')
    .flatMap((block) => block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6))));
  assert.equal(events[0].type, 'TEXT_MESSAGE_CONTENT', JSON.stringify(events[0]));
  assert.ok(!events.some((e) => e.type === 'RUN_STARTED' || e.type === 'TEXT_MESSAGE_START'));
  assert.equal(events.at(-1).type, 'RUN_FINISHED');
  const deltas = events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join('');
  assert.ok(words.endsWith(deltas) && deltas.startsWith('w6'), deltas);
});

test('a server killed mid-stream: the rejoin shows the turn discarded and the run continued', async () => {
  const threadId = crypto.randomUUID();
  const { agent, events } = agentOn(threadId);
  const running = say(agent, 'slow: 80').catch(() => {});
  await until(() => events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length > 10);
  // The page goes first (HttpAgent leaves a cut connection's rejection
  // unhandled), then the server is killed mid-stream.
  agent.abortRun();
  await running;
  server.kill('SIGKILL');
  await new Promise((r) => server.once('exit', r));
  server = await startServer(dir, port);
  const joined = new HttpAgent({ url: `${base}/v1/ag-ui/${threadId}/stream`, threadId });
  joined.requestInit = () => ({ method: 'GET', headers: { accept: 'text/event-stream' } });
  const seen = [];
  joined.subscribe({ onEvent: ({ event }) => { seen.push(event); } });
  await joined.runAgent({ runId: 'rejoin' });
  const words = Array.from({ length: 80 }, (_, i) => `w${i + 1}`).join(' ');
  const discarded = seen.find((e) => e.type === 'CUSTOM' && e.name === 'agentwire.turn_discarded');
  assert.ok(discarded, 'the discarded turn is said');
  const partial = joined.messages.find((m) => m.id === discarded.value.messageId);
  assert.ok(words.startsWith(partial.content) && partial.content.length < words.length);
  assert.equal(lastAssistant(joined), words, 'the continued answer, whole');
  assert.equal(seen.at(-1).type, 'RUN_FINISHED');
});

async function until(check) {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('timed out');
}

test("a thread's messages load whole into a new HttpAgent, which goes on from them", async () => {
  const threadId = crypto.randomUUID();
  const { agent } = agentOn(threadId);
  await say(agent, 'one');
  await say(agent, 'progress: 2');
  await say(agent, 'two');
  const r = await fetch(`${base}/v1/ag-ui/${threadId}/messages`);
  assert.equal(r.status, 200);
  const loaded = await r.json();
  // What the client holds: the same turns, calls and results, in order.
  const shape = (ms) => ms.map((m) => [m.role, m.content ?? null, (m.toolCalls ?? []).map((c) => c.function.name).join()])
    .filter(([role, content, calls]) => role !== 'assistant' || content || calls);
  assert.deepEqual(shape(loaded), shape(agent.messages));
  // A reload: a new agent from them, the thread goes on (no fork: the same path).
  const again = new HttpAgent({ url: `${base}/v1/ag-ui`, threadId, initialMessages: loaded });
  await say(again, 'three');
  assert.equal(lastAssistant(again), 'You said: three');
  const b = await (await fetch(`${base}/v1/chats/${threadId}/branches`)).json();
  assert.equal(b.points.length, 0, 'no version was made');
  assert.deepEqual(await (await fetch(`${base}/v1/ag-ui/${crypto.randomUUID()}/messages`)).json(), []);
});

test('binary content is a file: kept once, read by the model, loaded back by id and URL', async () => {
  const threadId = crypto.randomUUID();
  const { agent } = agentOn(threadId);
  const bytes = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.from('1 0 obj << >> endobj\n%%EOF\n')]);
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: [
    { type: 'text', text: 'read' },
    { type: 'binary', mimeType: 'application/pdf', filename: 'scan.pdf', data: bytes.toString('base64') },
  ] });
  await agent.runAgent({ runId: crypto.randomUUID() });
  assert.equal(lastAssistant(agent), `You said: read\nYou attached: scan.pdf (application/pdf, ${bytes.length} bytes)`);
  const loaded = await (await fetch(`${base}/v1/ag-ui/${threadId}/messages`)).json();
  // AG-UI 1.0's media part, its source the file's URL here.
  const [doc] = loaded[0].content.filter((p) => p.type === 'document');
  assert.equal(doc.metadata.filename, 'scan.pdf');
  assert.equal(doc.source.type, 'url');
  assert.equal(doc.source.mimeType, 'application/pdf');
  assert.ok(!JSON.stringify(loaded).includes(bytes.toString('base64')), 'no bytes in the messages');
  assert.deepEqual(Buffer.from(await (await fetch(base + doc.source.value)).arrayBuffer()), bytes);
  // A new agent from them goes on; a part naming the file attaches it.
  const again = new HttpAgent({ url: `${base}/v1/ag-ui`, threadId, initialMessages: loaded });
  again.addMessage({ id: crypto.randomUUID(), role: 'user', content: [{ type: 'text', text: 'again' }, doc] });
  await again.runAgent({ runId: crypto.randomUUID() });
  assert.equal(lastAssistant(again), `You said: again\nYou attached: scan.pdf (application/pdf, ${bytes.length} bytes)`);
  const b = await (await fetch(`${base}/v1/chats/${threadId}/branches`)).json();
  assert.equal(b.points.length, 0, 'the loaded messages are the same path: no fork');
  // A URL elsewhere is never fetched.
  const { agent: other } = agentOn();
  other.addMessage({ id: crypto.randomUUID(), role: 'user', content: [
    { type: 'text', text: 'x' }, { type: 'binary', mimeType: 'image/png', url: 'https://example.com/cat.png' },
  ] });
  await assert.rejects(other.runAgent({ runId: crypto.randomUUID() }));
});
