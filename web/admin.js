// The operator's page (/admin): every run in flight and what it waits for,
// MCP servers and upstream agents, usage and cost, recent errors, what
// operators did; a run's timeline from its log; cancel a run, end a wait.
// It reads the operator's API (/v1/admin/…) every two seconds, and a
// timeline it shows every second after the last envelope it holds (the log
// followed). Everything a chat, a model or a tool wrote goes into the page
// as text (textContent), never as HTML.

import { drawChart } from '/assets/chart-frame.js';

const params = new URLSearchParams(location.search);
if (params.has('access_token')) {
  sessionStorage.setItem('agentwire.admin.token', params.get('access_token'));
  params.delete('access_token');
  const rest = params.toString();
  history.replaceState(history.state, '', `${location.pathname}${rest ? `?${rest}` : ''}${location.hash}`);
}
const token = sessionStorage.getItem('agentwire.admin.token') || undefined;
const $ = (id) => document.getElementById(id);
const OVERVIEW_MS = 2000;
const TIMELINE_MS = 1000;
const USAGE_MS = 30000;
const CHART_TIMEOUT_MS = 10000;

/** Builds an element; `text` is set as text, never parsed as HTML. */
function el(tag, { cls, text, attrs } = {}, ...children) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) if (c) e.append(c);
  return e;
}

async function api(path, options = {}) {
  const headers = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
  const r = await fetch(path, { ...options, headers });
  if (!r.ok) {
    let why = `HTTP ${r.status}`;
    try { why = (await r.json()).error.message || why; } catch { /* not JSON */ }
    throw new Error(why);
  }
  return r.json();
}

function setStatus(state, text) {
  $('status').dataset.state = state;
  $('status').textContent = text;
}

const seconds = (s) => (s < 60 ? `${s.toFixed(1)} s` : s < 3600 ? `${Math.floor(s / 60)} min ${Math.round(s % 60)} s` : `${(s / 3600).toFixed(1)} h`);
const short = (id) => String(id).slice(0, 8);
const clip = (text, n = 160) => { const t = String(text ?? ''); return t.length > n ? `${t.slice(0, n)}…` : t; };
const td = (text, cls) => el('td', { text: text ?? '', cls });

// ----- the overview ------------------------------------------------------------

async function act(path, what) {
  try {
    const done = await api(path, { method: 'POST' });
    setStatus('open', `${what}: done by ${done.by}`);
  } catch (e) {
    setStatus('error', `${what}: ${e.message}`);
  }
  await refresh();
}

function runRow(run) {
  const waits = el('td', { cls: 'waits' });
  for (const w of run.waiting) {
    const end = el('button', { text: 'End wait', attrs: { 'data-wait': w.id, type: 'button' } });
    end.addEventListener('click', () => act(`/v1/admin/chats/${run.chat_id}/waits/${encodeURIComponent(w.id)}/end`, `end wait ${w.id}`));
    waits.append(el('div', { attrs: { 'data-kind': w.kind } },
      el('span', { text: `${w.kind}${w.tool_name ? ` (${w.tool_name})` : ''} for ${seconds(w.seconds)} ` }), end));
  }
  const timeline = el('button', { text: 'Timeline', attrs: { type: 'button', 'data-timeline': run.chat_id } });
  timeline.addEventListener('click', () => openTimeline(run.chat_id));
  const cancel = el('button', { text: 'Cancel run', attrs: { type: 'button', 'data-cancel': run.chat_id } });
  cancel.addEventListener('click', () => act(`/v1/admin/chats/${run.chat_id}/cancel`, `cancel ${short(run.chat_id)}`));
  return el('tr', { attrs: { 'data-chat': run.chat_id } },
    el('td', { cls: 'mono', text: short(run.chat_id), attrs: { title: run.chat_id } }),
    td(run.owner), td(run.agent), td(run.node ?? '—'),
    td(seconds(run.age_seconds), 'num'), td(run.step, 'mono'), waits,
    el('td', {}, timeline, cancel));
}

