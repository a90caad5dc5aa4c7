// The web page in a real headless Chromium (Debian's, driven by playwright-core):
// a conversation with `demo`, input requests, a component, a server killed and
// restarted mid-stream, model output that tries to be HTML, a template quiz
// (examples/agents/capitals-quiz.yaml), approvals and previews that stay
// answered after a reload, and seed 003's database chat drawing a chart (a
// local stand-in for an OpenAI-compatible model writes the SQL and the spec);
// a group chat (examples/agents/research-team.yaml) with each member under its
// own name and colour, and a group whose user picks the next speaker; seed
// 002's workflows picked by category, their forms filled and run in a chat.
//
// Needs AGENTWIRE_BIN (the built binary) and /usr/bin/chromium. Screenshots of
// each step go to $E2E_SHOTS (default: ./shots).
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';

import { freePort, startServer, tempDir } from '../js/test/support/helpers.mjs';
import { analystAgent, bindSales, lastAgentText, launch, newChat as openChat, say, startModel, type } from './support.mjs';

/** A scripted agent with a tool that needs approval and one that previews. */
const HITL_AGENT = `id: hitl
name: Approvals
description: A tool that needs approval, and a preview
model:
  provider: scripted
  script:
    rules:
      - prefix: "guarded: "
        arg: count
        max: 10
        call: {tool: guarded, input: {steps: "{arg}"}}
        then: "Tool said: {result}"
      - prefix: "plan: "
        call: {tool: plan, input: {steps: 1, description: "{arg}"}}
        then: "Plan: {result}"
      - prefix: "think: "
        think: "Weighing {arg} against the alternatives"
        reply: "Go with {arg}."
      - reply: "You said: {text}"
tools:
  - name: guarded
    input_schema: {type: object, properties: {steps: {type: integer, minimum: 1}}, required: [steps]}
    builtin: progress
    requires_approval: true
  - name: plan
    input_schema: {type: object, properties: {steps: {type: integer}, description: {type: string}}, required: [steps, description]}
    builtin: progress
    preview: {component_type: plan_preview, fields: {description: /input/description, outcome: /result}}
`;

/** A group whose user picks each speaker (manual selection), two turns a run. */
const PANEL_AGENT = `id: panel
name: Panel
description: Two members; you pick who speaks
group:
  speaker_selection: manual
  max_rounds: 3
  members:
    - {name: alice, model: {provider: scripted, script: {rules: [{reply: "Alice here."}]}}}
    - {name: bob, model: {provider: scripted, script: {rules: [{reply: "Bob here."}]}}}
`;

let browser;
let server;
let port;
let dir;
let llm;

before(async () => {
  dir = tempDir();
  // The static quiz of examples/agents, for the template test.
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  mkdirSync(join(dir, 'agents'), { recursive: true });
  copyFileSync(join(root, 'examples', 'agents', 'capitals-quiz.yaml'), join(dir, 'agents', 'capitals-quiz.yaml'));
  writeFileSync(join(dir, 'agents', 'hitl.yaml'), HITL_AGENT);
  copyFileSync(join(root, 'examples', 'agents', 'research-team.yaml'), join(dir, 'agents', 'research-team.yaml'));
  // The groups whose structure the page draws: conditional handoffs, and a
  // member holding nested chats (with the agents it nests).
  for (const f of ['triage-desk.yaml', 'editorial.yaml', 'critic.yaml', 'review-panel.yaml']) {
    copyFileSync(join(root, 'examples', 'agents', f), join(dir, 'agents', f));
  }
  mkdirSync(join(dir, 'agents', 'workflows'), { recursive: true });
  for (const f of ['summarize.yaml', 'batch-job.yaml']) {
    copyFileSync(join(root, 'examples', 'agents', 'workflows', f), join(dir, 'agents', 'workflows', f));
  }
  writeFileSync(join(dir, 'agents', 'panel.yaml'), PANEL_AGENT);
  llm = await startModel();
  writeFileSync(join(dir, 'agents', 'analyst.yaml'), analystAgent(llm));
  process.env.AGENTWIRE_CONNECTION_FILES_DIR = join(root, 'examples', 'data');
  port = await freePort();
  server = await startServer(dir, port);
  browser = await launch();
});

