// What the browser tests of the page share: Debian's Chromium, a page open
// on a new chat, typing with real key presses, and a local stand-in for an
// OpenAI-compatible model.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

export const SHOTS = process.env.E2E_SHOTS || join(process.cwd(), 'shots');
mkdirSync(SHOTS, { recursive: true });

/** Headless Chromium (CHROMIUM, or Debian's). */
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/** The page on `port` (of `browser` or of a context), a new chat with `agent` started. */
export async function newChat(browser, port, name, agent = 'demo') {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.locator('#conn[data-state="open"]').waitFor();
  await page.locator(`.tile[data-agent="${agent}"]`).click();
  await page.locator('#composer').waitFor();
  page.shot = (step) => page.screenshot({ path: join(SHOTS, `${name}-${step}.png`) });
  return page;
}

/**
 * An example app of `examples/<name>` (built: `npm ci && npm run build`
 * there; .ci/run does it), its `index.html` and `dist/app.js` served as a
 * static server would: `{ origin, close }`.
 */
export async function serveExample(name) {
  const app = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'examples', name);
  if (!existsSync(join(app, 'dist', 'app.js'))) {
    throw new Error(`build the example first: npm ci && npm run build in examples/${name}`);
  }
  const site = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const file = path === '/' ? 'index.html' : path.slice(1);
    if (!['index.html', 'dist/app.js'].includes(file)) {
      res.writeHead(404).end();
      return;
    }
    const type = file.endsWith('.js') ? 'text/javascript' : 'text/html';
    res.writeHead(200, { 'content-type': type }).end(readFileSync(join(app, file)));
  });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  return { origin: `http://127.0.0.1:${site.address().port}`, close: () => site.close() };
}

/** Types `text` into `locator` key by key, as a person does (what is in it first is selected and replaced). */
export async function type(locator, text) {
  await locator.click();
  await locator.press('ControlOrMeta+a');
  if (await locator.inputValue()) await locator.press('Backspace');
  await locator.pressSequentially(text);
}

/** Types `text` into the composer and sends it. */
export async function say(page, text) {
  await type(page.locator('#text'), text);
  await page.click('#send');
}

/** The text of the last agent bubble, once it holds `expected`. */
export async function lastAgentText(page, expected) {
  const bubble = page.locator('#log li.agent .msg').last();
  await bubble.filter({ hasText: expected }).waitFor({ timeout: 20000 });
  return bubble.textContent();
}

/**
 * A stand-in for an OpenAI-compatible server: each request gets the next of
 * `replies` (pushed by the test): `[{content}]` or `[{call: {id, name, args}}]`.
 */
export async function startModel() {
  const replies = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const chunks = replies.shift() || [{ content: 'no more replies' }];
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const line = (delta, finish = null) =>
        `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      let out = line({ role: 'assistant', content: '' });
      let finish = 'stop';
      for (const c of chunks) {
        if (c.call) {
          out += line({ tool_calls: [{ index: 0, id: c.call.id, type: 'function', function: { name: c.call.name, arguments: c.call.args } }] });
          finish = 'tool_calls';
        } else {
          out += line({ content: c.content });
        }
      }
      out += line({}, finish) + 'data: [DONE]\n\n';
      res.end(out);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { replies, url: `http://127.0.0.1:${server.address().port}/v1`, close: () => server.close() };
}

/** The analyst agent of seed 003 on `model`'s stand-in. */
export const analystAgent = (model) => `id: analyst
name: Analyst
description: Charts from the sample database
model: {provider: openai, name: m, base_url: "${model.url}"}
max_turns: 40
tools:
  - {name: ask_database, builtin: ask_database}
  - {name: ask_analyst, builtin: ask_analyst}
`;

/** Binds the open chat of `page` (on `port`) to examples/data/sales.db. */
export async function bindSales(page, port) {
  await page.locator('#chats li.current').waitFor();
  const chatId = await page.locator('#chats li.current').getAttribute('data-id');
  const post = (path, body) => fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, body: await r.json() }));
  const conn = await post('/connections', { name: 'sales', driver: 'sqlite', path: 'sales.db' });
  if (conn.status !== 201) throw new Error(JSON.stringify(conn.body));
  const bound = await post(`/v1/chats/${chatId}/connection`, { connection_id: conn.body.id });
  if (bound.status !== 200) throw new Error(JSON.stringify(bound.body));
  return bound.body;
}