function render(o) {
  $('nodes').tBodies[0].replaceChildren(...o.nodes.map((n) => el('tr', {}, td(n.id ?? 'this node'), td(n.runs, 'num'))));
  $('this-node').textContent = `Answered by node ${o.node.id ?? '(single node)'}: ${o.node.chats_awake} chats awake, ${o.node.chats_asleep} asleep.`;
  $('runs').tBodies[0].replaceChildren(...o.runs.map(runRow));
  $('no-runs').hidden = o.runs.length > 0;
  const sources = [
    ...o.mcp_servers.map((m) => el('tr', {}, td(m.agent), td(`MCP ${m.name}`),
      el('td', { text: m.state, cls: `state-${m.state}` }), td(m.tools, 'num'), td(m.restarts, 'num'), td(clip(m.error))))
    , ...o.upstream_agents.map((u) => {
      // Failing: its last call failed after its last answer (or it never answered).
      const failing = u.last_error_at && (!u.last_ok_at || u.last_error_at >= u.last_ok_at);
      const state = u.runs === 0 ? 'idle' : failing ? 'failing' : 'ok';
      return el('tr', { attrs: { 'data-upstream': u.agent } }, td(u.agent), td(`AG-UI ${u.endpoint}`),
        el('td', { text: state, cls: failing ? 'state-down' : 'state-ready' }),
        td(`${u.runs} runs`, 'num'), td(`${u.errors} errors`, 'num'), td(clip(u.last_error)));
    }),
  ];
  $('sources').tBodies[0].replaceChildren(...sources);
  $('errors').tBodies[0].replaceChildren(...o.errors.map((e) => el('tr', {},
    td(new Date(e.ts).toLocaleTimeString()), el('td', { cls: 'mono', text: `${short(e.chat_id)} #${e.seq}`, attrs: { title: e.chat_id } }),
    td(e.error_code, 'mono'), td(clip(e.message, 300)))));
  $('acts').tBodies[0].replaceChildren(...o.acts.map((a) => el('tr', {},
    td(new Date(a.at).toLocaleTimeString()), td(a.actor), td(a.action),
    el('td', { cls: 'mono', text: short(a.chat_id), attrs: { title: a.chat_id } }), td(a.target ?? ''))));
}

async function refresh() {
  try {
    render(await api('/v1/admin/overview'));
    if ($('status').dataset.state !== 'open') setStatus('open', 'live');
  } catch (e) {
    setStatus('error', e.message);
  }
}

// ----- a run's timeline, from its log ------------------------------------------

let timeline = { chat: null, after: 0, first: null, opened: new Map(), prints: null, timer: null };

function openTimeline(chat) {
  clearTimeout(timeline.timer);
  // A new object each time: a read still in flight for the one before
  // sees it is no longer current and stops.
  timeline = { chat, after: 0, first: null, opened: new Map(), prints: null, timer: null };
  $('timeline').replaceChildren();
  $('timeline-chat').textContent = chat;
  $('timeline-box').hidden = false;
  followTimeline();
}