after(async () => {
  llm?.close();
  await browser?.close();
  server?.kill('SIGKILL');
});

const newChat = (name, agent) => openChat(browser, port, name, agent);

test('a conversation with demo: text, ask, secret and a component', async () => {
  const page = await newChat('conversation');
  await say(page, 'hello');
  assert.equal(await lastAgentText(page, 'You said: hello'), 'You said: hello');
  await page.shot('1-hello');

  await say(page, 'ask: Your name?');
  const input = page.locator('.card input[aria-label="Your name?"]');
  await type(input, 'Ada');
  await input.press('Enter');
  assert.equal(await lastAgentText(page, 'You answered: Ada'), 'You answered: Ada');
  await page.shot('2-ask');

  await say(page, 'secret: Your PIN?');
  const secret = page.locator('.card input[aria-label="Your PIN?"]');
  assert.equal(await secret.getAttribute('type'), 'password');
  await type(secret, '1234');
  await secret.press('Enter');
  assert.equal(await lastAgentText(page, 'Secret received'), 'Secret received (4 characters)');
  await page.shot('3-secret');

  await say(page, 'ui: free_text');
  const card = page.locator('.card', { hasText: 'free_text' }).last();
  await type(card.locator('input'), 'blue');
  await card.locator('button', { hasText: 'Send' }).click();
  assert.equal(await lastAgentText(page, 'Component returned'), 'Component returned: {"text":"blue"}');
  await page.shot('4-component');
  await page.close();
});

