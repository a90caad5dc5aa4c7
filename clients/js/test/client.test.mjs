// The client against the real server: every seq reaches the app exactly once,
// in order, across a dropped socket, a server restart and a dropped frame.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { AgentwireClient } from '../agentwire.js';
import { freePort, startProxy, startServer, tempDir, until } from './support/helpers.mjs';

const cleanups = [];
after(() => cleanups.forEach((f) => f()));

async function setup() {
  const dir = tempDir();
  const port = await freePort();
  let server = await startServer(dir, port);
  const proxy = await startProxy(port);
  cleanups.push(() => {
    proxy.close();
    server.kill('SIGKILL');
  });
  const client = new AgentwireClient(`ws://127.0.0.1:${proxy.port}/v1/ws`, { storage: null, initialBackoffMs: 50 });
  cleanups.push(() => client.close());
  const states = [];
  client.on('state', (s, d) => states.push([s, d]));
  return {
    dir,
    port,
    proxy,
    client,
    states,
    get server() {
      return server;
    },
    async restart() {
      server.kill('SIGKILL');
      await new Promise((r) => server.once('exit', r));
      server = await startServer(dir, port);
    },
  };
}

/** Collects what the app is given for one chat. */
function record(chat) {
  const got = [];
  chat.on('envelope', (m) => got.push(m));
  return got;
}

function assertExactlyOnce(got) {
  const seqs = got.map((m) => m.seq);
  assert.deepEqual(seqs, seqs.map((_, i) => i + 1), 'every seq once, in order');
}

const words = (n) => Array.from({ length: n }, (_, i) => `w${i + 1}`).join(' ');

test('a dropped socket: the client reconnects, resumes and misses nothing', async () => {
  const t = await setup();
  const chat = t.client.startChat({ agent: 'demo', message: 'slow: 80' });
  const got = record(chat);
  await until(() => got.filter((m) => m.type === 'chat.print').length >= 15);
  t.proxy.cutAll();
  await until(() => got.some((m) => m.type === 'chat.run_complete'));
  assertExactlyOnce(got);
  assert.equal(got.filter((m) => m.type === 'chat.print').length, 80);
  assert.equal(got.findLast((m) => m.type === 'chat.text').content, words(80));
  const kinds = t.states.map(([s]) => s);
  assert.ok(kinds.includes('reconnecting'), kinds.join());
  assert.ok(kinds.includes('resumed'), kinds.join());
});

test('a server restart mid-stream: the run goes on, nothing doubled', async () => {
  const t = await setup();
  const chat = t.client.startChat({ agent: 'demo', message: 'slow: 100' });
  const got = record(chat);
  await until(() => got.filter((m) => m.type === 'chat.print').length >= 20);
  await t.restart();
  await until(() => got.some((m) => m.type === 'chat.run_complete'));
  assertExactlyOnce(got);
  // The cut turn is dropped and asked again: the answer is whole, once.
  assert.equal(got.filter((m) => m.type === 'chat.turn_discarded').length, 1);
  assert.equal(got.findLast((m) => m.type === 'chat.text').content, words(100));
  assert.equal(got.findLast((m) => m.type === 'chat.run_complete').reason, 'completed');
  // The chat carries on.
  chat.sendMessage('after');
  await until(() => got.filter((m) => m.type === 'chat.run_complete').length === 2);
  assertExactlyOnce(got);
  assert.equal(got.findLast((m) => m.type === 'chat.text').content, 'You said: after');
});

test('a dropped frame: the gap is detected and filled', async () => {
  const t = await setup();
  const chat = t.client.startChat({ agent: 'demo', message: 'slow: 40' });
  const got = record(chat);
  await until(() => got.length >= 5);
  t.proxy.dropFrame(3);
  await until(() => got.some((m) => m.type === 'chat.run_complete'));
  assertExactlyOnce(got);
  assert.equal(got.findLast((m) => m.type === 'chat.text').content, words(40));
  assert.ok(got.some((m) => m.replay), 'the gap came back as a replay');
});

