// @agentwire/ai-sdk: the AI SDK's own chat, on both of its transports,
// sends only the last message (the server holds the conversation), edits
// and resumes as before, and carries a token where each transport can.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';

import { DefaultChatTransport, WebSocketChatTransport } from 'ai';

import { freePort, startServer, tempDir } from '../../js/test/support/helpers.mjs';
import { agentwireTransport, agentwireWebSocketTransport } from '../transport.js';
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

  // A call's own headers go with the options' (a token refreshed per call, say).
  await chat.sendMessage({ text: 'once more' }, { headers: { 'x-trace': 'abc' } });
  const last = sent.filter((s) => s.method === 'POST').at(-1);
  assert.equal(last.headers.get('x-trace'), 'abc');
  assert.equal(last.headers.get('agentwire-protocol'), '1');
  assert.equal(last.body.messages.length, 1);

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

/** A WebSocket that records the address it opened and the frames it sent. */
function recordingSocket() {
  const seen = { urls: [], frames: [] };
  class Recording extends WebSocket {
    constructor(url, protocols) {
      super(url, protocols);
      seen.urls.push(new URL(String(url)));
    }
    send(data) {
      seen.frames.push(JSON.parse(String(data)));
      super.send(data);
    }
  }
  return { seen, Recording };
}

test('over the WebSocket transport too, only the last message goes up, with the version at the handshake', async () => {
  const { seen, Recording } = recordingSocket();
  const transport = new WebSocketChatTransport({ ...agentwireWebSocketTransport({ baseUrl: base, agent: 'demo' }), webSocket: Recording });
  try {
    const chat = new Chat({ id: crypto.randomUUID(), transport });
    await chat.sendMessage({ text: 'hello' });
    await chat.sendMessage({ text: 'again' });
    assert.equal(chat.status, 'ready', String(chat.error));
    assert.deepEqual(chat.messages.map(textOf), ['hello', 'You said: hello', 'again', 'You said: again']);
    assert.equal(seen.urls[0].protocol, 'ws:');
    assert.equal(seen.urls[0].pathname, '/v1/ai-sdk/ws');
    assert.equal(seen.urls[0].searchParams.get('protocol'), '1');
    assert.equal(seen.urls[0].searchParams.get('access_token'), null);
    const sends = seen.frames.filter((f) => f.type === 'send');
    assert.deepEqual(sends.map((f) => f.messages.length), [1, 1]);
    assert.ok(sends.every((f) => f.body.agent === 'demo'), JSON.stringify(sends[0]));
  } finally {
    transport.close();
  }
});

/** An HS256 token for `sub`, as an identity provider would sign it. */
function token(secret, sub) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub, exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return `${unsigned}.${createHmac('sha256', secret).update(unsigned).digest('base64url')}`;
}

test('with sign-in on, the token goes with every request: the send, the resume and the socket', async () => {
  const secret = 'a-test-secret-of-32-bytes-length';
  const port = await freePort();
  const signed = await startServer(tempDir(), port, ['--auth', 'jwt', '--jwt-secret', secret]);
  try {
    const url = `http://127.0.0.1:${port}`;
    const ada = token(secret, 'ada');

    // Without the token: refused, nothing streamed.
    const refused = new Chat({ id: crypto.randomUUID(), transport: new DefaultChatTransport(agentwireTransport({ baseUrl: url })) });
    await refused.sendMessage({ text: 'hello' }).catch(() => {});
    assert.equal(refused.status, 'error');
    assert.match(String(refused.error), /401|UNAUTHORIZED|AUTH/i);

    const id = crypto.randomUUID();
    const chat = new Chat({ id, transport: new DefaultChatTransport(agentwireTransport({ baseUrl: url, token: ada })) });
    await chat.sendMessage({ text: 'hello' });
    assert.equal(chat.status, 'ready', String(chat.error));
    assert.equal(textOf(chat.lastMessage), 'You said: hello');
    // The resume carries it too (204: the run is over, nothing to replay).
    const again = new Chat({ id, messages: chat.messages, transport: new DefaultChatTransport(agentwireTransport({ baseUrl: url, token: ada })) });
    await again.resumeStream();
    assert.equal(again.status, 'ready', String(again.error));
    // The chat is Ada's: listed under her name.
    const mine = await fetch(`${url}/v1/chats`, { headers: { authorization: `Bearer ${ada}` } }).then((r) => r.json());
    assert.ok(JSON.stringify(mine).includes(id), 'the chat is listed for its owner');

    const { seen, Recording } = recordingSocket();
    const transport = new WebSocketChatTransport({ ...agentwireWebSocketTransport({ baseUrl: url, token: ada }), webSocket: Recording });
    try {
      const overWs = new Chat({ id: crypto.randomUUID(), transport });
      await overWs.sendMessage({ text: 'hello' });
      assert.equal(overWs.status, 'ready', String(overWs.error));
      assert.equal(textOf(overWs.lastMessage), 'You said: hello');
      assert.equal(seen.urls[0].searchParams.get('access_token'), ada);
    } finally {
      transport.close();
    }
  } finally {
    signed.kill('SIGKILL');
  }
});