test('a killed server that does not continue runs: the page shows the answer exactly once', async () => {
  const page = await newChat('restart');
  await say(page, 'slow: 300');
  await page.locator('#log li.agent .msg').last().filter({ hasText: 'w20 ' }).waitFor();
  server.kill('SIGKILL');
  await new Promise((r) => server.once('exit', r));
  await page.locator('#conn[data-state="reconnecting"]').waitFor();
  await page.shot('1-reconnecting');
  server = await startServer(dir, port, ['--continue-runs-after-restart', 'false']);
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

test('a killed server: the run goes on, the page shows the continued answer once', async () => {
  const page = await newChat('continue');
  await say(page, 'slow: 60');
  await page.locator('#log li.agent .msg').last().filter({ hasText: 'w15 ' }).waitFor();
  server.kill('SIGKILL');
  await new Promise((r) => server.once('exit', r));
  await page.locator('#conn[data-state="reconnecting"]').waitFor();
  server = await startServer(dir, port);
  await page.locator('#conn[data-state="resumed"]').waitFor({ timeout: 20000 });
  await page.locator('#log li.run-end', { hasText: 'run completed' }).last().waitFor({ timeout: 20000 });
  await page.shot('1-continued');
  // The cut turn's words went; the turn asked again is the only answer.
  const bubbles = await page.locator('#log li.agent .msg').allTextContents();
  const answer = bubbles.at(-1).trim();
  assert.equal(answer, Array.from({ length: 60 }, (_, i) => `w${i + 1}`).join(' '));
  assert.ok(!bubbles.slice(0, -1).some((b) => b.includes('w15')), 'no bubble of the cut turn is left');
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

test('a template quiz: widgets, progress and the score', async () => {
  const page = await newChat('quiz', 'capitals-quiz');
  await lastAgentText(page, 'Three questions about capitals');
  const label = page.locator('#log li.template-progress .note');
  await label.filter({ hasText: 'Question 1 (2 of 4)' }).waitFor();
  await page.shot('1-first-widget');

  await page.locator('.widget[data-widget="multiple_choice"] button', { hasText: 'Paris' }).click();
  await label.filter({ hasText: 'Question 2 (3 of 4)' }).waitFor();
  const nordic = page.locator('.widget[data-widget="multiple_choice"]').last();
  await nordic.locator('input[aria-label="Oslo"]').check();
  await nordic.locator('input[aria-label="Helsinki"]').check();
  await nordic.locator('button', { hasText: 'Submit' }).click();
  await label.filter({ hasText: 'Question 3 (4 of 4)' }).waitFor();
  const text = page.locator('.widget[data-widget="free_text"]');
  assert.equal(await text.locator('textarea').getAttribute('placeholder'), 'A sentence or two…');
  await page.shot('2-free-text');
  await text.locator('button', { hasText: 'Skip' }).click();

  assert.equal(await lastAgentText(page, 'You scored'), 'You scored 2 of 2.');
  await label.filter({ hasText: 'All items done' }).waitFor();
  // Answered widgets are closed.
  assert.equal(await page.locator('.widget button:enabled').count(), 0);
  await page.shot('3-score');
  await page.close();
});

test('approvals and a preview, in log order, still answered after a reload', async () => {
  const page = await newChat('hitl', 'hitl');
  await say(page, 'guarded: 2');
  const first = page.locator('.card', { hasText: 'approval' }).last();
  await first.locator('button', { hasText: 'Approve' }).click();
  assert.equal(await lastAgentText(page, 'Tool said'), 'Tool said: completed 2 steps');
  await first.locator('.note', { hasText: 'approved' }).waitFor();

  await say(page, 'guarded: 1');
  const second = page.locator('.card', { hasText: 'approval' }).nth(1);
  await second.locator('button', { hasText: 'Reject' }).click();
  assert.match(await lastAgentText(page, 'refused'), /failed: the user refused this tool call: rejected in the web page/);
  await second.locator('.note', { hasText: 'refused: rejected in the web page' }).waitFor();

  await say(page, 'plan: Low stock alert');
  const preview = page.locator('.card.preview');
  await preview.locator('.description', { hasText: 'Low stock alert' }).waitFor();
  assert.match(await lastAgentText(page, 'preview_sent'), /"status":"preview_sent"/);
  await page.shot('1-answered');

  // A reload replays the log: the same cards, answered, in the same order.
  const items = () => page.locator('#log > li').evaluateAll((lis) => lis.map((li) => li.textContent));
  await page.locator('#log li.run-end').nth(2).waitFor();
  const before = await items();
  const chatId = await page.locator('#chats li.current').getAttribute('data-id');
  await page.reload();
  await page.locator('#conn[data-state="open"]').waitFor();
  await page.locator(`#chats li[data-id="${chatId}"]`).click();
  await page.locator('#log li.run-end').nth(2).waitFor();
  assert.deepEqual(await items(), before);
  assert.equal(await page.locator('#log .card button:enabled').count(), 0, 'nothing is open');
  // Each run's end marker comes after its output.
  const order = await items();
  const at = (text) => order.findIndex((t) => t.includes(text));
  assert.ok(at('Tool said: completed 2 steps') < at('run completed'), order.join(' | '));
  assert.ok(at('Low stock alert') < order.length - 1, order.join(' | '));
  assert.match(order.at(-1), /run completed/);
  await page.shot('2-reloaded');
  await page.close();
});

test("a model's reasoning is folded away above its answer", async () => {
  const page = await newChat('reasoning', 'hitl');
  await say(page, 'think: tea');
  assert.equal(await lastAgentText(page, 'Go with tea.'), 'Go with tea.');
  const box = page.locator('#log li.agent details.reasoning').last();
  assert.equal(await box.evaluate((d) => d.open), false);
  await box.locator('summary').click();
  assert.match(await box.textContent(), /Weighing tea against the alternatives/);
  await page.shot('1-open');
  await page.close();
});

test('a database chat: the SQL result as a table, the chart drawn, the answer as markdown', async () => {
  const page = await newChat('chart', 'analyst');
  const bound = await bindSales(page, port);
  assert.match(bound.db_schema, /orders/);

  const sql = 'SELECT r.name AS region, SUM(o.quantity * p.unit_price) AS sales FROM orders o '
    + 'JOIN customers c ON c.id = o.customer_id JOIN regions r ON r.id = c.region_id '
    + 'JOIN products p ON p.id = o.product_id GROUP BY r.name ORDER BY r.name';
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    mark: 'bar',
    data: { values: [{ region: 'East', sales: 900 }, { region: 'North', sales: 1200 }, { region: 'South', sales: 700 }, { region: 'West', sales: 1000 }] },
    encoding: { x: { field: 'region', type: 'nominal' }, y: { field: 'sales', type: 'quantitative' } },
  };
  const question = JSON.stringify({ question: 'total sales by region as a bar chart' });
  llm.replies.push(
    [{ call: { id: 'c1', name: 'ask_database', args: question } }],
    [{ content: sql }],
    [{ call: { id: 'c2', name: 'ask_analyst', args: question } }],
    [{ content: JSON.stringify(spec) }],
    [{ content: '**North** sells the most.\n\n- East\n- West\n\n<img src=x onerror="window.pwned=1">' }],
  );
  await say(page, 'total sales by region as a bar chart');
  await page.locator('table.result tbody tr').nth(3).waitFor({ timeout: 20000 });
  assert.equal(await page.locator('table.result tbody tr').count(), 4);
  // Drawn in its frame, on a canvas.
  await page.locator('.chart[data-drawn="true"] iframe').waitFor({ timeout: 20000 });
  await page.frameLocator('.chart iframe').locator('canvas').waitFor();
  const bubble = page.locator('#log li.agent .msg').last();
  await bubble.locator('strong', { hasText: 'North' }).waitFor();
  assert.equal(await bubble.locator('li').count(), 2);
  assert.equal(await page.locator('#log img').count(), 0, 'raw HTML from the model stays text');
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  await page.locator('.chart').scrollIntoViewIfNeeded();
  await page.shot('1-chart');
  await page.close();
});

test('a group chat: each member under its own name and colour; the user picks a speaker', async () => {
  const page = await newChat('group', 'research-team');
  await say(page, 'trip to Lisbon');
  await lastAgentText(page, 'pack for anything');
  const turns = await page.locator('#log li.agent').evaluateAll((lis) =>
    lis.map((li) => [li.dataset.agent, li.querySelector('.who').textContent, getComputedStyle(li.querySelector('.who')).color]));
  assert.deepEqual(turns.map(([agent, who]) => [agent, who]), [
    ['planner', 'planner'], ['researcher', 'researcher'], ['writer', 'writer'],
  ]);
  assert.equal(new Set(turns.map(([, , colour]) => colour)).size, 3, `three colours: ${JSON.stringify(turns)}`);
  await page.locator('.card', { hasText: 'tool: get_weather · researcher' }).waitFor();
  await page.shot('1-team');
  await page.close();

  const panel = await newChat('group-manual', 'panel');
  await say(panel, 'Who knows?');
  const choice = panel.locator('.card.choice').last();
  await choice.locator('button[data-option="bob"]').click();
  await lastAgentText(panel, 'Bob here.');
  await panel.locator('.card.choice').nth(1).locator('button[data-option="alice"]').click();
  await lastAgentText(panel, 'Alice here.');
  await panel.locator('#log li.run-end').waitFor();
  const speakers = await panel.locator('#log li.agent').evaluateAll((lis) => lis.map((li) => li.dataset.agent));
  assert.deepEqual(speakers, ['bob', 'alice']);
  assert.equal(await panel.locator('.card.choice button:enabled').count(), 0, 'both choices answered');
  await panel.shot('2-manual');
  await panel.close();
});

test("a group's structure: how each speaker was chosen, its handoffs, and nested chats folded", async () => {
  const desk = await newChat('group-handoffs', 'triage-desk');
  await say(desk, 'invoice 42 <img src=x onerror="window.pwned=1">');
  await lastAgentText(desk, 'Billing here.');
  const handoff = desk.locator('#log li.note.handoff');
  await handoff.waitFor();
  assert.equal(await handoff.textContent(), 'triage → billing');
  const hows = await desk.locator('#log li.agent').evaluateAll((lis) =>
    lis.map((li) => [li.dataset.agent, li.querySelector('.how')?.textContent ?? null]));
  assert.deepEqual(hows, [['billing', 'handoff']]);
  assert.equal(await desk.locator('#log img').count(), 0, "the user's markup stays text");
  assert.equal(await desk.evaluate(() => window.pwned), undefined);
  await desk.close();
  // The context condition: the manager takes over without triage's model.
  const angry = await newChat('group-context', 'triage-desk');
  await say(angry, 'angry!');
  await lastAgentText(angry, 'Noted.');
  await say(angry, 'hello again');
  await lastAgentText(angry, 'A manager here.');
  assert.equal(await angry.locator('#log li.note.handoff').last().textContent(), 'triage → manager (${attempts} >= 2)');
  await angry.shot('5-handoffs');
  await angry.close();

  const editorial = await newChat('group-nested', 'editorial');
  await say(editorial, 'Write about resumable chats');
  await editorial.locator('#log li.run-end').waitFor();
  // The reviewer's nested chats are one fold, closed, between the writer's
  // draft and the reviewer's reply; opened, each inner speaker is there.
  const top = await editorial.locator('#log > li.agent').evaluateAll((lis) => lis.map((li) => li.dataset.agent));
  assert.deepEqual(top, ['writer', 'reviewer']);
  const fold = editorial.locator('#log details.nested[data-member="reviewer"]');
  assert.equal(await fold.count(), 1);
  assert.equal(await fold.evaluate((d) => d.open), false);
  await fold.locator('summary').click();
  const inner = await fold.locator('li.agent').evaluateAll((lis) => lis.map((li) => li.dataset.agent));
  assert.deepEqual(inner, ['reviewer/critic', 'reviewer/chair', 'reviewer/editor']);
  assert.match(await fold.locator('li.note.opening').first().textContent(), /^→ reviewer\/critic: Please critique: Draft:/);
  await editorial.shot('6-nested');
  await editorial.close();
});

test('workflows: picked by category, their forms filled and run in the chat', async () => {
  const page = await newChat('workflows');
  await say(page, 'hello');
  await lastAgentText(page, 'You said: hello');
  const categories = await page.locator('#workflows .category h3').allTextContents();
  assert.deepEqual(categories, ['Operations', 'Writing']);

  // A prompt workflow: an enum with its default, a required text.
  await page.locator('#workflows [data-workflow="summarize"]').click();
  const form = page.locator('#workflow-form');
  await type(form.locator('input[name="topic"]'), 'tides');
  assert.equal(await form.locator('select[name="length"]').inputValue(), '"one line"');
  await form.locator('select[name="length"]').selectOption({ label: 'one paragraph' });
  await page.shot('1-form');
  await form.locator('button[type="submit"]').click();
  assert.equal(await lastAgentText(page, 'Summarize tides'), 'You said: Summarize tides in one paragraph.');
  await page.locator('.card.workflow[data-workflow="summarize"] .note', { hasText: 'done' }).waitFor();
  // A workflow is a run of its own: the next one waits for this one's end.
  await page.locator('#log li.run-end').nth(1).waitFor();

  // A steps workflow that asks first: a number, a checkbox, then the approval.
  await page.locator('#workflows [data-workflow="batch-job"]').click();
  assert.equal(await form.locator('input[name="batches"]').inputValue(), '3');
  await type(form.locator('input[name="batches"]'), '2');
  await form.locator('input[name="dry_run"]').check();
  await form.locator('button[type="submit"]').click();
  const gate = page.locator('#log .card', { hasText: 'approval (batch-job)' });
  await gate.locator('button', { hasText: 'Approve' }).click();
  const card = page.locator('.card.workflow[data-workflow="batch-job"]');
  await card.locator('pre.result').waitFor();
  assert.match(await card.locator('pre').first().textContent(), /"batches": 2,\s+"dry_run": true/);
  assert.match(await card.locator('pre.result').textContent(), /completed 2 steps/);
  await page.shot('2-steps');
  await page.close();
});
