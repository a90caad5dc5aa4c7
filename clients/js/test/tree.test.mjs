// The tree fold of the JS client against the rules of protocol/README.md
// ("Conversations are trees"), on a log with an edit, a regenerate and a
// switch back.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Tree } from '../tree.js';

const regular = (seq) => ({ type: 'chat.text', seq });
const branch = (seq, at) => ({ type: 'chat.branch', seq, at });

test('an edit, a regenerate and a switch back', () => {
  const t = new Tree();
  // 1..=4 the first turn, 5..=7 the second; 8 edits 5 (back to 4), 9..=11;
  // 12 regenerates 9 (back to 9), 13..=14; 15 switches to 7.
  for (let s = 1; s <= 7; s++) t.push(regular(s));
  t.push(branch(8, 4));
  for (let s = 9; s <= 11; s++) t.push(regular(s));
  assert.deepEqual([...t.path()], [11, 10, 9, 4, 3, 2, 1]);
  assert.deepEqual(t.versions(9), { all: [5, 9], index: 1 });
  assert.equal(t.versions(10), null);
  t.push(branch(12, 9));
  assert.equal(t.pointer(), 9);
  t.push(regular(13));
  t.push(regular(14));
  assert.deepEqual(t.versions(13), { all: [10, 13], index: 1 });
  assert.deepEqual([...t.path()], [14, 13, 9, 4, 3, 2, 1]);
  t.push(branch(15, 7));
  assert.deepEqual([...t.path()], [7, 6, 5, 4, 3, 2, 1]);
  assert.deepEqual(t.versions(5), { all: [5, 9], index: 0 });
  assert.ok(t.isBranch(15) && !t.isBranch(14));
});
