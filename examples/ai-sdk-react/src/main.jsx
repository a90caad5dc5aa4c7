// A chat on the AI SDK's useChat against agentwire: streamed answers, tool
// calls, approvals, input requests and UI tools, and a resume after a reload
// (the chat's id stays in the address, so a reload picks the run up again).
import { useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  WebSocketChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { useMemo, useState } from 'react';
import { createRoot } from 'react-dom/client';

const params = new URLSearchParams(location.search);
const server = params.get('server') ?? 'http://127.0.0.1:8080';
const agent = params.get('agent') ?? 'demo';
const chatId = params.get('chat') ?? crypto.randomUUID();
if (!params.has('chat')) {
  params.set('chat', chatId);
  history.replaceState(null, '', `?${params}`);
}

function makeTransport(kind) {
  return kind === 'ws'
    ? new WebSocketChatTransport({ url: `${server.replace(/^http/, 'ws')}/v1/ai-sdk/ws`, body: { agent } })
    : new DefaultChatTransport({ api: `${server}/v1/ai-sdk/chat`, body: { agent } });
}

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

function Chat() {
  const [kind, setKind] = useState(params.get('transport') ?? 'http');
  const transport = useMemo(() => makeTransport(kind), [kind]);
  const { messages, sendMessage, status, error, stop, addToolApprovalResponse, addToolOutput } = useChat({
    id: chatId,
    transport,
    resume: true,
    // An answer given in the page (an approval, an input, a component's
    // result) goes to the server at once.
    sendAutomaticallyWhen: (options) =>
      lastAssistantMessageIsCompleteWithApprovalResponses(options) ||
      lastAssistantMessageIsCompleteWithToolCalls(options),
  });
  const [text, setText] = useState('');
  return (
    <>
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
    </>
  );
}

createRoot(document.getElementById('root')).render(<Chat />);
