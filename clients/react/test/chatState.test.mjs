// The pure fold on its own: what a continued run (issue 19) looks like.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { applyEnvelope, initialChatState } from '../chatState.js';

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
