// useChatList with React's test tooling, against the real server: the list
// read on subscribing, chats made elsewhere added, unread counts and reads
// kept current by the user's feed.
import { NodeWebSocket } from './support/node-ws.mjs';
import 'global-jsdom/register';

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { act, renderHook, waitFor } from '@testing-library/react';

import { AgentwireClient } from '../../js/agentwire.js';
import { freePort, startServer, tempDir } from '../../js/test/support/helpers.mjs';
import { applyFeedEvent, useChatList } from '../useChatList.js';

globalThis.IS_REACT_ACT_ENVIRONMENT = true;

let server;
let url;
const clients = [];
before(async () => {
  const port = await freePort();
  server = await startServer(tempDir(), port);
  url = `ws://127.0.0.1:${port}/v1/ws`;
});
after(() => {
  clients.forEach((c) => c.close());
  server?.kill('SIGKILL');
});

const connect = () => {
  const c = new AgentwireClient(url, { storage: null, WebSocket: NodeWebSocket });
  clients.push(c);
  return c;
};
const wait = (f) => waitFor(f, { timeout: 15000, interval: 20 });
const ended = (chat) => wait(() => assert.ok(chat.log.some((m) => m.type === 'chat.run_complete')));

test('the list: read on subscribing, then kept current by the feed', async () => {
  const phone = connect();
  const before = phone.startChat({ agent: 'demo', message: 'first' });
  await ended(before);

  const laptop = connect();
  const hook = renderHook(() => useChatList(laptop));
  const now = () => hook.result.current;
  await wait(() => assert.equal(now().loading, false));
  assert.deepEqual(now().chats.map((c) => [c.id, c.unread]), [[before.id, 1]]);

  // A chat started on another device appears, first, with its answer unread.
  const later = phone.startChat({ agent: 'demo', message: 'second' });
  await ended(later);
  await wait(() => assert.deepEqual(now().chats.map((c) => [c.id, c.unread]), [[later.id, 1], [before.id, 1]]));
  assert.equal(now().chats[0].preview, 'You said: second');

  // Read here: every device's list agrees.
  await act(async () => now().markRead(later.id));
  await wait(() => assert.equal(now().chats[0].unread, 0));
  const other = renderHook(() => useChatList(phone));
  await wait(() => assert.equal(other.result.current.loading, false));
  assert.equal(other.result.current.chats.find((c) => c.id === later.id).unread, 0);
  hook.unmount();
  other.unmount();
});

test('a feed event updates, adds, reorders and drops archived chats', () => {
  const at = (m) => `2026-11-28T08:0${m}:00.000Z`;
  const list = [
    { id: 'a', agent: 'demo', unread: 0, read_seq: 4, last_activity_at: at(2), pinned: true },
    { id: 'b', agent: 'demo', unread: 0, read_seq: 4, last_activity_at: at(1) },
  ];
  const event = (id, minute, extra = {}) => ({
    type: 'feed.chat', reason: 'updated', chat_id: id, agent: 'demo', unread: 2, read_seq: 4,
    last_seq: 9, active_at: at(minute), archived: false, ...extra,
  });
  const added = applyFeedEvent(list, event('c', 5, { reason: 'created', title: 'New' }));
  assert.deepEqual(added.map((c) => c.id), ['a', 'c', 'b'], 'pinned first, then the latest');
  assert.equal(added[1].title, 'New');
  const moved = applyFeedEvent(added, event('b', 6));
  assert.deepEqual(moved.map((c) => [c.id, c.unread]), [['a', 0], ['b', 2], ['c', 2]]);
  assert.equal(moved.find((c) => c.id === 'a').pinned, true);
  assert.deepEqual(applyFeedEvent(moved, event('b', 7, { archived: true })).map((c) => c.id), ['a', 'c']);
  assert.equal(applyFeedEvent(moved, { type: 'feed.lagged' }), moved);
});
