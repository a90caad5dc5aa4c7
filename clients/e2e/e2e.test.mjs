// The web page in a real headless Chromium (Debian's, driven by playwright-core):
// a conversation with `demo`, input requests, a component, a server killed and
// restarted mid-stream, and model output that tries to be HTML.
//
// Needs AGENTWIRE_BIN (the built binary) and /usr/bin/chromium. Screenshots of
// each step go to $E2E_SHOTS (default: ./shots).
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { chromium } from 'playwright-core';

import { freePort, startServer, tempDir } from '../js/test/support/helpers.mjs';

const SHOTS = process.env.E2E_SHOTS || join(process.cwd(), 'shots');
mkdirSync(SHOTS, { recursive: true });

let browser;
let server;
let port;
let dir;

before(async () => {
  dir = tempDir();
  port = await freePort();
  server = await startServer(dir, port);
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
});

after(async () => {
  await browser?.close();
  server?.kill('SIGKILL');
});

async function newChat(name) {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.locator('#conn[data-state="open"]').waitFor();
  await page.locator('.tile[data-agent="demo"]').click();
  await page.locator('#composer').waitFor();
  page.shot = (step) => page.screenshot({ path: join(SHOTS, `${name}-${step}.png`) });
  return page;
}

async function say(page, text) {
  await page.fill('#text', text);
  await page.click('#send');
}

/** The text of the last agent bubble, once it holds `expected`. */
async function lastAgentText(page, expected) {
  const bubble = page.locator('#log li.agent .msg').last();
  await bubble.filter({ hasText: expected }).waitFor({ timeout: 20000 });
  return bubble.textContent();
}

test('a conversation with demo: text, ask, secret and a component', async () => {
  const page = await newChat('conversation');
  await say(page, 'hello');
  assert.equal(await lastAgentText(page, 'You said: hello'), 'You said: hello');
  await page.shot('1-hello');

  await say(page, 'ask: Your name?');
  const input = page.locator('.card input[aria-label="Your name?"]');
  await input.fill('Ada');
  await input.press('Enter');
  assert.equal(await lastAgentText(page, 'You answered: Ada'), 'You answered: Ada');
  await page.shot('2-ask');

  await say(page, 'secret: Your PIN?');
  const secret = page.locator('.card input[aria-label="Your PIN?"]');
  assert.equal(await secret.getAttribute('type'), 'password');
  await secret.fill('1234');
  await secret.press('Enter');
  assert.equal(await lastAgentText(page, 'Secret received'), 'Secret received (4 characters)');
  await page.shot('3-secret');

  await say(page, 'ui: free_text');
  const card = page.locator('.card', { hasText: 'free_text' }).last();
  await card.locator('input').fill('blue');
  await card.locator('button', { hasText: 'Send' }).click();
  assert.equal(await lastAgentText(page, 'Component returned'), 'Component returned: {"text":"blue"}');
  await page.shot('4-component');
  await page.close();
});

test('a killed server: the page shows the answer exactly once', async () => {
  const page = await newChat('restart');
  await say(page, 'slow: 300');
  await page.locator('#log li.agent .msg').last().filter({ hasText: 'w20 ' }).waitFor();
  server.kill('SIGKILL');
  await new Promise((r) => server.once('exit', r));
  await page.locator('#conn[data-state="reconnecting"]').waitFor();
  await page.shot('1-reconnecting');
  server = await startServer(dir, port);
  await page.locator('#conn[data-state="resumed"]').waitFor({ timeout: 20000 });
  await page.locator('#run', { hasText: 'interrupted' }).waitFor();
  await page.shot('2-resumed');
  const text = await page.locator('#log li.agent .msg').last().textContent();
  const words = text.trim().split(' ');
  assert.ok(words.length >= 20, text);
  assert.deepEqual(words, words.map((_, i) => `w${i + 1}`), 'every word once, in order');
  // Carry on after the restart.
  await say(page, 'still there?');
  assert.equal(await lastAgentText(page, 'You said: still there?'), 'You said: still there?');
  await page.close();
});

test('model output is text, never HTML', async () => {
  const page = await newChat('xss');
  await say(page, '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>');
  await lastAgentText(page, 'You said: <img');
  assert.equal(await page.locator('#log img, #log script').count(), 0);
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  await page.shot('1-inert');
  await page.close();
});
