// @ts-check
/**
 * The pure part of `useChat`: folds a chat's envelopes, in seq order, into what
 * a UI renders. No React here, so it can be used with any framework.
 *
 * A chat is a tree (protocol/README.md, "Conversations are trees"): the state
 * shows its active path. A `chat.branch` (an edit, a regenerate, a switch)
 * folds the path it leads to again from the envelopes held; a message that
 * begins one of several versions says which (`versions`), for a `‹ 2/3 ›`.
 */
import { Tree } from '@agentwire/client/tree';

/**
 * @typedef {object} Message
 * @property {number} seq      The seq of the envelope that opened it.
 * @property {'user' | 'agent'} role
 * @property {string} agent
 * @property {string} text     Streamed so far, or final.
 * @property {string} [reasoning]  The model's reasoning before it (`chat.reasoning`), when it streams one.
 * @property {boolean} streaming
 * @property {boolean} [partial]  What a cancelled, interrupted or timed-out run had said when it stopped.
 * @property {{file_id: string, name: string, media_type: string, size: number}[]} [attachments]  A user's
 *   message's files (fetch each with `client.fetchFile(file_id)`).
 * @property {{all: number[], index: number}} [versions]  This message (with what led to it) is version
 *   `index + 1` of `all.length`; `all` holds the seq each version starts at, for `switchTo`.
 *
 * @typedef {object} ToolCall
 * @property {string} corr
 * @property {string} toolName
 * @property {string | null} componentType  `null` for a backend tool.
 * @property {'inline' | 'artifact'} display
 * @property {unknown} payload
 * @property {boolean} awaiting   Waits for `answer(corr, data)`.
 * @property {unknown} [result]
 * @property {boolean} [success]
 * @property {{percent: number, status: string}} [progress]
 * @property {string} [agent]  In a group run: the member that made the call.
 *
 * @typedef {object} InputRequest
 * @property {string} requestId
 * @property {string} prompt
 * @property {boolean} password
 * @property {string[]} [options]  A choice (a group's manual speaker selection).
 * @property {'pending' | 'answered' | 'timed_out'} status
 *
 * @typedef {object} ChatState
 * @property {Message[]} messages
 * @property {ToolCall[]} toolCalls          In the order they were made.
 * @property {InputRequest[]} inputRequests
 * @property {'idle' | 'running'} run
 * @property {string | null} lastRunEnd      The last `run_complete` reason.
 * @property {{total: number, prompt: number, completion: number, cost?: number, byAgent?: Record<string, {total_tokens: number, prompt_tokens: number, completion_tokens: number, cost?: number}>}[]} usage  One per run (a group's per member too).
 * @property {{code: string, message: string}[]} errors
 * @property {{seq: number, text: string, mode: string}[]} queued  Messages sent during a run, waiting for one.
 * @property {number} lastSeq
 * @property {Map<number, number>} branches  Each `chat.branch`'s seq → its `at` (the tree).
 * @property {{m: any, prev: any} | null} log  Every envelope folded, newest first (a chain, so a fold step copies nothing).
 * @property {{all: number[], index: number} | null} nextVersions  Versions the next message begins.
 * @property {string | null} title  The chat's title (its last `chat.title`, whatever the path).
 * @property {Record<string, unknown>} agentState  What each agent served over AG-UI shares with the UI
 *   (its `chat.agent_state` snapshots, each delta applied), by agent.
 */

/** @returns {ChatState} */
export function initialChatState() {
  return {
    messages: [], toolCalls: [], inputRequests: [], run: 'idle', lastRunEnd: null, usage: [], errors: [], queued: [],
    lastSeq: 0, branches: new Map(), log: null, nextVersions: null, title: null, agentState: {},
  };
}

/** The tree `branches` make of a log that ends at `last` (read only). */
function treeOf(/** @type {Map<number, number>} */ branches, /** @type {number} */ last) {
  return Object.assign(new Tree(), { branches, last });
}

/** The state of the active path of everything folded so far, from scratch. */
function refold(/** @type {ChatState} */ s) {
  const all = [];
  for (let at = s.log; at; at = at.prev) all.push(at.m);
  all.reverse();
  const path = treeOf(s.branches, s.lastSeq).path();
  let out = { ...initialChatState(), branches: s.branches };
  for (const m of all) {
    if (!path.has(m.seq)) continue;
    out = step({ ...out, lastSeq: s.lastSeq }, m);
  }
  // The title is the chat's, not the path's.
  return { ...out, log: s.log, title: s.title };
}

/**
 * The state after one envelope (pure: returns a new state).
 * @param {ChatState} s
 * @param {any} m an envelope
 * @returns {ChatState}
 */
export function applyEnvelope(s, m) {
  if (m.seq <= s.lastSeq) return s;
  const log = { m, prev: s.log };
  if (m.type === 'chat.title') return { ...s, log, lastSeq: m.seq, title: m.title };
  if (m.type === 'chat.branch') {
    return refold({ ...s, log, lastSeq: m.seq, branches: new Map(s.branches).set(m.seq, m.at) });
  }
  return step({ ...s, log, lastSeq: m.seq }, m);
}

