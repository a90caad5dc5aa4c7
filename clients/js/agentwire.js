// @ts-check
/**
 * agentwire client: one WebSocket, any number of chats, and the guarantee the
 * server's log makes — every envelope delivered to the app exactly once, in
 * `seq` order — kept across dropped connections and server restarts.
 *
 * No dependencies. Works in browsers and in Node 20+ (`--experimental-websocket`
 * on Node 20; built in from Node 22).
 *
 * How it keeps the guarantee:
 * - it remembers the last `seq` of every chat (in `localStorage` when there is one);
 * - an envelope at or below it is a duplicate and is dropped;
 * - an envelope past the next one reveals a gap: it is dropped and the chat is
 *   resumed from the last seq held (`client.resume`), which replays the gap;
 * - after a reconnect every open chat is resumed the same way;
 * - messages the server has not answered yet are sent again after a resume
 *   (the server ignores a repeated `client_msg_id`, and an input request can be
 *   answered only once).
 *
 * @module @agentwire/client
 */

/** @typedef {'connecting' | 'open' | 'reconnecting' | 'resumed' | 'closed'} ConnectionState */

/**
 * @typedef {object} Envelope
 * @property {string} type
 * @property {string} chat_id
 * @property {number} seq
 * @property {string} ts
 * @property {boolean} [replay]
 */

/**
 * @typedef {object} ClientOptions
 * @property {string} [token] Bearer token (sent as `access_token`, as browsers cannot set headers).
 * @property {Storage | null} [storage] Where the last seq per chat is kept [default: `localStorage` when present].
 * @property {typeof WebSocket} [WebSocket] The WebSocket constructor [default: the global one].
 * @property {number} [initialBackoffMs] First reconnect delay [default: 250].
 * @property {number} [maxBackoffMs] Longest reconnect delay [default: 10000].
 * @property {number} [maxQueued] Most messages queued while disconnected [default: 1000].
 * @property {string} [httpUrl] The server's HTTP base, for files [default: the WebSocket URL's origin].
 * @property {typeof fetch} [fetch] The fetch function for files [default: the global one].
 */

const STORAGE_PREFIX = 'agentwire:seq:';

/**
 * The wire protocol version this client speaks (protocol/README.md,
 * *Versions*): sent as `protocol` on the WebSocket URL; a server of another
 * version refuses the connection, and the client, reading the version the
 * server names (`Agentwire-Protocol` on `/healthz`), stops with an `error`
 * whose `error_code` is `PROTOCOL_MISMATCH` instead of retrying for ever.
 */
export const PROTOCOL = 1;

/**
 * A JSON answer's body, or an error with the server's message, `code` and
 * `status`.
 * @param {Response} r @param {string} what
 */
async function answered(r, what) {
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = /** @type {Error & {code?: string, status?: number}} */ (
      new Error(body.error?.message ?? `${what} failed: HTTP ${r.status}`)
    );
    e.code = body.error?.code;
    e.status = r.status;
    throw e;
  }
  return body;
}

