// A chat on @agentwire/react's useChat over @agentwire/client: streamed
// answers, input requests answered in the page, cancel, and a reload (or a
// dropped connection) that picks the chat up again — every word once. The
// chat's id stays in the address.
import { AgentwireClient } from '@agentwire/client';
import { useChat } from '@agentwire/react';
import { useState } from 'react';
import { createRoot } from 'react-dom/client';

const params = new URLSearchParams(location.search);
const server = params.get('server') ?? 'http://127.0.0.1:8080';
const agent = params.get('agent') ?? 'demo';

// One client (one WebSocket) for the page. In jwt mode the token comes in
// the address's fragment (`#token=…`), which no server sees, and leaves it
// at once, so it stays out of the history too.
const token = new URLSearchParams(location.hash.slice(1)).get('token') ?? undefined;
if (token) history.replaceState(null, '', `${location.pathname}${location.search}`);
const client = new AgentwireClient(`${server.replace(/^http/, 'ws')}/v1/ws`, { token });

function InputRequest({ request, submit }) {
  const [answer, setAnswer] = useState('');
  return (
    <form className="input" onSubmit={(e) => { e.preventDefault(); submit(request.requestId, answer); }}>
      <label>
        {request.prompt}{' '}
        <input type={request.password ? 'password' : 'text'} value={answer} onChange={(e) => setAnswer(e.target.value)} />
      </label>
      <button>Answer</button>
    </form>
  );
}

function Chat({ chatId, start }) {
  const { messages, pendingInputs, run, connection, errors, send, submitInput, cancel } = useChat(client, chatId);
  const [text, setText] = useState('');
  const submit = (e) => {
    e.preventDefault();
    if (!text.trim()) return;
    if (chatId) send(text);
    else start(text);
    setText('');
  };
  return (
    <main>
      <header>
        {chatId ? <>Chat <code>{chatId}</code></> : 'A new chat'} with <b>{agent}</b> — <span data-connection={connection}>{connection}</span>, <span data-run={run}>{run}</span>
      </header>
      {messages.map((m) => (
        <div key={m.seq} className={`msg ${m.role}${m.streaming ? ' streaming' : ''}`} data-seq={m.seq}>
          {m.text}
        </div>
      ))}
      {pendingInputs.map((r) => <InputRequest key={r.requestId} request={r} submit={submitInput} />)}
      {errors.map((e, i) => <p key={i} role="alert">{e.code}: {e.message}</p>)}
      <form className="composer" onSubmit={submit}>
        <input name="text" value={text} onChange={(e) => setText(e.target.value)} placeholder="Say anything, or try slow: 200, ask: Your name?" />
        <button>Send</button>
        {run === 'running' && <button type="button" onClick={cancel}>Stop</button>}
      </form>
    </main>
  );
}

function App() {
  const [chatId, setChatId] = useState(params.get('chat'));
  // The first message starts the chat; its id goes in the address, so a
  // reload opens the same chat and replays it.
  const start = (text) => {
    const chat = client.startChat({ agent, message: text });
    params.set('chat', chat.id);
    history.replaceState(null, '', `?${params}`);
    setChatId(chat.id);
  };
  return <Chat chatId={chatId} start={start} />;
}

createRoot(document.getElementById('root')).render(<App />);
