// The pure fold on its own: what a continued run (issue 19) looks like.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { applyEnvelope, applyEnvelopes, initialChatState } from '../chatState.js';

const fold = (envelopes) => envelopes.reduce(applyEnvelope, initialChatState());

test('a turn discarded after a restart leaves its words out, the turn asked again shows once', () => {
  let seq = 0;
  const e = (type, fields = {}) => ({ type, chat_id: 'c', seq: ++seq, ts: '2026-11-25T10:00:00.000Z', ...fields });
  const state = fold([
    e('chat.text', { agent: 'user', content: 'slow: 3' }),
    e('chat.select_speaker', { agent: 'demo' }),
    e('chat.print', { agent: 'demo', content: 'w1 ' }),
    e('chat.print', { agent: 'demo', content: 'w2 ' }),
    e('chat.turn_discarded', { agent: 'demo', from_seq: 2, reason: 'restart' }),
    e('chat.select_speaker', { agent: 'demo' }),
    e('chat.print', { agent: 'demo', content: 'w1 ' }),
    e('chat.print', { agent: 'demo', content: 'w2 ' }),
    e('chat.print', { agent: 'demo', content: 'w3' }),
    e('chat.text', { agent: 'demo', content: 'w1 w2 w3' }),
    e('chat.usage_summary', { total_tokens: 0, prompt_tokens: 0, completion_tokens: 0 }),
    e('chat.run_complete', { reason: 'completed' }),
  ]);
  assert.deepEqual(state.messages.map((m) => [m.role, m.text, m.streaming]), [
    ['user', 'slow: 3', false],
    ['agent', 'w1 w2 w3', false],
  ]);
  assert.equal(state.lastRunEnd, 'completed');
});

test("a model's reasoning is kept with the words of its turn", () => {
  let seq = 0;
  const e = (type, fields = {}) => ({ type, chat_id: 'c', seq: ++seq, ts: '2026-11-25T10:00:00.000Z', ...fields });
  const state = fold([
    e('chat.text', { agent: 'user', content: 'hi' }),
    e('chat.select_speaker', { agent: 'a' }),
    e('chat.reasoning', { agent: 'a', content: 'A greeting; ' }),
    e('chat.reasoning', { agent: 'a', content: 'greet back.' }),
    e('chat.print', { agent: 'a', content: 'Hello!' }),
    e('chat.text', { agent: 'a', content: 'Hello!' }),
  ]);
  assert.deepEqual(state.messages.map((m) => [m.role, m.text, m.reasoning, m.streaming]), [
    ['user', 'hi', undefined, false],
    ['agent', 'Hello!', 'A greeting; greet back.', false],
  ]);
});

test('a chat that branched shows its active path, with the versions where there are several', () => {
  let seq = 0;
  const e = (type, fields = {}) => ({ type, chat_id: 'c', seq: ++seq, ts: '2026-11-27T10:00:00.000Z', ...fields });
  const run = (said, answer) => [
    e('chat.text', { agent: 'user', content: said, starts_run: true }),
    ...answerOf(answer),
  ];
  const answerOf = (answer) => [
    e('chat.select_speaker', { agent: 'demo' }),
    e('chat.print', { agent: 'demo', content: answer }),
    e('chat.text', { agent: 'demo', content: answer }),
    e('chat.usage_summary', { total_tokens: 0, prompt_tokens: 0, completion_tokens: 0 }),
    e('chat.run_complete', { reason: 'completed' }),
  ];
  const shown = (state) => state.messages.map((m) => [m.role, m.text, m.versions ? `${m.versions.index + 1}/${m.versions.all.length}` : '']);
  const log = run('a', 'You said: a'); // seqs 1..6
  log.push(e('chat.branch', { at: 0, reason: 'edit' })); // 7: an edit of the first message
  log.push(...run('b', 'You said: b')); // 8..13
  let state = fold(log);
  assert.deepEqual(shown(state), [['user', 'b', '2/2'], ['agent', 'You said: b', '']]);
  assert.deepEqual(state.messages[0].versions.all, [1, 8]);
  assert.equal(state.run, 'idle');

  // Switched back to the first version: its whole branch, counted 1 of 2.
  const toFirst = e('chat.branch', { at: 6, reason: 'switch' }); // 14
  state = applyEnvelope(state, toFirst);
  assert.deepEqual(shown(state), [['user', 'a', '1/2'], ['agent', 'You said: a', '']]);

  // A regenerated answer to it: the answer is version 2 of 2.
  const more = [e('chat.branch', { at: 1, reason: 'regenerate' }), ...answerOf('again')]; // 15, 16..20
  state = more.reduce(applyEnvelope, state);
  assert.deepEqual(shown(state), [['user', 'a', '1/2'], ['agent', 'again', '2/2']]);
  assert.deepEqual(state.messages[1].versions.all, [2, 16]);
  // Envelopes already folded change nothing (a replay overlapping the live stream).
  assert.equal(applyEnvelope(state, log[3]), state);
  // The same log folded in one go gives the same state.
  assert.deepEqual(shown(fold([...log, toFirst, ...more])), shown(state));
  // A replay folded at once (each branch's path not folded on the way).
  const replayed = applyEnvelopes(initialChatState(), [...log, toFirst, ...more]);
  assert.deepEqual(shown(replayed), shown(state));
  assert.equal(replayed.lastSeq, state.lastSeq);
  // Part of it live, then a replay that overlaps it.
  const overlapping = applyEnvelopes(fold(log.slice(0, 9)), [...log.slice(5), toFirst, ...more]);
  assert.deepEqual(shown(overlapping), shown(state));
});

