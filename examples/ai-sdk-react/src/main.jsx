// A chat on the AI SDK's useChat against agentwire: the conversation loaded
// whole on mount, streamed answers, tool calls, approvals, input requests and
// UI tools, a resume after a reload (the chat's id stays in the address), and
// the list of one's chats beside it: titles, search, rename, pin, archive.
import { useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  WebSocketChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { agentwireTransport, agentwireWebSocketTransport } from '@agentwire/ai-sdk';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';

const params = new URLSearchParams(location.search);
const server = params.get('server') ?? 'http://127.0.0.1:8080';
const agent = params.get('agent') ?? 'demo';
const chatId = params.get('chat') ?? crypto.randomUUID();
if (!params.has('chat')) {
  params.set('chat', chatId);
  history.replaceState(null, '', `?${params}`);
}

const api = async (path, init = {}) => {
  const r = await fetch(`${server}${path}`, { ...init, headers: { 'content-type': 'application/json', ...init.headers } });
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
  return r.json();
};
// The conversation so far: the active path as UIMessages.
const loadMessages = (id) => api(`/v1/ai-sdk/chat/${encodeURIComponent(id)}/messages`);

// @agentwire/ai-sdk's options: only the last message goes up, the agent and
// the protocol version with every request (and `token` in jwt mode, which
// this page, on a server without sign-in, does not pass).
function makeTransport(kind) {
  return kind === 'ws'
    ? new WebSocketChatTransport(agentwireWebSocketTransport({ baseUrl: server, agent }))
    : new DefaultChatTransport(agentwireTransport({ baseUrl: server, agent }));
}

const openChat = (id) => {
  params.set('chat', id);
  location.search = `?${params}`;
};

// A tool part: `tool-<name>` for a tool of the agent's file, `dynamic-tool`
// for one known only when called (an MCP server's).
const isTool = (p) => p.type === 'dynamic-tool' || p.type.startsWith('tool-');
const toolName = (p) => p.toolName ?? p.type.slice('tool-'.length);

function Tool({ part, addToolApprovalResponse, addToolOutput }) {
  const [answer, setAnswer] = useState('');
  const meta = part.toolMetadata ?? {};
  if (part.state === 'approval-requested') {
    return (
      <div className="tool">
        Run <b>{toolName(part)}</b> with <code>{JSON.stringify(part.input)}</code>?{' '}
        <button onClick={() => addToolApprovalResponse({ id: part.approval.id, approved: true })}>Approve</button>{' '}
        <button onClick={() => addToolApprovalResponse({ id: part.approval.id, approved: false, reason: 'refused' })}>Refuse</button>
      </div>
    );
  }
  if (part.state === 'input-available' && (meta.input_request || meta.component_type)) {
    const submit = (e) => {
      e.preventDefault();
      const output = meta.input_request ? answer : { value: answer };
      addToolOutput({ tool: toolName(part), toolCallId: part.toolCallId, output });
    };
    return (
      <form className="tool" onSubmit={submit}>
        {meta.input_request ? part.input.prompt : `${meta.component_type}:`}
        <input type={part.input.password ? 'password' : 'text'} value={answer} onChange={(e) => setAnswer(e.target.value)} />
        <button>Send</button>
      </form>
    );
  }
  return (
    <div className="tool">
      {toolName(part)}: {part.state}
      {part.output !== undefined && <pre>{JSON.stringify(part.output)}</pre>}
      {part.errorText && <pre>{part.errorText}</pre>}
    </div>
  );
}

// One's chats: pinned first, then the latest; a search by title and words.
function Sidebar({ refresh }) {
  const [chats, setChats] = useState([]);
  const [query, setQuery] = useState('');
  const [archived, setArchived] = useState(false);
  const [error, setError] = useState(null);
  const asked = useRef(0);
  const load = useCallback(async () => {
    // Only the latest question's answer is shown (an older one may come later).
    const mine = ++asked.current;
    try {
      const q = query.trim() ? `&q=${encodeURIComponent(query)}` : '';
      const { chats: found } = await api(`/v1/chats?limit=50&archived=${archived}${q}`);
      if (mine === asked.current) {
        setChats(found);
        setError(null);
      }
    } catch (e) {
      if (mine === asked.current) setError(e.message);
    }
  }, [query, archived]);
  // Typing: asked once the keys pause.
  useEffect(() => {
    const later = setTimeout(load, 150);
    return () => clearTimeout(later);
  }, [load, refresh]);
  const change = async (id, body) => {
    await api(`/v1/chats/${id}`, { method: 'PATCH', body: JSON.stringify(body) });
    load();
  };
  const rename = (c) => {
    const title = prompt('Rename the chat', c.title ?? '');
    if (title?.trim()) change(c.id, { title });
  };
  return (
    <nav aria-label="Chats">
      <button onClick={() => openChat(crypto.randomUUID())}>New chat</button>
      <input type="search" aria-label="Search chats" placeholder="Search" value={query} onChange={(e) => setQuery(e.target.value)} />
      <label><input type="checkbox" checked={archived} onChange={(e) => setArchived(e.target.checked)} /> Archived</label>
      {error && <p role="alert">{error}</p>}
      <ul>
        {chats.map((c) => (
          <li key={c.id} className={c.id === chatId ? 'current' : ''} data-chat={c.id}>
            <a href={`?${new URLSearchParams({ ...Object.fromEntries(params), chat: c.id })}`} className="title">
              {c.pinned ? '📌 ' : ''}{c.title ?? 'New chat'}
            </a>
            <div className="preview">
              {c.match
                ? c.match.snippet.map((s, i) => (s.hit ? <mark key={i}>{s.text}</mark> : <span key={i}>{s.text}</span>))
                : c.preview}
            </div>
            <button onClick={() => rename(c)}>Rename</button>
            <button onClick={() => change(c.id, { pinned: !c.pinned })}>{c.pinned ? 'Unpin' : 'Pin'}</button>
            <button onClick={() => change(c.id, { archived: !c.archived })}>{c.archived ? 'Restore' : 'Archive'}</button>
          </li>
        ))}
      </ul>
    </nav>
  );
}

function Chat({ initial, onSettled }) {
  const [kind, setKind] = useState(params.get('transport') ?? 'http');
  const transport = useMemo(() => makeTransport(kind), [kind]);
  const { messages, setMessages, sendMessage, status, error, stop, resumeStream, addToolApprovalResponse, addToolOutput } = useChat({
    id: chatId,
    messages: initial,
    transport,
    // An answer given in the page (an approval, an input, a component's
    // result) goes to the server at once.
    sendAutomaticallyWhen: (options) =>
      lastAssistantMessageIsCompleteWithApprovalResponses(options) ||
      lastAssistantMessageIsCompleteWithToolCalls(options),
  });
  const shown = useRef(messages);
  shown.current = messages;
  // After a reload: the run in flight, replayed from its start. Nothing in
  // flight any more (it ended while the page loaded): the messages again.
  useEffect(() => {
    let gone = false;
    (async () => {
      const before = shown.current.length;
      await resumeStream();
      if (!gone && shown.current.length === before) setMessages(await loadMessages(chatId));
    })();
    return () => { gone = true; };
  }, []);
  // A finished turn may have titled the chat: the list reads it again.
  useEffect(() => {
    if (status !== 'ready') return undefined;
    onSettled();
    const later = setTimeout(onSettled, 1500);
    return () => clearTimeout(later);
  }, [status]);
  const [text, setText] = useState('');
  return (
    <main>
      <p>
        Chat <code>{chatId}</code> on {server} ({status}) —{' '}
        <select value={kind} onChange={(e) => setKind(e.target.value)}>
          <option value="http">HTTP</option>
          <option value="ws">WebSocket</option>
        </select>
      </p>
      {messages.map((m) => (
        <div key={m.id} className={`msg ${m.role}`}>
          {m.parts.map((p, i) =>
            p.type === 'text' ? <span key={i}>{p.text}</span>
              : isTool(p) ? (
                <Tool key={p.toolCallId} part={p} addToolApprovalResponse={addToolApprovalResponse} addToolOutput={addToolOutput} />
              ) : null)}
        </div>
      ))}
      {error && <p role="alert">{error.message}</p>}
      <form onSubmit={(e) => { e.preventDefault(); sendMessage({ text }); setText(''); }}>
        <input name="text" value={text} onChange={(e) => setText(e.target.value)} placeholder="Say anything, or try slow: 200, ask: Your name?, ui: picker" />
        <button disabled={status === 'streaming' || status === 'submitted'}>Send</button>
        {status === 'streaming' && <button type="button" onClick={stop}>Stop</button>}
      </form>
    </main>
  );
}

function App({ initial }) {
  const [refresh, setRefresh] = useState(0);
  const settled = useCallback(() => setRefresh((n) => n + 1), []);
  return (
    <div className="app">
      <Sidebar refresh={refresh} />
      <Chat initial={initial} onSettled={settled} />
    </div>
  );
}

const initial = await loadMessages(chatId).catch(() => []);
createRoot(document.getElementById('root')).render(<App initial={initial} />);