/**
 * The state after several envelopes in seq order (a replay): the same as
 * applying each, but a log with branches is folded once, along the path
 * its last branch leaves, not again at each of them.
 * @param {ChatState} s
 * @param {any[]} envelopes
 * @returns {ChatState}
 */
export function applyEnvelopes(s, envelopes) {
  const fresh = envelopes.filter((m, i) => m.seq > s.lastSeq && (i === 0 || m.seq > envelopes[i - 1].seq));
  if (!fresh.some((m) => m.type === 'chat.branch')) return fresh.reduce(applyEnvelope, s);
  let log = s.log;
  let title = s.title;
  const branches = new Map(s.branches);
  for (const m of fresh) {
    log = { m, prev: log };
    if (m.type === 'chat.branch') branches.set(m.seq, m.at);
    if (m.type === 'chat.title') title = m.title;
  }
  return refold({ ...s, log, branches, title, lastSeq: fresh[fresh.length - 1].seq });
}

/**
 * One regular envelope of the active path.
 * @param {ChatState} s  with `lastSeq` (the tree's end: `m`'s, or the log's when folded again)
 * @param {any} m
 * @returns {ChatState}
 */
function step(s, m) {
  const next = { ...s };
  const versions = s.branches.size ? treeOf(s.branches, s.lastSeq).versions(m.seq) : null;
  if (versions) next.nextVersions = versions;
  /** A message opened here takes the versions that begin before it. */
  const opened = (/** @type {Message} */ msg) => {
    if (!next.nextVersions) return msg;
    const withVersions = { ...msg, versions: next.nextVersions };
    next.nextVersions = null;
    return withVersions;
  };
  const lastMsg = s.messages[s.messages.length - 1];
  const streamingAgent = lastMsg && lastMsg.role === 'agent' && lastMsg.streaming ? lastMsg : null;
  const replaceLast = (/** @type {Message} */ msg) => [...s.messages.slice(0, -1), msg];
  const updateCall = (/** @type {string} */ corr, /** @type {(c: ToolCall) => ToolCall} */ f) =>
    s.toolCalls.map((c) => (c.corr === corr ? f(c) : c));
  switch (m.type) {
    case 'chat.text':
      if (m.agent === 'user') {
        next.messages = [...s.messages, opened({
          seq: m.seq, role: 'user', agent: 'user', text: m.content, streaming: false,
          ...(m.attachments?.length ? { attachments: m.attachments } : {}),
        })];
        next.run = 'running';
        if (m.queued) next.queued = s.queued.filter((q) => q.seq !== m.queued);
      } else if (streamingAgent) {
        next.messages = replaceLast({ ...streamingAgent, text: m.content, streaming: false, ...(m.partial ? { partial: true } : {}) });
      } else {
        next.messages = [...s.messages, opened({
          seq: m.seq, role: 'agent', agent: m.agent, text: m.content, streaming: false, ...(m.partial ? { partial: true } : {}),
        })];
      }
      break;
    case 'chat.queued':
      next.queued = [...s.queued, { seq: m.seq, text: m.content, mode: m.mode, ...(m.attachments?.length ? { attachments: m.attachments } : {}) }];
      break;
    case 'chat.select_speaker':
      next.run = 'running';
      // A new turn (in a group, maybe another member's): what streamed before is done.
      if (streamingAgent) next.messages = replaceLast({ ...streamingAgent, streaming: false });
      break;
    case 'chat.reasoning':
      // The model's thinking, before the words of its turn.
      next.messages = streamingAgent
        ? replaceLast({ ...streamingAgent, reasoning: (streamingAgent.reasoning ?? '') + m.content })
        : [...s.messages, opened({ seq: m.seq, role: 'agent', agent: m.agent, text: '', reasoning: m.content, streaming: true })];
      break;
    case 'chat.print':
      next.messages = streamingAgent
        ? replaceLast({ ...streamingAgent, text: streamingAgent.text + m.content })
        : [...s.messages, opened({ seq: m.seq, role: 'agent', agent: m.agent, text: m.content, streaming: true })];
      break;
    case 'chat.turn_discarded': {
      // A model turn a restart cut off: its fragments go, and the turn is
      // asked again (a new select_speaker and fragments follow). The
      // versions its message began wait for the turn asked again.
      const gone = (/** @type {Message} */ msg) => msg.role === 'agent' && msg.agent === m.agent && msg.seq > m.from_seq;
      next.messages = s.messages.filter((msg) => !gone(msg));
      const began = s.messages.find((msg) => gone(msg) && msg.versions);
      if (began) next.nextVersions = began.versions ?? null;
      break;
    }
    case 'chat.tool_call':
      if (s.toolCalls.some((c) => c.corr === m.corr)) {
        // A component's new state (artifact_patch).
        next.toolCalls = updateCall(m.corr, (c) => ({ ...c, payload: m.payload, awaiting: m.awaiting_response }));
      } else {
        next.toolCalls = [...s.toolCalls, {
          corr: m.corr, toolName: m.tool_name, componentType: m.component_type, display: m.display,
          payload: m.payload, awaiting: m.awaiting_response, ...(m.agent ? { agent: m.agent } : {}),
        }];
      }
      break;
    case 'chat.tool_response':
      next.toolCalls = updateCall(m.corr, (c) => ({ ...c, awaiting: false, result: m.content, success: m.success }));
      break;
    case 'chat.tool_progress':
      next.toolCalls = updateCall(m.corr, (c) => ({ ...c, progress: { percent: m.progress_percent, status: m.status_message } }));
      break;
    case 'chat.input_request':
      next.inputRequests = [...s.inputRequests, {
        requestId: m.request_id, prompt: m.prompt, password: m.password, status: 'pending',
        ...(m.options ? { options: m.options } : {}),
      }];
      break;
    case 'chat.input_ack':
    case 'chat.input_timeout':
      next.inputRequests = s.inputRequests.map((r) =>
        r.requestId === m.request_id ? { ...r, status: m.type === 'chat.input_ack' ? 'answered' : 'timed_out' } : r,
      );
      break;
    case 'chat.usage_summary':
      next.usage = [...s.usage, {
        total: m.total_tokens, prompt: m.prompt_tokens, completion: m.completion_tokens, cost: m.cost,
        ...(m.by_agent ? { byAgent: m.by_agent } : {}),
      }];
      break;
    case 'chat.run_complete':
      next.run = 'idle';
      // Versions no message of the run began (it ended before one opened)
      // are not carried to the next question.
      next.nextVersions = null;
      next.lastRunEnd = m.reason;
      // Nothing of a finished run waits any more.
      next.toolCalls = s.toolCalls.map((c) => (c.awaiting ? { ...c, awaiting: false } : c));
      next.inputRequests = s.inputRequests.map((r) => (r.status === 'pending' ? { ...r, status: 'timed_out' } : r));
      if (streamingAgent) next.messages = replaceLast({ ...streamingAgent, streaming: false });
      break;
    case 'chat.agent_state': {
      // A snapshot replaces the agent's state; a delta (RFC 6902) changes it.
      // A delta that does not apply (the server checked it did) is skipped.
      let value = m.snapshot;
      if (value === undefined) {
        try {
          value = applyPatch(s.agentState[m.agent] ?? {}, m.delta ?? []);
        } catch {
          break;
        }
      }
      next.agentState = { ...s.agentState, [m.agent]: value };
      break;
    }
    case 'chat.error':
      next.errors = [...s.errors, { code: m.error_code, message: m.message }];
      break;
  }
  return next;
}

