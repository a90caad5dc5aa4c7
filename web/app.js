// The agentwire web page: a chat UI on the JavaScript client. Every piece of
// model output goes into the page as text (textContent), never as HTML.
import { AgentwireClient } from '/assets/agentwire.js';
import { Tree } from '/assets/tree.js';
import { drawChart } from '/assets/chart-frame.js';

// A token given as `?access_token=` is read once, then taken out of the
// address bar and the history (kept for this tab only, so a reload still
// signs in), and never put on `window`.
const params = new URLSearchParams(location.search);
if (params.has('access_token')) {
  sessionStorage.setItem('agentwire.token', params.get('access_token'));
  params.delete('access_token');
  const rest = params.toString();
  history.replaceState(history.state, '', `${location.pathname}${rest ? `?${rest}` : ''}${location.hash}`);
}
const token = sessionStorage.getItem('agentwire.token') || undefined;
const wsUrl = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/ws`;
// In memory only: a page load replays each chat it opens from the start.
const client = new AgentwireClient(wsUrl, { token, storage: null });
const $ = (id) => document.getElementById(id);

/** Builds an element; `text` is set as text, never parsed as HTML. */
function el(tag, { cls, text, attrs } = {}, ...children) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) if (c) e.append(c);
  return e;
}

async function api(path, options = {}) {
  const headers = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
  const r = await fetch(path, { ...options, headers });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.status === 204 ? null : r.json();
}

// ----- connection state -------------------------------------------------------

client.on('state', (state, detail) => {
  const badge = $('conn');
  badge.dataset.state = state;
  badge.textContent = {
    connecting: 'connecting…',
    open: 'connected',
    reconnecting: 'reconnecting…',
    resumed: `resumed ${detail.replayed ?? 0} event${detail.replayed === 1 ? "" : "s"}`,
    closed: 'disconnected',
  }[state];
});

// ----- the current chat ---------------------------------------------------------

let current = null; // { chat, view }

/** Each group's members, in order, by agent id (from `/v1/agents`). */
const groups = new Map();

/** Everything one chat's log looks like on screen. */
class ChatView {
  constructor(chat, agent) {
    this.chat = chat;
    this.members = groups.get(agent) || [];
    this.turn = null; // the agent bubble being streamed
    this.cards = new Map(); // corr → card element
    this.progress = new Map(); // corr → <progress>
    this.inputs = new Map(); // request_id → card
    this.handoffs = new Map(); // corr → names a handoff line's target
    // The conversation is a tree (edits, regenerates, versions): the page
    // shows its active path, and draws it again when a chat.branch moves it.
    this.tree = new Tree();
    this.envelopes = [];
    this.question = 0; // the user's message the current run answers
    this.inRun = false; // between a run's first turn and its end
    this.nest = null; // a group member's nested chats being drawn: { member, list }
    this.how = null; // how the next speaker was chosen (a group's method)
    this.unsub = chat.on('envelope', (m) => this.take(m));
    // A replay with branches is drawn once, at its end (not again at each).
    this.deferred = false;
    this.unsubResumed = chat.on('resumed', () => this.caughtUp());
    this.unsubErr = chat.on('error', (e) => this.add(el('li', { cls: 'note error', text: `${e.error_code}: ${e.message}` })));
  }

  close() {
    this.unsub();
    this.unsubResumed();
    this.unsubErr();
  }

  /** The next envelope of the log. */
  take(m) {
    // A new or changed title: the list shows it (not part of the conversation).
    if (m.type === 'chat.title' && !m.replay) chatsChanged();
    this.envelopes.push(m);
    this.tree.push(m);
    if (m.replay && (this.deferred || m.type === 'chat.branch')) {
      this.deferred = true;
      return;
    }
    // (The redraw holds this one too.)
    if (this.deferred) return this.caughtUp();
    if (m.type === 'chat.branch') this.redraw();
    else this.show(m);
  }

  /** The replay is over: what it deferred is drawn, once. */
  caughtUp() {
    if (!this.deferred) return;
    this.deferred = false;
    this.redraw();
  }

  /** A regular envelope on the active path, after its versions' switcher
   * if it begins one of several. */
  show(m) {
    const versions = this.tree.versions(m.seq);
    if (versions) this.switcher(versions);
    // A user's text between runs asks a question; one inside a run answers
    // an input request or steers the run.
    if (m.type === 'chat.select_speaker') this.inRun = true;
    if (m.type === 'chat.run_complete') this.inRun = false;
    if (m.type === 'chat.text' && m.agent === 'user' && !this.inRun) this.question = m.seq;
    this.render(m);
  }

  /** The active path drawn again from the log held. */
  redraw() {
    $('log').replaceChildren();
    this.turn = null;
    this.nest = null;
    this.how = null;
    this.templateBar = null;
    this.question = 0;
    this.inRun = false;
    for (const map of [this.cards, this.progress, this.inputs, this.handoffs]) map.clear();
    const path = this.tree.path();
    for (const m of this.envelopes) if (path.has(m.seq)) this.show(m);
  }

  /** `‹ 2/3 ›`: the versions that follow one point, the shown one counted. */
  switcher({ all, index }) {
    const step = (label, to, text) => {
      const b = el('button', { cls: 'step', text, attrs: { 'aria-label': label } });
      if (to === undefined) b.disabled = true;
      else b.onclick = () => this.chat.switchTo(to);
      return b;
    };
    this.add(el('li', { cls: 'versions' },
      step('previous version', all[index - 1], '‹'),
      el('span', { cls: 'count', text: `${index + 1}/${all.length}` }),
      step('next version', all[index + 1], '›')));
  }

  /** A user's message turned into a box that edits it (a new version). */
  editing(li, m) {
    const box = el('textarea', { attrs: { rows: '2', 'aria-label': 'edit message' } });
    box.value = m.content;
    const save = el('button', { cls: 'save', text: 'Save' });
    const cancel = el('button', { text: 'Cancel' });
    const submit = () => {
      const text = box.value.trim();
      if (!text) return;
      save.disabled = true;
      this.chat.edit(m.seq, text);
    };
    save.onclick = submit;
    cancel.onclick = () => this.redraw();
    box.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) {
        e.preventDefault();
        submit();
      }
    });
    li.replaceChildren(el('div', { cls: 'card editing' }, box, save, cancel));
    box.focus();
  }

  add(li) {
    const log = $('log');
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 40;
    (this.nest?.list ?? log).append(li);
    if (atEnd) log.scrollTop = log.scrollHeight;
    return li;
  }

  /** Where `m` is drawn: a speaker inside a group member's nested chats
   * (`member/agent`) goes into that member's fold, opened by its first
   * nested event; any other speaker, and a run's end, close it. Envelopes
   * that name no speaker (a question asked inside) stay where they are. */
  place(m) {
    const ends = ['chat.run_complete', 'chat.usage_summary', 'chat.error'].includes(m.type);
    if (typeof m.agent !== 'string' && !ends) return;
    const cut = ends ? -1 : m.agent.indexOf('/');
    if (cut < 0) {
      if (this.nest) this.turn = null;
      this.nest = null;
      return;
    }
    const member = m.agent.slice(0, cut);
    if (this.nest?.member === member) return;
    this.nest = null;
    this.turn = null;
    const list = el('ol', { cls: 'nested-log' });
    const fold = el('details', { cls: 'nested', attrs: { 'data-member': member } },
      el('summary', { text: `${member}: nested chats` }), list);
    this.add(el('li', { cls: 'nested-turn' }, fold));
    this.nest = { member, list };
  }

  render(m) {
    this.place(m);
    switch (m.type) {
      case 'chat.text':
        if (m.agent === 'user') {
          if (m.queued) $('log').querySelector(`li.queued[data-queued="${m.queued}"]`)?.remove();
          const li = this.add(el('li', { cls: 'user', attrs: { 'data-seq': String(m.seq) } },
            m.content ? el('div', { cls: 'msg', text: m.content }) : null,
            m.attachments?.length ? fileList(m.attachments) : null));
          // Only a message that asks (not an answer to a request, not a
          // steer inside a run) can be edited.
          if (!this.inRun) {
            const edit = el('button', { cls: 'edit', text: 'Edit', attrs: { 'aria-label': 'edit this message' } });
            edit.onclick = () => this.editing(li, m);
            li.append(edit);
          }
        } else {
          const msg = this.bubble(m.agent);
          renderMarkdown(msg, m.content);
          // A run stopped mid-answer (cancelled, interrupted, timed out).
          if (m.partial) msg.after(el('span', { cls: 'note cut', text: 'stopped here' }));
          this.turn = null;
        }
        break;
      case 'chat.queued': {
        // Waiting for a run: shown apart until the run takes it.
        const li = el('li', { cls: 'user queued', attrs: { 'data-queued': String(m.seq) } },
          el('div', { cls: 'msg', text: m.content }), el('span', { cls: 'note', text: m.mode === 'enqueue' ? 'queued' : m.mode }));
        this.add(li);
        break;
      }
      case 'chat.select_speaker':
        $('run').textContent = `${m.agent} is working…`;
        this.turn = null;
        // A group's turn says how it was chosen; a nested chat, its message.
        this.how = m.method && m.method !== 'continue' ? m.method : null;
        if (m.method === 'nested' && m.reason) {
          this.add(el('li', { cls: 'note opening', text: `→ ${m.agent}: ${m.reason}` }));
        }
        break;
      case 'chat.reasoning': {
        // The model's thinking, folded away above its words.
        const msg = this.bubble(m.agent);
        let box = msg.previousElementSibling;
        if (!box?.classList.contains('reasoning')) {
          box = el('details', { cls: 'reasoning' }, el('summary', { text: 'Reasoning' }));
          msg.before(box);
        }
        box.append(document.createTextNode(m.content));
        break;
      }
      case 'chat.print':
        this.bubble(m.agent).append(document.createTextNode(m.content));
        break;
      case 'chat.turn_discarded':
        // A turn a restart cut off: its words go; the turn is asked again.
        if (this.turn) this.turn.closest('li').remove();
        this.turn = null;
        break;
      case 'chat.input_request':
        this.inputRequest(m);
        break;
      case 'chat.input_ack':
        // The text before it answered the request: not a message to edit.
        $('log').querySelector(`li.user[data-seq="${m.seq - 1}"] button.edit`)?.remove();
      // falls through
      case 'chat.input_timeout': {
        const card = this.inputs.get(m.request_id);
        if (card) this.done(card, m.type === 'chat.input_ack' ? 'answered' : 'timed out');
        break;
      }
      case 'chat.tool_call':
        this.toolCall(m);
        break;
      case 'chat.tool_response': {
        const handoff = this.handoffs.get(m.corr);
        if (handoff) {
          if (m.success && typeof m.content?.handoff_to === 'string') handoff(m.content.handoff_to);
          break;
        }
        const card = this.cards.get(m.corr);
        if (!card) break;
        if (m.corr.endsWith('.approval')) {
          const c = m.content || {};
          this.done(card, c.approved === true ? 'approved' : `refused${c.reason ? `: ${c.reason}` : ''}`);
        } else {
          this.done(card, m.success ? 'done' : `failed: ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`);
          const c = m.content;
          if (card.classList.contains('workflow') && m.success) card.append(el('pre', { cls: 'result', text: JSON.stringify(c, null, 2) }));
          // Files the tool produced (an MCP server's image), named by id.
          // (What holds one: an image, audio or resource block of an MCP
          // result, or a `type: "file"` result, as `save_file` gives.)
          const made = (Array.isArray(c?.content) ? c.content : [c])
            .filter((b) => ['image', 'audio', 'resource', 'file'].includes(b?.type))
            .map((b) => (b.type === 'resource' ? b.resource : b))
            .filter((b) => typeof b?.file_id === 'string')
            .map((b) => ({ file_id: b.file_id, name: String(b.name ?? 'file'), media_type: String(b.mimeType ?? b.media_type ?? '') }));
          if (made.length) card.append(fileList(made));
          if (m.success && c && c.type === 'vega_lite_spec' && c.spec && ['string', 'object'].includes(typeof c.spec)) chart(card, c.spec);
          else if (m.success && c && Array.isArray(c.columns) && Array.isArray(c.rows)) card.append(...resultTable(c));
        }
        break;
      }
      case 'chat.progress': {
        // A template's progress bar: one per chat, moved along.
        if (!this.templateBar) {
          this.templateBar = el('progress', { attrs: { 'aria-label': 'template progress' } });
          this.templateLabel = el('div', { cls: 'note' });
          this.add(el('li', { cls: 'template-progress' }, this.templateLabel, this.templateBar));
        }
        this.templateBar.max = m.total_items;
        this.templateBar.value = m.current_item;
        this.templateLabel.textContent = m.current_item >= m.total_items
          ? 'All items done'
          : `${m.item_title} (${m.current_item + 1} of ${m.total_items})`;
        break;
      }
      case 'chat.tool_progress': {
        let bar = this.progress.get(m.corr);
        if (!bar) {
          bar = el('progress', { attrs: { max: '100' } });
          this.progress.set(m.corr, bar);
          this.add(el('li', {}, el('div', { cls: 'note', text: m.tool_name }), bar));
        }
        bar.value = m.progress_percent;
        bar.title = m.status_message;
        break;
      }
      case 'chat.usage_summary': {
        // A group's run also says what each member used.
        const by = Object.entries(m.by_agent || {}).map(([who, u]) => `${who} ${u.total_tokens}`).join(', ');
        this.add(el('li', { cls: 'note', text: `tokens: ${m.total_tokens} (prompt ${m.prompt_tokens}, completion ${m.completion_tokens})${m.cost != null ? `, cost ${m.cost}` : ''}${by ? `; ${by}` : ''}` }));
        break;
      }
      case 'chat.run_complete': {
        // A group that took its rounds ended as it should (AG2's stop).
        $('run').textContent = ['completed', 'max_rounds'].includes(m.reason) ? '' : `run ended: ${m.reason}`;
        // The end marker follows the run's output, in log order, with a way
        // to have the answer written again (a new version).
        const end = this.add(el('li', { cls: 'note run-end', text: `run ${m.reason} ` }));
        const question = this.question;
        if (question) {
          const again = el('button', { cls: 'regenerate', text: 'Regenerate', attrs: { 'aria-label': 'regenerate this answer' } });
          again.onclick = () => this.chat.regenerate(question);
          end.append(again);
        }
        this.turn = null;
        break;
      }
      case 'chat.error':
        this.add(el('li', { cls: 'note error', text: `${m.error_code}: ${m.message}` }));
        break;
    }
  }

  /** The agent bubble of the current turn (created on first use), in the
   * speaker's own colour: a group's members each get theirs. */
  bubble(agent) {
    if (!this.turn) {
      const msg = el('div', { cls: 'msg' });
      const how = this.how ? el('span', { cls: 'how', text: this.how }) : null;
      this.how = null;
      const head = el('div', { cls: 'head' }, el('span', { cls: 'who', text: agent }), how);
      const li = el('li', { cls: 'agent', attrs: { 'data-agent': agent } }, head, msg);
      li.style.setProperty('--who', this.colour(agent));
      this.add(li);
      this.turn = msg;
    }
    return this.turn;
  }

  done(card, text) {
    card.classList.add('done');
    card.querySelectorAll('button, input, textarea').forEach((x) => (x.disabled = true));
    card.append(el('div', { cls: 'note', text }));
  }

  inputRequest(m) {
    if (Array.isArray(m.options)) return this.choice(m);
    const input = el('input', { attrs: { type: m.password ? 'password' : 'text', 'aria-label': m.prompt } });
    const send = el('button', { text: 'Submit' });
    const card = el('div', { cls: 'card' }, el('div', { cls: 'title', text: m.prompt }), input, send);
    const submit = () => {
      if (!input.value) return;
      this.chat.submitInput(m.request_id, input.value);
      input.value = '';
      send.disabled = true;
    };
    send.onclick = submit;
    // Enter submits; every other key types (a handler that returns false
    // would cancel it).
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') submit();
    });
    this.inputs.set(m.request_id, card);
    this.add(el('li', {}, card));
  }

  /** A speaker's colour: a group's members spread round the colour wheel by
   * their place in the group, so no two look alike; anyone else by name. */
  colour(name) {
    const i = this.members.indexOf(name);
    return i >= 0 ? `hsl(${(215 + (i * 360) / this.members.length) % 360}, 60%, 38%)` : colour(name);
  }

  /** A request with options (a group's `manual` speaker selection): one
   * button per option, each answering with its text. */
  choice(m) {
    const card = el('div', { cls: 'card choice' }, el('div', { cls: 'title', text: m.prompt }));
    for (const o of m.options) {
      const b = el('button', { text: o, attrs: { 'data-option': o } });
      b.style.setProperty('--who', this.colour(o));
      b.onclick = () => {
        this.chat.submitInput(m.request_id, o);
        card.querySelectorAll('button').forEach((x) => (x.disabled = true));
      };
      card.append(b);
    }
    this.inputs.set(m.request_id, card);
    this.add(el('li', {}, card));
  }

  toolCall(m) {
    const known = this.cards.get(m.corr);
    if (known) {
      // A patched component: show its new state.
      const pre = known.querySelector('pre');
      if (pre) pre.textContent = JSON.stringify(m.payload, null, 2);
      return;
    }
    const reply = (data) => this.chat.sendComponentResult(m.corr, data);
    if (m.component_type === 'workflow') return this.workflow(m);
    if (!m.component_type && isHandoff(m.tool_name)) return this.handoff(m);
    if (m.tool_name === 'template') return this.widget(m, reply);
    if (m.corr.endsWith('.preview')) return this.preview(m);
    const title = (m.component_type ? `${m.component_type} (${m.tool_name})` : `tool: ${m.tool_name}`)
      + (m.agent ? ` · ${m.agent}` : '');
    const card = el('div', { cls: 'card' }, el('div', { cls: 'title', text: title }));
    const p = m.payload || {};
    const button = (text, data) => {
      const b = el('button', { text });
      b.onclick = () => reply(data);
      return b;
    };
    if (!m.component_type) {
      card.append(el('pre', { text: JSON.stringify(p) }));
    } else if (m.component_type === 'approval') {
      card.append(
        el('pre', { text: `${p.tool_name} ${JSON.stringify(p.input)}` }),
        button('Approve', { approved: true }),
        button('Reject', { approved: false, reason: 'rejected in the web page' }),
      );
    } else if (m.component_type === 'multiple_choice' && Array.isArray(p.options)) {
      for (const o of p.options) card.append(button(String(o), { choice: o }));
    } else if (m.component_type === 'confirm') {
      card.append(el('pre', { text: p.message ?? JSON.stringify(p) }), button('Yes', { confirmed: true }), button('No', { confirmed: false }));
    } else {
      // free_text and anything else: show the payload, answer with text.
      const input = el('input', { attrs: { type: 'text', 'aria-label': 'answer' } });
      const send = el('button', { text: 'Send' });
      send.onclick = () => reply(m.component_type === 'free_text' ? { text: input.value } : { value: input.value });
      card.append(el('pre', { text: JSON.stringify(p, null, 2) }), input, send);
    }
    if (!m.awaiting_response) card.querySelectorAll('button, input').forEach((x) => (x.disabled = true));
    this.cards.set(m.corr, card);
    this.add(el('li', {}, card));
  }

  /** A group member handing the conversation over (`handoff_to`, an
   * `OnCondition`'s `transfer_to_…`, a context condition that held): a line
   * in the conversation's structure, not a tool card. */
  handoff(m) {
    const p = m.payload || {};
    const when = typeof p.expression === 'string' ? ` (${p.expression})` : '';
    const from = m.agent ?? 'agent';
    const line = el('li', { cls: 'note handoff', text: `${from} → …${when}` });
    // Whom to: what `handoff_to` names; a condition's answer says it.
    const named = (to) => {
      line.textContent = `${from} → ${to}${when}`;
      line.dataset.to = to;
    };
    if (typeof p.agent === 'string') named(p.agent);
    this.handoffs.set(m.corr, named);
    this.add(line);
    this.turn = null;
    this.how = null;
  }

  /** A workflow the user ran (seed 002): its title and parameters; its
   * result arrives as its tool_response. */
  workflow(m) {
    const p = m.payload || {};
    const card = el('div', { cls: 'card workflow', attrs: { 'data-workflow': p.workflow_id ?? m.tool_name } },
      el('div', { cls: 'title', text: `Workflow: ${p.title ?? m.tool_name}` }),
      el('pre', { text: JSON.stringify(p.parameters ?? {}, null, 2) }));
    this.cards.set(m.corr, card);
    this.add(el('li', {}, card));
  }

  /** A preview (a tool with `preview:`): shown, not answered. */
  preview(m) {
    const p = m.payload || {};
    const card = el('div', { cls: 'card preview' }, el('div', { cls: 'title', text: `Preview: ${m.component_type} (${m.tool_name})` }));
    if (typeof p.description === 'string') card.append(el('div', { cls: 'description', text: p.description }));
    card.append(el('pre', { text: JSON.stringify(p, null, 2) }));
    this.cards.set(m.corr, card);
    this.add(el('li', {}, card));
  }

  /** A template widget (seed 004): answers are {answer} or {skip: true}. */
  widget(m, reply) {
    const p = m.payload || {};
    const cfg = p.widget_config || {};
    const card = el('div', { cls: 'card widget' }, el('div', { cls: 'title', text: p.stem ?? '' }));
    card.dataset.widget = p.widget_type;
    // The file it shows (a worksheet, a chart), named by id.
    const f = p.file;
    if (typeof f?.file_id === 'string') {
      card.append(fileList([{ file_id: f.file_id, name: String(f.name ?? 'file'), media_type: String(f.media_type ?? '') }]));
    }
    const send = (label, data) => {
      const b = el('button', { text: label });
      b.onclick = () => reply(data);
      return b;
    };
    if (p.widget_type === 'multiple_choice' && cfg.allow_multiple) {
      const boxes = (p.options || []).map((o) => {
        const box = el('input', { attrs: { type: 'checkbox', value: String(o), 'aria-label': String(o) } });
        card.append(el('label', {}, box, document.createTextNode(` ${o}`)));
        return box;
      });
      const submit = el('button', { text: 'Submit' });
      submit.onclick = () => reply({ answer: boxes.filter((b) => b.checked).map((b) => b.value) });
      card.append(submit);
    } else if (p.widget_type === 'multiple_choice') {
      for (const o of p.options || []) card.append(send(String(o), { answer: o }));
    } else {
      // free_text and code_editor: a text area.
      const area = el('textarea', { attrs: { 'aria-label': 'answer', rows: p.widget_type === 'code_editor' ? '8' : '3' } });
      if (cfg.placeholder) area.placeholder = cfg.placeholder;
      if (cfg.max_length) area.maxLength = cfg.max_length;
      if (p.widget_type === 'code_editor') {
        area.classList.add('code');
        card.append(el('div', { cls: 'note', text: cfg.language ? `language: ${cfg.language}` : 'code' }));
      }
      const submit = el('button', { text: 'Send' });
      submit.onclick = () => reply({ answer: area.value });
      card.append(area, submit);
    }
    if (p.skippable || p.required === false) card.append(send('Skip', { skip: true }));
    if (!m.awaiting_response) card.querySelectorAll('button, input, textarea').forEach((x) => (x.disabled = true));
    this.cards.set(m.corr, card);
    this.add(el('li', {}, card));
  }
}

/** Whether a tool call is a group's handoff (its answer names whom to). */
function isHandoff(name) {
  return name === 'handoff_to' || String(name).startsWith('transfer_to_');
}

/** A colour from a name's hash, for speakers of no known group. */
// ----- files ----------------------------------------------------------------

const IMAGE = /^image\/(png|jpeg|gif|webp)$/;

/**
 * A chat's file as a blob URL (fetched with the token: an <img> cannot send
 * it). Only an image keeps its type: anything else is bytes to save, so a
 * blob opened in a tab of the page's origin is never a page (HTML, SVG, XML).
 */
const blobs = new Map();
function fileBlob(fileId) {
  if (!blobs.has(fileId)) {
    const url = client.fetchFile(fileId).then((b) => URL.createObjectURL(
      IMAGE.test(b.type) ? b : new Blob([b], { type: 'application/octet-stream' })));
    // A failure is not kept: the next click asks again.
    url.catch(() => blobs.delete(fileId));
    blobs.set(fileId, url);
  }
  return blobs.get(fileId);
}

/** Files a message or a tool holds: a thumbnail for an image, and a download link for each. */
function fileList(files) {
  return el('ul', { cls: 'files' }, ...files.map((f) => {
    const li = el('li', { attrs: { 'data-file': f.file_id } });
    if (IMAGE.test(f.media_type)) {
      const img = el('img', { cls: 'thumb', attrs: { alt: f.name } });
      fileBlob(f.file_id).then((url) => { img.src = url; }).catch(() => img.replaceWith(el('span', { cls: 'error', text: 'unavailable' })));
      li.append(img);
    }
    const link = el('a', { cls: 'download', text: f.name, attrs: { href: '#', download: f.name, 'aria-label': `download ${f.name}` } });
    link.onclick = async (e) => {
      if (link.dataset.ready) return;
      e.preventDefault();
      try {
        link.href = await fileBlob(f.file_id);
      } catch {
        link.after(el('span', { cls: 'error', text: ' unavailable' }));
        return;
      }
      link.dataset.ready = '1';
      link.click();
    };
    li.append(link);
    return li;
  }));
}

/** Files chosen, dropped or pasted, waiting for the next message. */
const pending = [];
function addFiles(files) {
  for (const file of files) {
    const shown = el('li', {}, IMAGE.test(file.type) ? el('img', { cls: 'thumb', attrs: { alt: file.name, src: URL.createObjectURL(file) } }) : null,
      el('span', { text: file.name || 'pasted' }));
    const remove = el('button', { text: '×', attrs: { type: 'button', 'aria-label': `remove ${file.name}` } });
    const entry = { file, shown };
    remove.onclick = () => { pending.splice(pending.indexOf(entry), 1); shown.remove(); };
    shown.append(remove);
    pending.push(entry);
    $('pending').append(shown);
  }
}
$('attach').onclick = () => $('attach-input').click();
$('attach-input').onchange = (e) => { addFiles(e.target.files); e.target.value = ''; };
$('text').addEventListener('paste', (e) => {
  const files = [...(e.clipboardData?.files || [])];
  if (files.length) { e.preventDefault(); addFiles(files); }
});
for (const [type, on] of [['dragenter', true], ['dragover', true], ['dragleave', false], ['drop', false]]) {
  $('chat').addEventListener(type, (e) => {
    if (!current || !e.dataTransfer?.types.includes('Files')) return;
    e.preventDefault();
    $('chat').classList.toggle('dropping', on);
    if (type === 'drop') addFiles(e.dataTransfer.files);
  });
}

function colour(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.codePointAt(0)) % 360;
  return `hsl(${h}, 55%, 38%)`;
}

// ----- model output: markdown, SQL results, charts ----------------------------------

/** Markdown with any raw HTML shown as text; the result sanitized again. */
const markdown = window.marked
  ? new window.marked.Marked({
    gfm: true,
    breaks: true,
    renderer: { html: ({ text }) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;') },
  })
  : null;

/** Model text into `el`: markdown when the libraries loaded, plain text otherwise. */
function renderMarkdown(el, text) {
  if (!markdown || !window.DOMPurify) {
    el.textContent = text;
    return;
  }
  el.innerHTML = window.DOMPurify.sanitize(markdown.parse(text).trim(), {
    FORBID_TAGS: ['img', 'style', 'form', 'input', 'button', 'iframe'],
    ALLOWED_URI_REGEXP: /^https?:/i,
  });
  for (const a of el.querySelectorAll('a')) {
    a.rel = 'noopener noreferrer';
    a.target = '_blank';
  }
  el.classList.add('markdown');
}

/** A query's `{sql?, columns, rows, truncated?}` as elements: the SQL, a table, the cut. */
function resultTable(r) {
  const out = [];
  if (typeof r.sql === 'string') out.push(el('pre', { cls: 'sql', text: r.sql }));
  const head = el('tr', {}, ...r.columns.map((c) => el('th', { text: String(c) })));
  const cell = (v) => el('td', { text: v === null ? 'NULL' : typeof v === 'object' ? JSON.stringify(v) : String(v) });
  const body = r.rows.slice(0, 200).map((row) => el('tr', {}, ...row.map(cell)));
  out.push(el('table', { cls: 'result' }, el('thead', {}, head), el('tbody', {}, ...body)));
  if (r.truncated) out.push(el('div', { cls: 'note', text: r.truncated }));
  return out;
}

/** The most a chart's frame grows to, in pixels, whatever it asks. */
const CHART_MAX = { width: 2000, height: 2000 };
/** How long a chart may take to draw before its frame is removed. */
const CHART_TIMEOUT_MS = 20000;

/** Draws a Vega-Lite spec (text or object) in `card`, in a sandboxed frame of its own (`chart-frame.js`). */
function chart(card, spec) {
  const box = el('div', { cls: 'chart' });
  card.append(box);
  drawChart(box, spec, { timeoutMs: CHART_TIMEOUT_MS, max: CHART_MAX });
}

function show(chat, agent) {
  if (current) current.view.close();
  $('log').replaceChildren();
  $('run').textContent = '';
  $('empty').hidden = true;
  $('composer').hidden = false;
  current = { chat, view: new ChatView(chat, agent) };
  for (const li of $('chats').children) li.classList.toggle('current', li.dataset.id === chat.id);
}

/** Leaves the chat on screen (it was deleted): the page is as at its start. */
function leave() {
  current.view.close();
  client.closeChat(current.chat.id);
  current = null;
  $('log').replaceChildren();
  $('run').textContent = '';
  $('empty').hidden = false;
  $('composer').hidden = true;
}

function open(chatId, agent) {
  // A fresh replay from the start, into an empty log.
  client.closeChat(chatId);
  show(client.openChat(chatId), agent);
}

/** Sends what was typed; while the agent works, by `strategy`. */
async function send(strategy) {
  const text = $('text').value.trim();
  if ((!text && !pending.length) || !current) return;
  const { chat, view } = current;
  const files = pending.splice(0);
  $('text').value = '';
  $('pending').replaceChildren();
  try {
    // Each file to the chat first, then the message naming them.
    const stored = [];
    for (const { file } of files) stored.push(await chat.upload(file, { name: file.name || 'pasted' }));
    chat.sendMessage(text, { multitaskStrategy: strategy, attachments: stored });
  } catch (e) {
    view.add(el('li', { cls: 'note error', text: `${e.code ?? 'error'}: ${e.message}` }));
    $('text').value = text;
    for (const entry of files) { pending.push(entry); $('pending').append(entry.shown); }
  }
}
$('composer').onsubmit = (e) => {
  e.preventDefault();
  // Typed while the agent works: it runs next (the page shows it queued).
  send('enqueue');
};
// Stops the answer being written (kept as far as it went) and runs this now.
$('now').onclick = () => send('interrupt');
$('text').onkeydown = (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
};
$('cancel').onclick = () => current && current.chat.cancel();

// ----- agents and chats -----------------------------------------------------------

// One's chats: pinned first, then the latest; a search by title and words;
// rename, pin, archive (and restore), export and delete in each row.
const listing = { q: '', archived: false, timer: 0, asked: 0 };

async function loadChats() {
  const q = listing.q.trim() ? `&q=${encodeURIComponent(listing.q)}` : '';
  // Only the latest question's answer is shown (an older one may come later).
  const asked = ++listing.asked;
  const { chats } = await api(`/v1/chats?limit=50&archived=${listing.archived}${q}`);
  if (asked !== listing.asked) return;
  $('chats').replaceChildren(...chats.map(chatRow));
  if (!chats.length) $('chats').append(el('li', { cls: 'note', text: q ? 'nothing found' : 'no chats yet' }));
}

/** Reads the list again soon (a title came, a chat changed). */
function chatsChanged(after = 150) {
  clearTimeout(listing.timer);
  listing.timer = setTimeout(() => loadChats().catch((e) => console.error(e)), after);
}

function chatRow(c) {
  const title = el('span', { cls: 'title', text: `${c.pinned ? '📌 ' : ''}${c.title ?? 'New chat'}` });
  // A search's snippet: plain-text pieces, the matching words marked.
  const detail = c.match
    ? el('span', { cls: 'snippet' }, ...c.match.snippet.map((s) => el(s.hit ? 'mark' : 'span', { text: s.text })))
    : el('span', { cls: 'snippet', text: c.preview ?? '' });
  const when = el('small', { text: `${c.agent} · ${new Date(c.last_activity_at).toLocaleString()}` });
  const act = (label, run) => {
    const b = el('button', { text: label, attrs: { type: 'button', 'data-act': label.toLowerCase() } });
    b.onclick = async (e) => {
      e.stopPropagation();
      try {
        await run();
      } catch (err) {
        alert(err.message);
      }
      chatsChanged(0);
    };
    return b;
  };
  const patch = (body) => api(`/v1/chats/${c.id}`, { method: 'PATCH', body: JSON.stringify(body) });
  const actions = el('span', { cls: 'actions' },
    act('Rename', async () => {
      const name = prompt('Rename the chat', c.title ?? '');
      if (name && name.trim()) await patch({ title: name });
    }),
    act(c.pinned ? 'Unpin' : 'Pin', () => patch({ pinned: !c.pinned })),
    act(c.archived ? 'Restore' : 'Archive', () => patch({ archived: !c.archived })),
    act('Export', () => exportChat(c)),
    act('Delete', async () => {
      if (!confirm(`Delete “${c.title ?? 'New chat'}” for good? Its messages cannot be brought back.`)) return;
      await api(`/v1/chats/${c.id}?purge=true`, { method: 'DELETE' });
      if (current && current.chat.id === c.id) leave();
    }));
  const li = el('li', { attrs: { 'data-id': c.id } }, title, detail, when, actions);
  li.onclick = () => open(c.id, c.agent);
  if (current && current.chat.id === c.id) li.classList.add('current');
  return li;
}

/** The conversation as Markdown, downloaded (fetched with the token). */
async function exportChat(c) {
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  const r = await fetch(`/v1/chats/${c.id}/export?format=markdown`, { headers });
  if (!r.ok) throw new Error(`export: HTTP ${r.status}`);
  const url = URL.createObjectURL(await r.blob());
  const a = el('a', { attrs: { href: url, download: `chat-${c.id}.md` } });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

$('chat-search').oninput = (e) => {
  listing.q = e.target.value;
  chatsChanged(200);
};
$('chat-archived').onchange = (e) => {
  listing.archived = e.target.checked;
  chatsChanged(0);
};

async function loadAgents() {
  const { agents } = await api('/v1/agents');
  for (const a of agents) if (a.members) groups.set(a.id, a.members.map((m) => m.name));
  $('agents').replaceChildren(
    ...agents.map((a) => {
      const tile = el('button', { cls: 'tile', attrs: { 'data-agent': a.id } }, el('b', { text: a.name }), el('small', { text: a.description }),
        a.members ? el('small', { cls: 'members', text: a.members.map((m) => m.name).join(' · ') }) : null);
      tile.onclick = async () => {
        show(client.startChat({ agent: a.id }), a.id);
        setTimeout(loadChats, 300);
        $('text').focus();
      };
      return tile;
    }),
  );
}

// ----- workflows (seed 002): a picker by category, a form from each schema ------

async function loadWorkflows() {
  const { workflows } = await api('/v1/workflows');
  const byCategory = new Map();
  for (const w of workflows) {
    if (!byCategory.has(w.category)) byCategory.set(w.category, []);
    byCategory.get(w.category).push(w);
  }
  $('workflows').replaceChildren(
    ...[...byCategory.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([category, list]) => {
      const group = el('div', { cls: 'category', attrs: { 'data-category': category } }, el('h3', { text: category }));
      for (const w of list) {
        const b = el('button', { cls: 'tile', attrs: { 'data-workflow': w.id, title: w.description } }, el('b', { text: w.title }), el('small', { text: w.description }));
        b.onclick = () => showForm(w);
        group.append(b);
      }
      return group;
    }),
  );
  if (!workflows.length) $('workflows').append(el('div', { cls: 'note', text: 'none (add files to the agents folder\'s workflows/)' }));
}

/** One input for a property of a parameters schema. */
function field(name, prop, required) {
  const label = `${prop.title || name}${required ? ' *' : ''}`;
  let input;
  if (Array.isArray(prop.enum)) {
    input = el('select', { attrs: { name } }, ...(required ? [] : [el('option', { text: '', attrs: { value: '' } })]),
      ...prop.enum.map((v) => el('option', { text: String(v), attrs: { value: JSON.stringify(v) } })));
  } else if (prop.type === 'boolean') {
    input = el('input', { attrs: { name, type: 'checkbox' } });
  } else if (prop.type === 'integer' || prop.type === 'number') {
    input = el('input', { attrs: { name, type: 'number', step: prop.type === 'integer' ? '1' : 'any' } });
    if (prop.minimum !== undefined) input.min = prop.minimum;
    if (prop.maximum !== undefined) input.max = prop.maximum;
  } else {
    input = el('input', { attrs: { name, type: 'text' } });
    if (prop.maxLength) input.maxLength = prop.maxLength;
  }
  if (required && prop.type !== 'boolean') input.required = true;
  if (prop.default !== undefined) {
    if (prop.type === 'boolean') input.checked = prop.default === true;
    else if (Array.isArray(prop.enum)) input.value = JSON.stringify(prop.default);
    else input.value = prop.default;
  }
  input.dataset.type = prop.type || 'string';
  input.dataset.enum = Array.isArray(prop.enum) ? 'yes' : '';
  return el('label', { cls: 'field' }, el('span', { text: label }), input);
}

/** The form of workflow `w`, above the composer; it runs in the open chat. */
function showForm(w) {
  const form = $('workflow-form');
  const schema = w.parameters || {};
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties || {}).map(([name, prop]) => field(name, prop, required.has(name)));
  const error = el('div', { cls: 'note error' });
  const run = el('button', { text: `Run ${w.title}`, attrs: { type: 'submit' } });
  const close = el('button', { text: 'Close', attrs: { type: 'button' } });
  close.onclick = () => { form.hidden = true; };
  form.replaceChildren(el('div', { cls: 'title', text: `${w.title} (${w.category})` }),
    el('div', { cls: 'description', text: w.description }), ...fields, error, run, close);
  form.dataset.workflow = w.id;
  form.hidden = false;
  form.onsubmit = async (e) => {
    e.preventDefault();
    if (!current) {
      error.textContent = 'open or start a chat first';
      return;
    }
    const parameters = {};
    for (const input of form.querySelectorAll('[name]')) {
      const { type } = input.dataset;
      if (type === 'boolean') parameters[input.name] = input.checked;
      else if (input.value === '') continue;
      else if (input.dataset.enum) parameters[input.name] = JSON.parse(input.value);
      else if (type === 'integer' || type === 'number') parameters[input.name] = Number(input.value);
      else parameters[input.name] = input.value;
    }
    try {
      const r = await fetch(`/v1/chats/${current.chat.id}/workflows/${encodeURIComponent(w.id)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ parameters }),
      });
      if (!r.ok) {
        const body = await r.json().catch(() => ({}));
        error.textContent = body.error ? `${body.error.code}: ${body.error.message}` : `HTTP ${r.status}`;
        return;
      }
      error.textContent = '';
      form.hidden = true;
    } catch (err) {
      error.textContent = String(err);
    }
  };
}

loadAgents().catch((e) => console.error(e));
loadChats().catch((e) => console.error(e));
loadWorkflows().catch((e) => console.error(e));