test('a message sent during a run waits, shown queued; an interrupted answer is marked partial', () => {
  let seq = 0;
  const e = (type, fields = {}) => ({ type, chat_id: 'c', seq: ++seq, ts: '2026-11-27T10:00:00.000Z', ...fields });
  let state = fold([
    e('chat.text', { agent: 'user', content: 'slow: 9', starts_run: true }),
    e('chat.select_speaker', { agent: 'demo' }),
    e('chat.print', { agent: 'demo', content: 'w1 ' }),
    e('chat.queued', { agent: 'user', content: 'stop', mode: 'interrupt' }), // 4
  ]);
  assert.deepEqual(state.queued, [{ seq: 4, text: 'stop', mode: 'interrupt' }]);
  assert.equal(state.messages.length, 2, 'the queued message is not in the conversation yet');
  state = [
    e('chat.text', { agent: 'demo', content: 'w1 ', partial: true }),
    e('chat.usage_summary', { total_tokens: 0, prompt_tokens: 0, completion_tokens: 0 }),
    e('chat.run_complete', { reason: 'cancelled' }),
    e('chat.text', { agent: 'user', content: 'stop', queued: 4, starts_run: true }),
  ].reduce(applyEnvelope, state);
  assert.deepEqual(state.queued, []);
  assert.deepEqual(state.messages.map((m) => [m.role, m.text, m.partial ?? false, m.streaming]), [
    ['user', 'slow: 9', false, false],
    ['agent', 'w1 ', true, false],
    ['user', 'stop', false, false],
  ]);
  assert.equal(state.run, 'running');
});

test("a regenerate that ends before it says anything leaves no versions for the next question", () => {
  let seq = 0;
  const e = (type, fields = {}) => ({ type, chat_id: 'c', seq: ++seq, ts: '2026-11-27T10:00:00.000Z', ...fields });
  const state = fold([
    e('chat.text', { agent: 'user', content: 'a', starts_run: true }),
    e('chat.select_speaker', { agent: 'demo' }),
    e('chat.text', { agent: 'demo', content: 'A' }),
    e('chat.run_complete', { reason: 'completed' }), // 4
    e('chat.branch', { at: 1, reason: 'regenerate' }),
    e('chat.select_speaker', { agent: 'demo' }), // 6: the second version starts
    e('chat.error', { error_code: 'PROVIDER_ERROR', message: 'down' }),
    e('chat.run_complete', { reason: 'error' }),
    e('chat.text', { agent: 'user', content: 'b', starts_run: true }),
  ]);
  assert.deepEqual(state.messages.map((m) => [m.text, m.versions ?? null]), [['a', null], ['b', null]]);
});

test("the chat's title is its last chat.title, whatever version the path shows", () => {
  let seq = 0;
  const e = (type, fields = {}) => ({ type, chat_id: 'c', seq: ++seq, ts: '2026-11-27T10:00:00.000Z', ...fields });
  const log = [
    e('chat.text', { agent: 'user', content: 'one' }),
    e('chat.text', { agent: 'demo', content: 'You said: one' }),
    e('chat.run_complete', { reason: 'completed' }),
    e('chat.title', { title: 'one', source: 'words' }), // 4: after the first run
    e('chat.branch', { at: 0, reason: 'edit' }), // 5: the path leaves the title behind
    e('chat.text', { agent: 'user', content: 'uno' }),
  ];
  const live = log.reduce(applyEnvelope, initialChatState());
  assert.equal(live.title, 'one');
  assert.deepEqual(live.messages.map((m) => m.text), ['uno']);
  const replayed = applyEnvelopes(initialChatState(), log);
  assert.equal(replayed.title, 'one');
  assert.deepEqual(replayed.messages.map((m) => m.text), ['uno']);
  const renamed = applyEnvelope(replayed, e('chat.title', { title: 'Numbers', source: 'user' }));
  assert.equal(renamed.title, 'Numbers');
  assert.deepEqual(renamed.messages, replayed.messages, 'a title is no message');
});

test("an upstream agent's shared state: snapshots replace it, deltas change it, per agent", () => {
  let seq = 0;
  const e = (type, fields = {}) => ({ type, chat_id: 'c', seq: ++seq, ts: '2026-11-28T10:00:00.000Z', ...fields });
  const state = fold([
    e('chat.text', { agent: 'user', content: 'plan a trip' }),
    e('chat.agent_state', { agent: 'planner', snapshot: { steps: ['fly'], city: 'Oslo' } }),
    e('chat.agent_state', { agent: 'planner', delta: [
      { op: 'add', path: '/steps/-', value: 'hotel' },
      { op: 'replace', path: '/city', value: 'Bergen' },
      { op: 'copy', from: '/city', path: '/from' },
      { op: 'move', from: '/from', path: '/origin' },
      { op: 'test', path: '/steps/0', value: 'fly' },
      { op: 'add', path: '/a~1b', value: 1 },
      { op: 'remove', path: '/a~1b' },
    ] }),
    // Does not apply (no /nope): skipped, the state stays.
    e('chat.agent_state', { agent: 'planner', delta: [{ op: 'replace', path: '/nope', value: 1 }] }),
    e('chat.agent_state', { agent: 'booker', delta: [{ op: 'add', path: '/n', value: 1 }] }),
  ]);
  assert.deepEqual(state.agentState, {
    planner: { steps: ['fly', 'hotel'], city: 'Bergen', origin: 'Bergen' },
    booker: { n: 1 },
  });
});