test('input requests and components survive a reconnect', async () => {
  const t = await setup();
  const chat = t.client.startChat({ agent: 'demo', message: 'ask: Name?' });
  const got = record(chat);
  await until(() => got.some((m) => m.type === 'chat.input_request'));
  const req = got.find((m) => m.type === 'chat.input_request');
  // Answer while the connection is down: it is sent once it is back.
  t.proxy.cutAll();
  chat.submitInput(req.request_id, 'Ada');
  await until(() => got.some((m) => m.type === 'chat.run_complete'));
  assertExactlyOnce(got);
  assert.equal(got.filter((m) => m.type === 'chat.input_ack').length, 1);
  assert.equal(got.findLast((m) => m.type === 'chat.text').content, 'You answered: Ada');

  chat.sendMessage('ui: color_picker');
  await until(() => got.some((m) => m.type === 'chat.tool_call'));
  const call = got.find((m) => m.type === 'chat.tool_call');
  chat.sendComponentResult(call.corr, { color: 'teal' });
  await until(() => got.filter((m) => m.type === 'chat.run_complete').length === 2);
  assert.equal(got.findLast((m) => m.type === 'chat.text').content, 'Component returned: {"color":"teal"}');
  assertExactlyOnce(got);
});

test('a second client opens the chat and gets it all', async () => {
  const t = await setup();
  const chat = t.client.startChat({ agent: 'demo', message: 'hello' });
  const got = record(chat);
  await until(() => got.some((m) => m.type === 'chat.run_complete'));
  const other = new AgentwireClient(`ws://127.0.0.1:${t.port}/v1/ws`, { storage: null });
  cleanups.push(() => other.close());
  const again = record(other.openChat(chat.id));
  await until(() => again.length === got.length);
  assert.deepEqual(again.map((m) => m.seq), got.map((m) => m.seq));
  assert.ok(again.every((m) => m.replay));
});

test('files: uploaded before the chat starts, attached to its messages, fetched back', async () => {
  const port = await freePort();
  const server = await startServer(tempDir(), port);
  const client = new AgentwireClient(`ws://127.0.0.1:${port}/v1/ws`, { storage: null });
  cleanups.push(() => { client.close(); server.kill('SIGKILL'); });
  const bytes = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 1, 2, 3]);
  const chatId = crypto.randomUUID();
  const image = await client.upload(chatId, new Blob([bytes], { type: 'image/png' }), { name: 'cat.png' });
  assert.equal(image.media_type, 'image/png');
  assert.equal(image.size, bytes.length);
  const chat = client.startChat({ agent: 'demo', chatId, message: 'look', attachments: [image] });
  const answers = () => chat.log.filter((m) => m.type === 'chat.text' && m.agent !== 'user').map((m) => m.content);
  await until(() => answers().length === 1);
  assert.equal(answers()[0], `You said: look\nYou attached: cat.png (image/png, ${bytes.length} bytes)`);
  const said = chat.log.find((m) => m.type === 'chat.text' && m.agent === 'user');
  assert.deepEqual(said.attachments, [{ file_id: image.id, name: 'cat.png', media_type: 'image/png', size: bytes.length }]);

  // A message of a file alone, uploaded through the chat.
  const notes = await chat.upload(new Blob(['tide at 6:40'], { type: 'text/plain' }), { name: 'notes.txt' });
  chat.sendMessage('', { attachments: [notes.id] });
  await until(() => answers().length === 2);
  assert.match(answers()[1], /notes\.txt \(text\/plain, 12 characters\)$/);

  // Back as bytes; a kind the server refuses says why.
  assert.deepEqual(new Uint8Array(await (await client.fetchFile(image.id)).arrayBuffer()), bytes);
  await assert.rejects(
    chat.upload(new Blob(['<html><script>alert(1)</script>'], { type: 'text/html' }), { name: 'x.html' }),
    (e) => e.status === 400 && /not accepted/.test(e.message),
  );
});

test('the HTTP base and token for files come from the WebSocket URL, path prefix kept', () => {
  class Idle { close() {} send() {} }
  const at = (url, options = {}) => {
    const c = new AgentwireClient(url, { storage: null, WebSocket: Idle, ...options });
    c.close();
    return [c.httpUrl, c.token];
  };
  assert.deepEqual(at('wss://chat.example/agentwire/v1/ws?access_token=t0k'), ['https://chat.example/agentwire', 't0k']);
  assert.deepEqual(at('ws://127.0.0.1:8080/v1/ws', { token: 'x' }), ['http://127.0.0.1:8080', 'x']);
  assert.deepEqual(at('ws://h/v1/ws', { httpUrl: 'http://api.example/' }), ['http://api.example', undefined]);
});

