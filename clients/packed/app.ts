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