/** RFC 6902 `ops` applied to a copy of `doc`. Throws if one does not apply. */
export function applyPatch(/** @type {unknown} */ doc, /** @type {any[]} */ ops) {
  let out = structuredClone(doc);
  for (const op of ops) out = applyOp(out, op);
  return out;
}

/** `/a/b~1c` → `['a', 'b/c']`. */
const tokens = (/** @type {string} */ path) =>
  path === '' ? [] : path.slice(1).split('/').map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));

function at(/** @type {any} */ doc, /** @type {string[]} */ path) {
  let v = doc;
  for (const t of path) {
    if (v === null || typeof v !== 'object' || !(Array.isArray(v) ? Number(t) < v.length : t in v)) {
      throw new Error(`no value at /${path.join('/')}`);
    }
    v = Array.isArray(v) ? v[Number(t)] : v[t];
  }
  return v;
}

function put(/** @type {any} */ doc, /** @type {string[]} */ path, /** @type {unknown} */ value, insert = true) {
  if (path.length === 0) return value;
  const parent = at(doc, path.slice(0, -1));
  const key = path[path.length - 1];
  if (Array.isArray(parent)) {
    const i = key === '-' ? parent.length : Number(key);
    if (!Number.isInteger(i) || i < 0 || i > parent.length) throw new Error(`bad index ${key}`);
    parent.splice(i, insert ? 0 : 1, value);
  } else if (parent !== null && typeof parent === 'object') {
    if (!insert && !(key in parent)) throw new Error(`no value at ${key}`);
    parent[key] = value;
  } else {
    throw new Error(`not a container at /${path.slice(0, -1).join('/')}`);
  }
  return doc;
}

function drop(/** @type {any} */ doc, /** @type {string[]} */ path) {
  at(doc, path);
  const parent = at(doc, path.slice(0, -1));
  const key = path[path.length - 1];
  if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else delete parent[key];
  return doc;
}

function applyOp(/** @type {any} */ doc, /** @type {any} */ op) {
  const path = tokens(op.path);
  switch (op.op) {
    case 'add': return put(doc, path, structuredClone(op.value));
    case 'remove': return drop(doc, path);
    case 'replace': at(doc, path); return put(doc, path, structuredClone(op.value), false);
    case 'move': {
      const value = at(doc, tokens(op.from));
      return put(drop(doc, tokens(op.from)), path, value);
    }
    case 'copy': return put(doc, path, structuredClone(at(doc, tokens(op.from))));
    case 'test':
      if (JSON.stringify(at(doc, path)) !== JSON.stringify(op.value)) throw new Error(`test failed at ${op.path}`);
      return doc;
    default: throw new Error(`unknown op ${op.op}`);
  }
}