test('the feed: chats made elsewhere, unread counts, a mark read, again after a reconnect', async () => {
  const t = await setup();
  // Through the proxy (which cuts sockets), files and lists straight to the server.
  const client = new AgentwireClient(`ws://127.0.0.1:${t.proxy.port}/v1/ws`, {
    storage: null,
    initialBackoffMs: 50,
    httpUrl: `http://127.0.0.1:${t.port}`,
  });
  cleanups.push(() => client.close());
  t.client.close();
  const feed = [];
  client.on('feed', (e) => feed.push(e));
  client.subscribeFeed();
  await until(() => feed.some((e) => e.type === 'feed.subscribed'));
  // Another device of the same user starts a chat this client does not follow.
  const other = new AgentwireClient(`ws://127.0.0.1:${t.port}/v1/ws`, { storage: null });
  cleanups.push(() => other.close());
  const chat = other.startChat({ agent: 'demo', message: 'hello' });
  const done = record(chat);
  await until(() => done.some((m) => m.type === 'chat.run_complete'));
  const about = () => feed.filter((e) => e.type === 'feed.chat' && e.chat_id === chat.id);
  await until(() => about().some((e) => e.reason === 'updated' && e.unread === 1));
  assert.equal(about()[0].reason, 'created');
  assert.ok(!client.chats.has(chat.id), 'the feed follows no chat');
  let list = await client.listChats();
  assert.equal(list.chats.find((c) => c.id === chat.id).unread, 1);

  // Read here: every feed is told, the list agrees.
  client.markRead(chat.id);
  await until(() => about().some((e) => e.reason === 'read' && e.unread === 0));
  list = await client.listChats({ limit: 5 });
  assert.equal(list.chats.find((c) => c.id === chat.id).unread, 0);

  // The socket drops: subscribed again on the new one, events flow again.
  const subscribed = feed.filter((e) => e.type === 'feed.subscribed').length;
  t.proxy.cutAll();
  await until(() => feed.filter((e) => e.type === 'feed.subscribed').length > subscribed);
  const before = about().length;
  other.sendMessage(chat.id, 'again');
  await until(() => about().slice(before).some((e) => e.reason === 'updated' && e.unread === 1));
  // A chat followed here reads to its own end.
  const mine = client.openChat(chat.id);
  const seen = record(mine);
  await until(() => seen.filter((m) => m.type === 'chat.run_complete').length === 2);
  mine.markRead();
  await until(() => about().some((e, i) => i >= before && e.reason === 'read' && e.read_seq === mine.lastSeq));
});

test('a server of another protocol version: a clear error at connect, not endless retries', async () => {
  const http = await import('node:http');
  // A stand-in for a server that speaks version 2 and refuses version 1.
  const other = http.createServer((req, res) => {
    res.setHeader('agentwire-protocol', '2');
    res.writeHead(req.url.startsWith('/healthz') ? 200 : 400, { 'content-type': 'application/json' });
    res.end(req.url.startsWith('/healthz') ? '{"status":"ok"}' : '{"error":{"code":"SCHEMA_VALIDATION_FAILED","message":"this server speaks agentwire protocol 2"}}');
  });
  other.on('upgrade', (req, socket) => {
    socket.end('HTTP/1.1 400 Bad Request\r\nagentwire-protocol: 2\r\ncontent-length: 0\r\n\r\n');
  });
  await new Promise((r) => other.listen(0, '127.0.0.1', r));
  cleanups.push(() => other.close());
  const client = new AgentwireClient(`ws://127.0.0.1:${other.address().port}/v1/ws`, { storage: null, initialBackoffMs: 50 });
  cleanups.push(() => client.close());
  const errors = [];
  client.on('error', (e) => errors.push(e));
  await until(() => errors.length > 0);
  assert.equal(errors[0].error_code, 'PROTOCOL_MISMATCH');
  assert.match(errors[0].message, /protocol 2; this client speaks 1/);
  await until(() => client.state === 'closed');

  // The real server: the client says version 1 on the URL, and is taken.
  const { client: ok } = await setup();
  assert.match(ok.url, /[?&]protocol=1(&|$)/);
  const chat = ok.startChat({ agent: 'demo', message: 'hello' });
  await until(() => chat.log.some((m) => m.type === 'chat.run_complete'));
});