/** One line of the timeline: when (from the log's first envelope), what, and how long a request took. */
function line(env) {
  const at = Date.parse(env.ts);
  timeline.first ??= at;
  const offset = `+${((at - timeline.first) / 1000).toFixed(2)} s`;
  const type = env.type || '';
  // A model turn's fragments: one line, counted.
  if (type === 'chat.print') {
    if (timeline.prints) {
      timeline.prints.n += 1;
      timeline.prints.what.textContent = `${timeline.prints.n} fragments streamed`;
      return null;
    }
    const what = el('span', { text: '1 fragment streamed' });
    timeline.prints = { n: 1, what };
    return el('li', {}, el('span', { cls: 'at', text: offset }), el('span', { cls: 'mono', text: type }), what);
  }
  timeline.prints = null;
  let what = env.agent ? `${env.agent}: ` : '';
  let cls = '';
  const id = env.request_id || env.corr;
  if (type === 'chat.text' || type === 'chat.reasoning') what += clip(env.content);
  else if (type === 'chat.tool_call') {
    what += `${env.tool_name}${env.component_type ? ` [${env.component_type}]` : ''} ${clip(JSON.stringify(env.payload ?? {}), 120)}`;
    if (env.awaiting_response) cls = 'kind-wait';
  } else if (type === 'chat.tool_response') what += `${env.tool_name} ${env.success === false ? 'failed' : 'answered'}`;
  else if (type === 'chat.input_request') { what += clip(env.prompt); cls = 'kind-wait'; }
  else if (type === 'chat.error') { what += `${env.error_code}: ${clip(env.message)}`; cls = 'kind-error'; }
  else if (type === 'chat.run_complete') what += env.reason;
  else if (type === 'chat.usage_summary') what += `${env.total_tokens} tokens${env.cost != null ? `, cost ${env.cost}` : ''}`;
  else if (type === 'chat.input_timeout') what += `no answer in ${env.timeout_seconds} s`;
  else if (type === 'chat.title') what += clip(env.title);
  let took = '';
  const started = id && timeline.opened.get(id);
  if (started !== undefined && started !== false && type !== 'chat.tool_call' && type !== 'chat.input_request') {
    took = ` (after ${((at - started) / 1000).toFixed(2)} s)`;
    timeline.opened.set(id, false);
  } else if (id && (type === 'chat.tool_call' || type === 'chat.input_request')) timeline.opened.set(id, at);
  return el('li', { cls, attrs: { 'data-type': type } },
    el('span', { cls: 'at', text: offset }), el('span', { cls: 'mono', text: type }),
    el('span', { text: `${what}${took}` }));
}

async function followTimeline() {
  const mine = timeline;
  const chat = mine.chat;
  try {
    for (;;) {
      const page = await api(`/v1/admin/chats/${chat}/log?after=${mine.after}`);
      if (timeline !== mine) return;
      for (const env of page.envelopes) {
        timeline.after = Math.max(timeline.after, env.seq);
        const li = line(env);
        if (li) $('timeline').append(li);
      }
      if (!page.more) break;
    }
  } catch (e) {
    setStatus('error', `timeline: ${e.message}`);
  }
  if (timeline === mine) mine.timer = setTimeout(followTimeline, TIMELINE_MS);
}

// ----- usage and cost -----------------------------------------------------------

async function usage() {
  try {
    const u = await api('/v1/usage');
    const t = u.total;
    $('usage-total').textContent = `${t.runs} runs, ${t.total_tokens} tokens, cost ${t.cost}` +
      (t.unpriced_runs ? ` (${t.unpriced_runs} runs unpriced)` : '') + (u.truncated ? ' (truncated)' : '');
    const values = u.days.map((d) => ({ day: d.day, agent: d.agent, user: d.user, runs: d.runs, tokens: d.total_tokens, cost: d.cost }));
    if (values.length === 0) { $('usage').textContent = 'No usage yet.'; return; }
    $('usage').replaceChildren();
    $('usage').removeAttribute('data-drawn');
    drawChart($('usage'), {
      $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
      width: 420, height: 160,
      data: { values },
      mark: 'bar',
      encoding: {
        x: { field: 'day', type: 'ordinal', title: 'day (UTC)' },
        y: { field: 'runs', type: 'quantitative', aggregate: 'sum', title: 'runs' },
        color: { field: 'agent', type: 'nominal' },
        tooltip: [{ field: 'agent' }, { field: 'user' }, { field: 'tokens', aggregate: 'sum' }, { field: 'cost', aggregate: 'sum' }],
      },
    }, { title: 'usage chart', timeoutMs: CHART_TIMEOUT_MS, max: { width: 1200, height: 600 } });
  } catch (e) {
    $('usage').textContent = `usage: ${e.message}`;
  }
}

// Each read waits for the one before (a slow server is not piled on).
async function every(ms, read) {
  await read();
  setTimeout(() => every(ms, read), ms);
}
every(OVERVIEW_MS, refresh);
every(USAGE_MS, usage);
