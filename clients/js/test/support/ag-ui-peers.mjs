// The real upstream AG-UI agents of examples/ag-ui (Pydantic AI's adapter and
// LangGraph's ag-ui-langgraph, on scripted models), as child processes.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const DIR = fileURLToPath(new URL('../../../../examples/ag-ui/', import.meta.url));
const PYTHON = `${DIR}.venv/bin/python`;

/**
 * Why the peers cannot run here (no virtual environment), or undefined: a
 * test's `skip`. With AGENTWIRE_REQUIRE_AG_UI=1 (.ci/run) a missing one fails.
 */
export function peersMissing() {
  if (existsSync(PYTHON)) return undefined;
  const why = 'examples/ag-ui has no .venv (see its README.md)';
  if (process.env.AGENTWIRE_REQUIRE_AG_UI === '1') throw new Error(`AGENTWIRE_REQUIRE_AG_UI=1 but ${why}`);
  return why;
}

/** Starts `script` on a free port, with nothing of our environment but PATH:
 * `{child, url}` once it listens (its `ready <url>` line). */
export function startPeer(script) {
  const child = spawn(PYTHON, [`${DIR}${script}`, '0'], {
    env: { PATH: process.env.PATH },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      if (line.startsWith('ready ')) resolve({ child, url: line.slice('ready '.length).trim() });
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${script} exited (${code}) before it was ready`)));
  });
}

/** An agent file for an upstream AG-UI agent at `url`. */
export const upstreamAgent = (id, url, extra = '') => `id: ${id}\nag_ui:\n  url: ${url}\n${extra}`;

/**
 * Pydantic AI's and LangGraph's agents (`pyd`, `lg`; LangGraph keeps the
 * thread itself, so it gets only the new messages) and an agentwire serving
 * them: `{base, stop}`. `helpers` is clients/js/test/support/helpers.mjs.
 */
export async function serveBothAgents({ freePort, startServer, tempDir }) {
  const { mkdirSync, writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const peers = [];
  const pyd = await startPeer('pydantic_agent.py');
  peers.push(pyd.child);
  const lg = await startPeer('langgraph_agent.py');
  peers.push(lg.child);
  const dir = tempDir();
  const port = await freePort();
  mkdirSync(join(dir, 'agents'));
  writeFileSync(join(dir, 'agents', 'pyd.yaml'), upstreamAgent('pyd', pyd.url));
  writeFileSync(join(dir, 'agents', 'lg.yaml'), upstreamAgent('lg', lg.url, '  history: new\n'));
  const server = await startServer(dir, port);
  return {
    base: `http://127.0.0.1:${port}`,
    stop() {
      server.kill('SIGKILL');
      for (const p of peers) p.kill('SIGKILL');
    },
  };
}
