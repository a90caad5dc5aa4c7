// examples/ai-sdk-react (the real @ai-sdk/react's useChat, built with
// esbuild) in headless Chromium against agentwire: an answer over HTTP and
// over the WebSocket transport, an input request answered in the page, and a
// reload mid-stream that resumes the answer with every word once. The
// example installs @agentwire/ai-sdk from clients/ai-sdk as a packed copy
// (its .npmrc: install-links): what goes up is what that package sends.
//
// Needs AGENTWIRE_BIN, /usr/bin/chromium and the example built
// (`npm ci && npm run build` in examples/ai-sdk-react; .ci/run does it).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { freePort, startServer, tempDir } from '../js/test/support/helpers.mjs';
import { launch, serveExample, type } from './support.mjs';

let site;
let browser;
let server;
let origin;
let api;

before(async () => {
  site = await serveExample('ai-sdk-react');
  origin = site.origin;
  const port = await freePort();
  server = await startServer(tempDir(), port, ['--cors-origins', origin]);
  api = `http://127.0.0.1:${port}`;
  browser = await launch();
});

after(async () => {
  site?.close();
  await browser?.close();
  server?.kill('SIGKILL');
});

async function open(query = '') {
  const page = await browser.newPage();
  await page.goto(`${origin}/?server=${encodeURIComponent(api)}${query}`);
  await page.locator('input[name=text]').waitFor();
  return page;
}

async function say(page, text) {
  await type(page.locator('input[name=text]'), text);
  await page.press('input[name=text]', 'Enter');
}

const assistant = (page) => page.locator('.msg.assistant').last();

for (const transport of ['http', 'ws']) {
  test(`useChat over ${transport}: an answer, and an input request answered in the page`, async () => {
    const page = await browser.newPage();
    // What the page sends: each turn's request (a POST, or a `send` frame).
    const sent = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/v1/ai-sdk/chat')) {
        sent.push({ version: r.headers()['agentwire-protocol'], messages: r.postDataJSON().messages.length });
      }
    });
    page.on('websocket', (ws) => {
      const version = new URL(ws.url()).searchParams.get('protocol');
      ws.on('framesent', ({ payload }) => {
        const frame = JSON.parse(String(payload));
        if (frame.type === 'send') sent.push({ version, messages: frame.messages.length });
      });
    });
    await page.goto(`${origin}/?server=${encodeURIComponent(api)}&transport=${transport}`);
    await page.locator('input[name=text]').waitFor();
    await say(page, 'hello');
    await assistant(page).filter({ hasText: 'You said: hello' }).waitFor({ timeout: 20000 });
    await say(page, 'ask: Your name?');
    const form = page.locator('form.tool');
    await form.waitFor();
    await type(form.locator('input'), 'Ada');
    await form.locator('button').click();
    await assistant(page).filter({ hasText: 'You answered: Ada' }).waitFor({ timeout: 20000 });
    // Three turns (hello, the question, the answer), each with only its own
    // message and the protocol version: the server holds the conversation.
    assert.deepEqual(sent, Array(3).fill({ version: '1', messages: 1 }));
    await page.close();
  });
}

test('a reload mid-stream resumes the answer, every word once', async () => {
  const page = await open();
  await say(page, 'slow: 120');
  await assistant(page).filter({ hasText: 'w10 ' }).waitFor({ timeout: 20000 });
  await page.reload();
  const words = Array.from({ length: 120 }, (_, i) => `w${i + 1}`).join(' ');
  await assistant(page).filter({ hasText: 'w120' }).waitFor({ timeout: 20000 });
  assert.equal((await assistant(page).textContent()).trim(), words);
  await page.close();
});

test('a reload shows the whole conversation once; the list titles, searches and renames it', async () => {
  const page = await open();
  await say(page, 'hello');
  await assistant(page).filter({ hasText: 'You said: hello' }).waitFor({ timeout: 20000 });
  await say(page, 'ask: Your name?');
  await page.locator('form.tool').waitFor();
  await type(page.locator('form.tool input'), 'Ada');
  await page.locator('form.tool button').click();
  await assistant(page).filter({ hasText: 'You answered: Ada' }).waitFor({ timeout: 20000 });
  // The first run titled the chat (its first words: the demo has no model).
  const mine = page.locator(`nav li.current`);
  await mine.locator('.title', { hasText: 'hello' }).waitFor({ timeout: 20000 });

  await page.reload();
  await assistant(page).filter({ hasText: 'You answered: Ada' }).waitFor({ timeout: 20000 });
  const shown = await page.locator('.msg').evaluateAll((ms) => ms.map((m) => [m.className, m.textContent.trim()]));
  assert.deepEqual(shown.map(([c]) => c), ['msg user', 'msg assistant', 'msg user', 'msg assistant'], JSON.stringify(shown));
  assert.equal(shown[1][1], 'You said: hello');
  assert.equal(page.url().includes('chat='), true);

  // Rename (a person types in the prompt), then find it by its new title and by its words.
  page.once('dialog', (d) => d.accept('Greetings <img src=x onerror=alert(1)>'));
  await mine.getByRole('button', { name: 'Rename' }).click();
  await mine.locator('.title', { hasText: 'Greetings <img' }).waitFor({ timeout: 20000 });
  assert.equal(await page.locator('nav img').count(), 0, 'a title is text');
  await type(page.getByRole('searchbox', { name: 'Search chats' }), 'greet');
  await page.locator('nav li mark', { hasText: 'Greetings' }).waitFor({ timeout: 20000 });
  await type(page.getByRole('searchbox', { name: 'Search chats' }), 'your name');
  await page.locator('nav li mark', { hasText: 'Your' }).first().waitFor({ timeout: 20000 });
  // Pin, archive and restore: the list follows.
  await type(page.getByRole('searchbox', { name: 'Search chats' }), ' ');
  await mine.getByRole('button', { name: 'Pin' }).click();
  await mine.locator('.title', { hasText: '📌' }).waitFor();
  await mine.getByRole('button', { name: 'Archive' }).click();
  await page.locator('nav li.current').waitFor({ state: 'detached' });
  await page.getByRole('checkbox', { name: 'Archived' }).check();
  await page.locator('nav li.current').getByRole('button', { name: 'Restore' }).click();
  await page.locator('nav li.current').waitFor({ state: 'detached' });
  await page.close();
});
