// Agents nobody here wrote, behind agentwire (issue 37): Pydantic AI's and
// LangGraph's own AG-UI servers (examples/ag-ui) are agentwire agents
// (`ag_ui:` files), and AG-UI's own client (@ag-ui/client's HttpAgent, with
// its event verification) talks to them through agentwire's /v1/ag-ui: an
// answer, and a frontend tool the client offers, which the upstream agent
// calls and the client answers with a `tool` message in the next run.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { HttpAgent } from '@ag-ui/client';

import * as helpers from '../../js/test/support/helpers.mjs';
import { peersMissing, serveBothAgents } from '../../js/test/support/ag-ui-peers.mjs';

const skip = peersMissing();
const AGENTS = { pyd: 'Pydantic AI', lg: 'LangGraph' };

let served;
let base;
before(async () => {
  if (skip) return;
  served = await serveBothAgents(helpers);
  base = served.base;
}, { timeout: 120_000 });
after(() => served?.stop());

/** An agent on a new thread; every event it saw, in order. */
function agentOn() {
  const agent = new HttpAgent({ url: `${base}/v1/ag-ui`, threadId: crypto.randomUUID() });
  const events = [];
  agent.subscribe({ onEvent: ({ event }) => { events.push(event); } });
  return { agent, events };
}

/** Says `text` to agentwire's agent `id` (the thread's, once it has one). */
const say = (agent, id, text, extra = {}) => {
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: text });
  return agent.runAgent({ runId: crypto.randomUUID(), forwardedProps: { agent: id }, ...extra });
};

const lastAssistant = (agent) => agent.messages.filter((m) => m.role === 'assistant' && m.content).at(-1)?.content;

test('Pydantic AI and LangGraph answer through agentwire', { skip }, async () => {
  for (const [id, name] of Object.entries(AGENTS)) {
    const { agent } = agentOn();
    await say(agent, id, 'hello there');
    assert.equal(lastAssistant(agent), `Hello from ${name}. You said: hello there`);
  }
});

const PICK_COLOR = [{
  name: 'pick_color',
  description: 'Lets the user pick one of the options',
  parameters: { type: 'object', properties: { options: { type: 'array', items: { type: 'string' } } }, required: ['options'] },
}];

test("their call of the client's tool ends the run; the tool message answers it upstream", { skip }, async () => {
  for (const id of Object.keys(AGENTS)) {
    const { agent, events } = agentOn();
    await say(agent, id, 'pick', { tools: PICK_COLOR });
    const call = agent.messages.find((m) => m.toolCalls?.length)?.toolCalls[0];
    assert.equal(call?.function.name, 'pick_color', `${id}: ${JSON.stringify(agent.messages)}`);
    assert.deepEqual(JSON.parse(call.function.arguments), { options: ['red', 'green', 'blue'] });
    const finished = events.findLast((e) => e.type === 'RUN_FINISHED');
    assert.deepEqual(finished.outcome, { type: 'success', pendingToolCallIds: [call.id] }, id);
    // In agentwire's log: a UI tool call, for whichever client runs the tool.
    const log = await (await fetch(`${base}/v1/chats/${agent.threadId}/events?after=0&limit=1000`)).json();
    const logged = log.events.find((e) => e.type === 'chat.tool_call');
    assert.equal(logged.component_type, 'frontend_tool', id);
    assert.equal(logged.corr, call.id, id);

    // The application runs the tool, and the agent again with its result.
    agent.addMessage({ id: crypto.randomUUID(), role: 'tool', toolCallId: call.id, content: 'blue' });
    await agent.runAgent({ runId: crypto.randomUUID(), tools: PICK_COLOR });
    assert.equal(lastAssistant(agent), 'You picked blue.', id);
  }
});
