// Conversations as trees in the page, in a real headless Chromium: a user's
// message edited (keys typed into the box), an answer regenerated, the
// `‹ n/m ›` switcher clicked, a reload that lands on the same branch, and a
// server killed during a regenerate whose run the restarted server finishes.
//
// Needs AGENTWIRE_BIN (the built binary) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { freePort, startServer, tempDir } from '../js/test/support/helpers.mjs';
import { lastAgentText, launch, newChat as openChat, say, type } from './support.mjs';

let browser;
let server;
let port;
let dir;

before(async () => {
  dir = tempDir();
  port = await freePort();
  server = await startServer(dir, port);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.kill('SIGKILL');
});

/** What the log shows: user messages, answers and switchers, in order. */
const shown = (page) => page.locator('#log > li.user .msg, #log > li.agent .msg, #log > li.versions .count')
  .evaluateAll((els) => els.map((e) => e.textContent.trim()));

test('edit, regenerate, switch versions and reload on the same branch', async () => {
  const page = await openChat(browser, port, 'branches');
  await say(page, 'one');
  await lastAgentText(page, 'You said: one');
  await say(page, 'two');
  await lastAgentText(page, 'You said: two');

  // Edit `two`: a box with its text, typed over, Enter saves.
  await page.locator('#log li.user', { hasText: 'two' }).locator('button.edit').click();
  const box = page.locator('#log .editing textarea');
  assert.equal(await box.inputValue(), 'two');
  await type(box, 'two, edited');
  await box.press('Enter');
  await lastAgentText(page, 'You said: two, edited');
  assert.deepEqual(await shown(page), ['one', 'You said: one', '2/2', 'two, edited', 'You said: two, edited']);
  await page.shot('1-edited');

  // Regenerate the last answer: a second version of it.
  await page.locator('#log li.run-end button.regenerate').last().click();
  await page.locator('#log li.versions .count', { hasText: '2/2' }).nth(1).waitFor();
  // The path shows two runs' ends: the first answer's and the new one's.
  await page.locator('#log li.run-end').nth(1).waitFor();
  assert.deepEqual(await shown(page), ['one', 'You said: one', '2/2', 'two, edited', '2/2', 'You said: two, edited']);
  await page.shot('2-regenerated');

  // Back to the first version of the second message, with its own answer.
  await page.locator('#log li.versions').first().locator('button[aria-label="previous version"]').click();
  await page.locator('#log li.versions .count', { hasText: '1/2' }).waitFor();
  assert.deepEqual(await shown(page), ['one', 'You said: one', '1/2', 'two', 'You said: two']);
  await page.shot('3-switched');

  // A reload shows the branch the user was on; the conversation goes on from it.
  const chatId = await page.locator('#chats li.current').getAttribute('data-id');
  await page.reload();
  await page.locator('#conn[data-state="open"]').waitFor();
  await page.locator(`#chats li[data-id="${chatId}"]`).click();
  await page.locator('#log li.versions .count', { hasText: '1/2' }).waitFor();
  assert.deepEqual(await shown(page), ['one', 'You said: one', '1/2', 'two', 'You said: two']);
  await say(page, 'three');
  await lastAgentText(page, 'You said: three');
  assert.deepEqual(await shown(page), ['one', 'You said: one', '1/2', 'two', 'You said: two', 'three', 'You said: three']);
  await page.shot('4-reloaded');
  await page.close();
});

test('a server killed during a regenerate: the restarted server finishes it on its branch', async () => {
  const page = await openChat(browser, port, 'branches-kill');
  await say(page, 'slow: 120');
  await page.locator('#log li.run-end').first().waitFor({ timeout: 20000 });
  await page.locator('#log li.run-end button.regenerate').click();
  await page.locator('#log li.versions .count', { hasText: '2/2' }).waitFor();
  await page.locator('#log li.agent .msg').last().filter({ hasText: 'w20 ' }).waitFor();
  server.kill('SIGKILL');
  await new Promise((r) => server.once('exit', r));
  await page.locator('#conn[data-state="reconnecting"]').waitFor();
  server = await startServer(dir, port);
  await page.locator('#conn[data-state="resumed"]').waitFor({ timeout: 20000 });
  await page.locator('#log li.run-end', { hasText: 'run completed' }).waitFor({ timeout: 30000 });
  const all = Array.from({ length: 120 }, (_, i) => `w${i + 1}`).join(' ');
  assert.deepEqual(await shown(page), ['slow: 120', '2/2', all]);
  await page.shot('1-finished');
  await page.close();
});

test('a message typed while the agent works waits, shown queued, and runs next', async () => {
  const page = await openChat(browser, port, 'queued');
  await say(page, 'slow: 80');
  await page.locator('#log li.agent .msg').last().filter({ hasText: 'w5 ' }).waitFor();
  await say(page, 'and then this');
  await page.locator('#log li.queued', { hasText: 'and then this' }).waitFor();
  await page.shot('1-queued');
  await lastAgentText(page, 'You said: and then this');
  assert.equal(await page.locator('#log li.queued').count(), 0, 'taken: no longer shown as waiting');
  assert.deepEqual(await shown(page), ['slow: 80', Array.from({ length: 80 }, (_, i) => `w${i + 1}`).join(' '), 'and then this', 'You said: and then this']);
  await page.close();
});

test('"Send now" during an answer stops it where it was, shown so, and answers the new message', async () => {
  const page = await openChat(browser, port, 'interrupt');
  await say(page, 'slow: 300');
  await page.locator('#log li.agent .msg').last().filter({ hasText: 'w5 ' }).waitFor();
  await type(page.locator('#text'), 'never mind');
  await page.click('#now');
  await lastAgentText(page, 'You said: never mind');
  await page.shot('1-interrupted');
  const answers = await shown(page);
  assert.equal(answers.length, 4);
  assert.deepEqual([answers[0], answers[2]], ['slow: 300', 'never mind']);
  assert.match(answers[1], /^w1 w2 w3 w4 w5( w\d+)*$/);
  assert.ok(!answers[1].includes('w300'), 'cut off');
  // The cut answer says so, and only it.
  assert.equal(await page.locator('#log li.agent .note.cut').count(), 1);
  assert.equal(await page.locator('#log li.agent').nth(0).locator('.note.cut').textContent(), 'stopped here');
  await page.close();
});

