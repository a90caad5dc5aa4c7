// Agents nobody here wrote, behind agentwire (issue 37): Pydantic AI's and
// LangGraph's own AG-UI servers (examples/ag-ui) are agentwire agents
// (`ag_ui:` files), and the AI SDK's own chat (`ai`'s DefaultChatTransport)
// talks to them through agentwire's /v1/ai-sdk/chat: an answer, and a tool
// of theirs with its result, as the UI message's parts.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { DefaultChatTransport } from 'ai';

import * as helpers from '../../js/test/support/helpers.mjs';
import { peersMissing, serveBothAgents } from '../../js/test/support/ag-ui-peers.mjs';
import { Chat } from './support/chat.mjs';

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

const newChat = (agent) => new Chat({
  id: crypto.randomUUID(),
  transport: new DefaultChatTransport({ api: `${base}/v1/ai-sdk/chat`, body: { agent } }),
});

test('Pydantic AI and LangGraph answer, then call their tool, through agentwire', { skip }, async () => {
  for (const [id, name] of Object.entries(AGENTS)) {
    const chat = newChat(id);
    await chat.sendMessage({ text: 'hello there' });
    assert.equal(chat.status, 'ready', `${id}: ${chat.error}`);
    const texts = chat.lastMessage.parts.filter((p) => p.type === 'text');
    assert.deepEqual(texts.map((p) => [p.text, p.state]), [[`Hello from ${name}. You said: hello there`, 'done']], id);

    // Their own tool: its call with its result, then the answer, in one message.
    await chat.sendMessage({ text: 'weather in Oslo' });
    assert.equal(chat.status, 'ready', `${id}: ${chat.error}`);
    const parts = chat.lastMessage.parts.filter((p) => p.type !== 'step-start').map(({ type, toolName, state, input, output, text }) =>
      (type === 'text' ? { type, text, state } : { type, toolName, state, input, output }));
    assert.deepEqual(parts, [
      { type: 'dynamic-tool', toolName: 'get_weather', state: 'output-available', input: { city: 'Oslo' }, output: 'sunny in Oslo' },
      { type: 'text', text: 'The weather is sunny in Oslo.', state: 'done' },
    ], id);
  }
});