/** A random UUID (v4), without depending on `crypto.randomUUID` being present. */
export function uuid() {
  const c = globalThis.crypto;
  if (c && typeof c.randomUUID === 'function') return c.randomUUID();
  const b = new Uint8Array(16);
  if (c && c.getRandomValues) c.getRandomValues(b);
  else for (let i = 0; i < 16; i++) b[i] = Math.floor(Math.random() * 256);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A tiny event emitter. */
class Emitter {
  constructor() {
    /** @type {Map<string, Set<Function>>} */
    this.handlers = new Map();
  }
  /**
   * @param {string} type
   * @param {Function} fn
   * @returns {() => void} unsubscribe
   */
  on(type, fn) {
    if (!this.handlers.has(type)) this.handlers.set(type, new Set());
    this.handlers.get(type)?.add(fn);
    return () => this.handlers.get(type)?.delete(fn);
  }
  /** @param {string} type @param {...any} args */
  emit(type, ...args) {
    for (const key of [type, '*']) {
      for (const fn of this.handlers.get(key) ?? []) {
        try {
          fn(...args);
        } catch (e) {
          console.error('agentwire handler failed', e);
        }
      }
    }
  }
}

/**
 * One chat: its envelopes, in order, exactly once.
 *
 * Events: each envelope by its `type` (`chat.print`, …) and as `*`;
 * `error` for per-connection errors about this chat (`chat.error` without seq);
 * `resumed` `{replayed, recovered}` after a replay; `reset` when the server's
 * log is behind what the client held (it then replays from seq 1).
 */
export class Chat extends Emitter {
  /** @param {AgentwireClient} client @param {string} id */
  constructor(client, id) {
    super();
    this.client = client;
    this.id = id;
    /** The seq of the last envelope delivered. */
    this.lastSeq = client.loadSeq(id);
    /** Whether a replay is under way (live envelopes past a gap wait for it). */
    this.resuming = false;
    /** Envelopes delivered by the replay under way. */
    this.replayed = 0;
    /** @type {Map<string, object>} messages sent and not yet answered, by key */
    this.unacked = new Map();
    /** @type {Envelope[]} every envelope delivered, in order (for late subscribers such as UI hooks) */
    this.log = [];
  }

  /**
   * A new user turn. Sent again after a reconnect until the server logs it.
   * `multitaskStrategy` says what it does if a run is in flight (`reject`,
   * `enqueue`, `interrupt`, `steer`; absent: the agent's choice).
   */
  sendMessage(/** @type {string} */ text, /** @type {{multitaskStrategy?: string, attachments?: (string | {file_id: string, id?: string})[]}} */ options = {}) {
    const client_msg_id = uuid();
    const msg = { type: 'user.message', chat_id: this.id, text, client_msg_id };
    if (options.multitaskStrategy) msg.multitask_strategy = options.multitaskStrategy;
    // Files uploaded to this chat first (`upload`), by id or as uploaded.
    if (options.attachments?.length) {
      msg.attachments = options.attachments.map((a) => ({ file_id: typeof a === 'string' ? a : (a.file_id ?? a.id) }));
    }
    this.unacked.set(`msg:${client_msg_id}`, { msg, text });
    this.client.send(msg);
    return client_msg_id;
  }

  /**
   * Uploads a file to this chat (before `sendMessage` attaches it, or
   * before `startChat` sends its first message): a `Blob` or `File`, its
   * name from `options.name` or the file's own. Resolves to the stored
   * file (`id`, `name`, `media_type` sniffed by the server, `size`,
   * `sha256`); rejects with the server's error code and message.
   */
  upload(/** @type {Blob} */ file, /** @type {{name?: string}} */ options = {}) {
    return this.client.upload(this.id, file, options);
  }

  /** Answers a `chat.input_request`. */
  submitInput(/** @type {string} */ requestId, /** @type {string} */ text) {
    const msg = { type: 'user.input.submit', chat_id: this.id, request_id: requestId, text, last_client_seq: this.lastSeq };
    this.unacked.set(`input:${requestId}`, { msg });
    this.client.send(msg);
  }

  /** Answers a UI tool call (`awaiting_response: true`). */
  sendComponentResult(/** @type {string} */ corr, /** @type {unknown} */ data) {
    const msg = { type: 'inline_component.result', chat_id: this.id, corr, data };
    this.unacked.set(`ui:${corr}`, { msg });
    this.client.send(msg);
  }

  /** Applies an RFC 6902 patch to the component of tool call `corr`. */
  patchArtifact(/** @type {string} */ corr, /** @type {object[]} */ patch) {
    this.client.send({ type: 'artifact_patch', chat_id: this.id, corr, patch });
  }

  /**
   * Goes on from `text` in place of the user's message `seq` (`chat.edit`):
   * a new version; the old one stays.
   */
  edit(/** @type {number} */ seq, /** @type {string} */ text) {
    // Not sent again after a reconnect: an edit refused then (a run in
    // flight) must not take effect later. Its client_msg_id makes a resend
    // by the caller safe.
    const client_msg_id = uuid();
    this.client.send({ type: 'chat.edit', chat_id: this.id, seq, text, client_msg_id });
    return client_msg_id;
  }

  /** Answers the user's message `seq` again (the last one if absent), with `model` if given (`chat.regenerate`). */
  regenerate(/** @type {number=} */ seq, /** @type {string=} */ model) {
    this.client.send({ type: 'chat.regenerate', chat_id: this.id, ...(seq ? { seq } : {}), ...(model ? { model } : {}) });
  }

  /** Makes the version holding envelope `to` the active one (`chat.switch`). */
  switchTo(/** @type {number} */ to) {
    this.client.send({ type: 'chat.switch', chat_id: this.id, to });
  }

  /** Marks this chat read up to `seq` [default: the last envelope delivered]. @param {number} [seq] */
  markRead(seq) {
    this.client.markRead(this.id, seq ?? (this.lastSeq || undefined));
  }

  /** Ends the active run. */
  cancel() {
    this.client.send({ type: 'chat.cancel', chat_id: this.id });
  }

  /** Asks the server for everything after the last seq held. */
  resume() {
    this.resuming = true;
    this.replayed = 0;
    this.client.send({ type: 'client.resume', chat_id: this.id, lastClientIndex: this.lastSeq });
  }

  /**
   * Handles one message of this chat from the server.
   * @param {any} m
   */
  receive(m) {
    if (m.type === 'chat.resume_boundary') {
      this.resuming = false;
      if (m.recovered === false) {
        // The server's log is behind ours (a restored backup): start over.
        this.lastSeq = 0;
        this.log = [];
        this.client.saveSeq(this.id, 0);
        this.emit('reset', m);
        this.resume();
        return;
      }
      this.emit('resumed', { replayed: this.replayed, recovered: true, lastSeq: m.last_seq });
      this.client.chatResumed(this);
      // What the replay did not answer is sent again.
      for (const { msg } of this.unacked.values()) this.client.send(msg);
      return;
    }
    if (typeof m.seq !== 'number') {
      // A per-connection error about this chat (not part of the log).
      if (m.type === 'chat.error') {
        if (m.error_code === 'RESUME_FAILED' && this.resuming) {
          this.resuming = false;
          this.client.chatResumed(this);
        }
        // A resent answer the server already had: nothing to tell the app.
        if (m.error_code === 'INPUT_REQUEST_NOT_FOUND' && this.dropResent(m)) return;
        this.emit('error', m);
      }
      return;
    }
    if (m.seq <= this.lastSeq) return; // a duplicate
    if (m.seq > this.lastSeq + 1) {
      // A gap: drop this one and fill the gap by replay (unless one is under way).
      if (!this.resuming) this.resume();
      return;
    }
    this.lastSeq = m.seq;
    this.client.saveSeq(this.id, m.seq);
    if (m.replay) this.replayed += 1;
    this.log.push(m);
    this.ack(m);
    this.emit(m.type, m);
    this.emit('envelope', m);
  }

  /** Forgets the unanswered messages this envelope answers. @param {any} m */
  ack(m) {
    if ((m.type === 'chat.text' || m.type === 'chat.queued') && m.agent === 'user') {
      for (const [key, entry] of this.unacked) {
        if (key.startsWith('msg:') && entry.text === m.content) {
          this.unacked.delete(key);
          break;
        }
      }
    } else if (m.type === 'chat.input_ack') {
      this.unacked.delete(`input:${m.request_id}`);
    } else if (m.type === 'chat.tool_response') {
      this.unacked.delete(`ui:${m.corr}`);
    }
  }

  /** @param {any} m */
  dropResent(m) {
    // The error names no request: drop one unanswered answer of this chat.
    for (const key of this.unacked.keys()) {
      if (key.startsWith('input:') || key.startsWith('ui:')) {
        this.unacked.delete(key);
        return true;
      }
    }
    return false;
  }
}

/**
 * The connection. Events: `state` (ConnectionState, detail), `error`
 * (connection-level errors), `message` (every raw message).
 */
export class AgentwireClient extends Emitter {
  /**
   * @param {string} url e.g. `ws://127.0.0.1:8080/v1/ws`
   * @param {ClientOptions} [options]
   */
  constructor(url, options = {}) {
    super();
    const withToken = options.token ? `${url}${url.includes('?') ? '&' : '?'}access_token=${encodeURIComponent(options.token)}` : url;
    this.url = `${withToken}${withToken.includes('?') ? '&' : '?'}protocol=${PROTOCOL}`;
    // The token for files: the option, or the URL's `access_token`.
    let wsUrl = null;
    try {
      wsUrl = new URL(url, globalThis.location?.href);
    } catch {
      // Not a URL this can read: files need `httpUrl`.
    }
    this.token = options.token ?? wsUrl?.searchParams.get('access_token') ?? undefined;
    // The HTTP base: the WebSocket URL's, its scheme http(s), its path
    // without `/v1/ws` (a server behind a path prefix keeps it).
    const base = wsUrl ? `${wsUrl.protocol.replace(/^ws/, 'http')}//${wsUrl.host}${wsUrl.pathname.replace(/\/v1\/ws\/?$/, '')}` : '';
    this.httpUrl = (options.httpUrl ?? base).replace(/\/$/, '');
    this.fetch = options.fetch ?? globalThis.fetch?.bind(globalThis);
    /** @type {Storage | null} */
    this.storage = options.storage !== undefined ? options.storage : (globalThis.localStorage ?? null);
    this.WS = options.WebSocket ?? globalThis.WebSocket;
    if (!this.WS) throw new Error('no WebSocket available: pass options.WebSocket');
    this.initialBackoff = options.initialBackoffMs ?? 250;
    this.maxBackoff = options.maxBackoffMs ?? 10000;
    this.maxQueued = options.maxQueued ?? 1000;
    /** @type {ConnectionState} */
    this.state = 'connecting';
    /** @type {Map<string, Chat>} */
    this.chats = new Map();
    /** @type {object[]} messages waiting for the connection */
    this.queue = [];
    this.attempt = 0;
    this.closed = false;
    /** Chats still replaying after a reconnect, and what they replayed. */
    this.pendingResumes = new Set();
    this.resumedCount = 0;
    /** @type {WebSocket | null} */
    this.ws = null;
    /** Whether the app follows the user's feed (subscribed again on every connect). */
    this.feed = false;
    this.connect();
  }

  /** @param {ConnectionState} state @param {object} [detail] */
  setState(state, detail = {}) {
    this.state = state;
    this.emit('state', state, detail);
  }

  connect() {
    const ws = new this.WS(this.url);
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.attempt = 0;
      this.setState('open');
      const queued = this.queue.splice(0);
      const send = (/** @type {any} */ m) => ws.send(JSON.stringify(m));
      // Chats being created go first; every other chat this client follows is
      // resumed from its last seq; then the rest of what waited.
      // The feed first: what changes from now on is announced; the app
      // reads the list once the feed says it is subscribed.
      if (this.feed) send({ type: 'feed.subscribe' });
      const starting = new Set(queued.filter((m) => m.type === 'chat.start').map((m) => m.chat_id));
      queued.filter((m) => m.type === 'chat.start').forEach(send);
      const resuming = [...this.chats.values()].filter((c) => !starting.has(c.id));
      this.pendingResumes = new Set(resuming.map((c) => c.id));
      this.resumedCount = 0;
      for (const chat of resuming) chat.resume();
      queued.filter((m) => m.type !== 'chat.start' && m.type !== 'client.resume').forEach(send);
    };
    ws.onmessage = (ev) => {
      let m;
      try {
        m = JSON.parse(typeof ev.data === 'string' ? ev.data : String(ev.data));
      } catch {
        return;
      }
      this.emit('message', m);
      if (typeof m.type === 'string' && m.type.startsWith('feed.')) {
        this.receiveFeed(m);
        return;
      }
      const chat = m.chat_id ? this.chats.get(m.chat_id) : undefined;
      if (chat) chat.receive(m);
      else if (m.type === 'chat.error') this.emit('error', m);
    };
    const lost = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.closed) {
        this.setState('closed');
        return;
      }
      // Refused before it opened: a server of another protocol version?
      if (!opened && this.attempt === 0) this.checkProtocol();
      this.attempt += 1;
      const base = Math.min(this.maxBackoff, this.initialBackoff * 2 ** (this.attempt - 1));
      const delay = base / 2 + Math.random() * (base / 2);
      this.setState('reconnecting', { attempt: this.attempt, delayMs: Math.round(delay) });
      setTimeout(() => {
        if (!this.closed) this.connect();
      }, delay);
    };
    ws.onclose = lost;
    // A refused upgrade: browsers close after the error; Node 20's
    // WebSocket only errs (and would never reconnect).
    ws.onerror = () => {
      if (!opened) lost();
    };
  }

  /** Stops with a `PROTOCOL_MISMATCH` error when the server names a protocol
   * version other than this client's (a browser cannot read the refused
   * upgrade's answer; `/healthz` says it too). */
  async checkProtocol() {
    if (!this.fetch || !this.httpUrl) return;
    let spoken;
    try {
      spoken = (await this.fetch(`${this.httpUrl}/healthz`)).headers.get('agentwire-protocol');
    } catch {
      return; // not reachable: the reconnects go on
    }
    if (spoken && spoken.trim() !== String(PROTOCOL) && !this.closed) {
      this.closed = true;
      this.ws?.close();
      this.emit('error', {
        type: 'chat.error',
        error_code: 'PROTOCOL_MISMATCH',
        message: `the server speaks agentwire protocol ${spoken.trim().slice(0, 32)}; this client speaks ${PROTOCOL}`,
        recoverable: false,
      });
      this.setState('closed');
    }
  }

  /** A chat finished its replay after a reconnect. @param {Chat} chat */
  chatResumed(chat) {
    if (!this.pendingResumes.delete(chat.id)) return;
    this.resumedCount += chat.replayed;
    if (this.pendingResumes.size === 0) this.setState('resumed', { replayed: this.resumedCount });
  }

  /** Sends now, or when the connection is back. @param {object} m */
  send(m) {
    if (this.ws && this.ws.readyState === 1) {
      this.ws.send(JSON.stringify(m));
    } else if (this.queue.length < this.maxQueued) {
      this.queue.push(m);
    } else {
      throw new Error('agentwire: too many messages queued while disconnected');
    }
  }

  /** @param {string} chatId */
  loadSeq(chatId) {
    const v = this.storage?.getItem(STORAGE_PREFIX + chatId);
    return v ? Number(v) || 0 : 0;
  }

  /** @param {string} chatId @param {number} seq */
  saveSeq(chatId, seq) {
    this.storage?.setItem(STORAGE_PREFIX + chatId, String(seq));
  }

  /**
   * Starts a chat (and its first turn, if `message` is given).
   * @param {{agent: string, chatId?: string, message?: string, context?: object}} opts
   * @returns {Chat}
   */
  startChat({ agent, chatId = uuid(), message, context, attachments }) {
    const chat = this.track(chatId);
    /** @type {any} */
    const msg = { type: 'chat.start', chat_id: chatId, agent };
    if (message !== undefined) msg.message = message;
    if (context !== undefined) msg.context = context;
    // Files uploaded to `chatId` before it starts (`upload(chatId, …)`).
    if (attachments?.length) {
      msg.attachments = attachments.map((a) => ({ file_id: typeof a === 'string' ? a : (a.file_id ?? a.id) }));
    }
    this.send(msg);
    return chat;
  }

  /**
   * Opens an existing chat: replays what this client has not seen (or, with
   * `fromStart`, everything), then follows it.
   * @param {string} chatId
   * @param {{fromStart?: boolean}} [options]
   * @returns {Chat}
   */
  openChat(chatId, { fromStart = false } = {}) {
    const known = this.chats.get(chatId);
    if (known) return known;
    const chat = this.track(chatId);
    if (fromStart) chat.lastSeq = 0;
    chat.resume();
    return chat;
  }

  /** @param {string} chatId */
  track(chatId) {
    let chat = this.chats.get(chatId);
    if (!chat) {
      chat = new Chat(this, chatId);
      this.chats.set(chatId, chat);
    }
    return chat;
  }

  /** Stops following a chat. @param {string} chatId */
  closeChat(chatId) {
    if (this.chats.delete(chatId)) this.send({ type: 'client.unsubscribe', chat_id: chatId });
  }

  /** @param {string} chatId @param {string} text @param {object} [options] */
  sendMessage(chatId, text, options) {
    return this.track(chatId).sendMessage(text, options);
  }

  /** The headers of a file request: the token, when there is one. */
  authHeaders() {
    return this.token ? { authorization: `Bearer ${this.token}` } : {};
  }

  /**
   * Uploads `file` to chat `chatId` (which may not be started yet).
   * @param {string} chatId @param {Blob} file @param {{name?: string}} [options]
   */
  async upload(chatId, file, options = {}) {
    const name = options.name ?? file.name ?? 'file';
    const url = `${this.httpUrl}/v1/chats/${encodeURIComponent(chatId)}/files?name=${encodeURIComponent(name)}`;
    const headers = { ...this.authHeaders(), 'content-type': file.type || 'application/octet-stream' };
    const r = await this.fetch(url, { method: 'POST', headers, body: file });
    return answered(r, 'upload');
  }

  /** Where file `fileId` is served (it needs the token: see `fetchFile`). @param {string} fileId */
  fileUrl(fileId) {
    return `${this.httpUrl}/v1/files/${encodeURIComponent(fileId)}`;
  }

  /** A file's bytes, as a `Blob` (with the token, which an `<img>` cannot send). @param {string} fileId */
  async fetchFile(fileId) {
    const r = await this.fetch(this.fileUrl(fileId), { headers: this.authHeaders() });
    if (!r.ok) throw new Error(`file ${fileId}: HTTP ${r.status}`);
    return r.blob();
  }
  /** @param {string} chatId @param {string} requestId @param {string} text */
  submitInput(chatId, requestId, text) {
    this.track(chatId).submitInput(requestId, text);
  }
  /** @param {string} chatId @param {string} corr @param {unknown} data */
  sendComponentResult(chatId, corr, data) {
    this.track(chatId).sendComponentResult(corr, data);
  }
  /** @param {string} chatId @param {string} corr @param {object[]} patch */
  patchArtifact(chatId, corr, patch) {
    this.track(chatId).patchArtifact(corr, patch);
  }
  /** @param {string} chatId */
  cancel(chatId) {
    this.track(chatId).cancel();
  }

  /**
   * Follows the user's feed: `feed` events (`feed.chat`: a chat of theirs
   * made, updated or read, whether this client follows it or not). The
   * feed is not a log: on each `feed.subscribed` (the first, and after
   * every reconnect or `feed.lagged`, when this client subscribes again)
   * read the list (`listChats`) and apply the events that follow.
   */
  subscribeFeed() {
    if (this.feed) return;
    this.feed = true;
    if (this.ws && this.ws.readyState === 1) this.ws.send(JSON.stringify({ type: 'feed.subscribe' }));
  }

  /** Stops following the feed (on the next connection). */
  unsubscribeFeed() {
    this.feed = false;
  }

  /** @param {any} m */
  receiveFeed(m) {
    if (!this.feed) return;
    this.emit('feed', m);
    // The server ended this feed: subscribe again (on this connection; a
    // new one subscribes as it opens), then the app reads the list.
    if (m.type === 'feed.lagged' && this.ws && this.ws.readyState === 1) {
      this.ws.send(JSON.stringify({ type: 'feed.subscribe' }));
    }
  }

  /**
   * Marks chat `chatId` read up to `seq` (default: its end), on every device
   * of the user's (a mark only moves forward).
   * @param {string} chatId @param {number} [seq]
   */
  markRead(chatId, seq) {
    /** @type {any} */
    const msg = { type: 'chat.read', chat_id: chatId };
    if (seq !== undefined) msg.seq = seq;
    this.send(msg);
  }

  /**
   * The user's chats, latest activity first, with `unread`, `read_seq` and
   * `last_seq` (`GET /v1/chats`).
   * @param {{limit?: number, cursor?: string, archived?: boolean}} [options]
   */
  async listChats(options = {}) {
    const q = new URLSearchParams();
    if (options.limit !== undefined) q.set('limit', String(options.limit));
    if (options.cursor !== undefined) q.set('cursor', options.cursor);
    if (options.archived !== undefined) q.set('archived', String(options.archived));
    const query = q.toString();
    const r = await this.fetch(`${this.httpUrl}/v1/chats${query ? `?${query}` : ''}`, { headers: this.authHeaders() });
    return answered(r, 'list');
  }

  /** Closes the connection for good. */
  close() {
    this.closed = true;
    if (this.ws) this.ws.close();
    else this.setState('closed');
  }
}
