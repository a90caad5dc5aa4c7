// What both transports' tests share: a chat with plain state (what a
// framework binding keeps), an agent whose tool needs approval, the server.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { AbstractChat } from 'ai';

import { freePort, startServer, tempDir } from '../../../js/test/support/helpers.mjs';

class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot(thing) { return structuredClone(thing); }
}

/** The AI SDK's own chat, with plain state. */
export class Chat extends AbstractChat {
  constructor(init) {
    const state = new State();
    state.messages = init.messages ?? [];
    super({ ...init, state });
  }
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
      - prefix: "think: "
        think: "Weighing {arg} against the alternatives"
        reply: "Go with {arg}."
      - reply: "ok"
system_prompt: Test.
tools:
  - name: guarded
    input_schema: {type: object, properties: {steps: {type: integer, minimum: 1}}, required: [steps]}
    builtin: progress
    requires_approval: true
`;

/** A server with the demo and the `gated` agent: `{server, port, dir}`. */
export async function startWithAgents() {
  const port = await freePort();
  const dir = tempDir();
  mkdirSync(join(dir, 'agents'), { recursive: true });
  writeFileSync(join(dir, 'agents', 'gated.yaml'), GATED);
  return { server: await startServer(dir, port), port, dir };
}

export const textOf = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
/** The message's tool parts, named (`tool-<name>`: a tool of the agent's
 * file) or dynamic (one known only when called), each with its `toolName`. */
export const toolParts = (m) => m.parts
  .filter((p) => p.type === 'dynamic-tool' || p.type.startsWith('tool-'))
  .map((p) => ({ ...p, toolName: p.toolName ?? p.type.slice('tool-'.length) }));
export const words = (n) => Array.from({ length: n }, (_, i) => `w${i + 1}`).join(' ');

/** Waits until `check()` holds. */
export async function until(check, what) {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}
