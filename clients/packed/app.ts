// A user's code against the installed package's types: every call here
// must type-check (tsc --noEmit, strict), and misuse must not (each line
// marked as an expected error fails the check if the types stop catching it).
import { AgentwireClient, PROTOCOL, type Envelope, type ConnectionError, type StoredFile } from '@agentwire/client';
import { Tree } from '@agentwire/client/tree';

const version: 1 = PROTOCOL;

export function follow(url: string, token?: string): AgentwireClient {
  const client = new AgentwireClient(url, { token, storage: null, initialBackoffMs: 100 });
  client.on('state', (state: string) => console.log('state', state, version));
  const chat = client.startChat({ agent: 'demo', message: 'hello' });
  chat.on('envelope', (m: Envelope) => {
    if (m.type === 'chat.input_request') chat.submitInput(String(m.request_id), 'Ada');
    if (m.type === 'chat.tool_call' && m.awaiting_response) chat.sendComponentResult(String(m.corr), { ok: true });
  });
  chat.on('error', (e: ConnectionError) => console.error(e.error_code, e.message));
  const id: string = chat.sendMessage('again', { multitaskStrategy: 'enqueue' });
  // @ts-expect-error: not a strategy
  chat.sendMessage('x', { multitaskStrategy: 'sometimes' });
  // @ts-expect-error: an input answer is text
  chat.submitInput('r1', 42);
  void id;
  return client;
}

export async function attach(client: AgentwireClient, chatId: string, photo: Blob): Promise<StoredFile> {
  return client.upload(chatId, photo);
}

export const tree = new Tree();

// @agentwire/react: the hook's types, and its pure fold.
import { applyEnvelopes, initialChatState, useChat, type ChatState, type UseChat } from '@agentwire/react';
import { applyFeedEvent, type ListedChat } from '@agentwire/react/chat-list';

export function render(client: AgentwireClient, chatId: string): string {
  const chat: UseChat = useChat(client, chatId);
  for (const r of chat.pendingInputs) chat.submitInput(r.requestId, "Ada");
  // @ts-expect-error: the run is idle or running, nothing else
  const done: boolean = chat.run === 'done';
  void done;
  return chat.messages.map((m) => `${m.agent}: ${m.text}`).join('\n');
}

export function fold(envelopes: Envelope[]): ChatState {
  return applyEnvelopes(initialChatState(), envelopes);
}

export const list: ListedChat[] = applyFeedEvent([], { type: 'feed.subscribed' });

// @agentwire/ai-sdk: options for the AI SDK's own transports.
import { DefaultChatTransport, WebSocketChatTransport, type UIMessage } from 'ai';
import { agentwireTransport, agentwireWebSocketTransport, PROTOCOL as AI_SDK_PROTOCOL } from '@agentwire/ai-sdk';

export const overHttp = new DefaultChatTransport<UIMessage>(agentwireTransport({ baseUrl: 'http://127.0.0.1:8080', agent: 'demo', token: 't' }));
export const overWs = new WebSocketChatTransport<UIMessage>(agentwireWebSocketTransport({ baseUrl: 'http://127.0.0.1:8080', agent: 'demo' }));
const aiSdkVersion: 1 = AI_SDK_PROTOCOL;
void aiSdkVersion;
// @ts-expect-error: the server's address is required
agentwireTransport({ agent: 'demo' });
// @ts-expect-error: a token is text
agentwireWebSocketTransport({ baseUrl: 'http://127.0.0.1:8080', token: 42 });

// @agentwire/ag-ui: an HttpAgent that rejoins by itself.
import { HttpAgent } from '@ag-ui/client';
import { AgentwireAgent } from '@agentwire/ag-ui';

export async function runTurn(token: string): Promise<number> {
  const agent = new AgentwireAgent({ url: 'http://127.0.0.1:8080/v1/ag-ui', agent: 'demo', token, maxRejoins: 3, rejoinDelayMs: 100 });
  const plain: HttpAgent = agent;
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content: 'hello' });
  const { newMessages } = await plain.runAgent({ runId: crypto.randomUUID() });
  const copy: AgentwireAgent = agent.clone();
  void copy;
  return newMessages.length;
}
// @ts-expect-error: the endpoint is required
new AgentwireAgent({ agent: 'demo' });
// @ts-expect-error: rejoins are counted
new AgentwireAgent({ url: 'x', maxRejoins: 'many' });
