// agentwireTransport: the AI SDK's own chat sends only the last message
// (the server holds the conversation), edits and resumes as before.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { DefaultChatTransport } from 'ai';

import { agentwireTransport } from '../transport.js';
import { Chat, startWithAgents, textOf, until } from './support/chat.mjs';

let server;
let base;
before(async () => {
  let port;
  ({ server, port } = await startWithAgents());
  base = `http://127.0.0.1:${port}`;
});
after(() => server?.kill('SIGKILL'));

/** A fetch that records what each request sent. */
function recording() {
  const sent = [];
  const fetcher = async (url, init = {}) => {
    sent.push({ url: String(url), method: init.method ?? 'GET', headers: new Headers(init.headers), body: init.body ? JSON.parse(init.body) : null });
    return fetch(url, init);
  };
  return { sent, fetcher };
}

test('only the last message goes up, with the protocol version; the answers are the same', async () => {
  const { sent, fetcher } = recording();
  const chat = new Chat({ id: crypto.randomUUID(), transport: new DefaultChatTransport(agentwireTransport({ baseUrl: base, fetch: fetcher })) });
  await chat.sendMessage({ text: 'hello' });
  await chat.sendMessage({ text: 'again' });
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.deepEqual(chat.messages.map(textOf), ['hello', 'You said: hello', 'again', 'You said: again']);
  const posts = sent.filter((s) => s.method === 'POST');
  assert.deepEqual(posts.map((p) => p.body.messages.length), [1, 1]);
  assert.equal(posts[1].body.messages[0].parts[0].text, 'again');
  assert.ok(posts.every((p) => p.headers.get('agentwire-protocol') === '1'));

  // An edit still finds its message: the messages up to it go up.
  await chat.sendMessage({ text: 'AGAIN', messageId: chat.messages[2].id });
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.equal(textOf(chat.lastMessage), 'You said: AGAIN');
  assert.equal(sent.filter((s) => s.method === 'POST').at(-1).body.messages.length, 3);
});

test('a page that comes back resumes through the same options', async () => {
  const id = crypto.randomUUID();
  const first = new Chat({ id, transport: new DefaultChatTransport(agentwireTransport({ baseUrl: base })) });
  const sending = first.sendMessage({ text: 'slow: 30' });
  await until(() => first.messages.length === 2 && textOf(first.lastMessage).split(' ').length >= 5, 'some words');
  first.stop();
  await sending.catch(() => {});
  const { sent, fetcher } = recording();
  const again = new Chat({ id, messages: first.messages.slice(0, 1), transport: new DefaultChatTransport(agentwireTransport({ baseUrl: base, fetch: fetcher })) });
  await again.resumeStream();
  await until(() => again.status === 'ready', 'the resumed stream to end');
  const words = Array.from({ length: 30 }, (_, i) => `w${i + 1}`).join(' ');
  assert.equal(textOf(again.lastMessage), words, 'every word once');
  assert.equal(sent[0].method, 'GET');
  assert.match(sent[0].url, new RegExp(`/v1/ai-sdk/chat/${id}/stream$`));
  assert.equal(sent[0].headers.get('agentwire-protocol'), '1');
});
