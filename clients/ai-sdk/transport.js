// @ts-check
/**
 * `@agentwire/ai-sdk`: the options that point the Vercel AI SDK's own chat
 * transports (the `ai` package, as `useChat` from `@ai-sdk/react` uses them)
 * at agentwire.
 *
 * `agentwireTransport` is for `DefaultChatTransport` (HTTP + SSE,
 * `/v1/ai-sdk/chat`):
 *
 * - only the last message is sent: the server keeps the conversation and
 *   reads the last message alone (protocol/README.md, *The Vercel AI SDK*),
 *   so a long chat does not upload its whole history with every turn. An
 *   edit (`sendMessage({ text, messageId })`) sends the messages up to it,
 *   as the server finds the edited message by its place among them;
 * - the agent (`agent`), the token (`Authorization`) and the wire protocol
 *   version (`Agentwire-Protocol`) go with every request, the resume's too;
 * - the resume is the AI SDK's own (`resumeStream()`: `GET
 *   {api}/{id}/stream`), which agentwire serves from its log.
 *
 * `agentwireWebSocketTransport` is for `WebSocketChatTransport` (`ai` 7,
 * `/v1/ai-sdk/ws`): the same, with the token and the version in the
 * handshake's query (a browser's WebSocket sends no headers) and the agent
 * in each request's body.
 */

/** The wire protocol version these options speak. */
export const PROTOCOL = 1;

/**
 * @param {{ baseUrl: string, agent?: string, token?: string, headers?: Record<string, string>, fetch?: typeof fetch }} options
 */
export function agentwireTransport({ baseUrl, agent, token, headers = {}, fetch }) {
  const api = `${baseUrl.replace(/\/$/, '')}/v1/ai-sdk/chat`;
  const all = {
    ...headers,
    'agentwire-protocol': String(PROTOCOL),
    ...(token ? { authorization: `Bearer ${token}` } : {}),
  };
  return {
    api,
    headers: all,
    ...(fetch ? { fetch } : {}),
    /** @param {{ id: string, messages: any[], trigger: string, messageId?: string, body?: object }} request */
    // No `headers` returned: the transport then sends its own (`all`)
    // merged with a call's (`sendMessage(m, { headers })`).
    prepareSendMessagesRequest({ id, messages, trigger, messageId, body }) {
      return {
        body: {
          ...body,
          id,
          trigger,
          ...(messageId !== undefined ? { messageId } : {}),
          ...(agent ? { agent } : {}),
          messages: toSend(messages, trigger, messageId),
        },
      };
    },
    /** @param {{ id: string }} request */
    prepareReconnectToStreamRequest({ id }) {
      return { api: `${api}/${encodeURIComponent(id)}/stream` };
    },
  };
}

/**
 * The last message alone, or the messages up to an edited one. An edit is a
 * user's message sent again with its id (`sendMessage({ text, messageId })`);
 * an answer in the page (an approval, a tool's output) also names a message,
 * the assistant's it completes, and that one goes up alone.
 * @param {any[]} messages @param {string} trigger @param {string | undefined} messageId
 */
function toSend(messages, trigger, messageId) {
  const last = messages.at(-1);
  const edit = trigger === 'submit-message' && messageId !== undefined && last?.role === 'user' && last.id === messageId;
  return edit ? messages : messages.slice(-1);
}

/**
 * @param {{ baseUrl: string, agent?: string, token?: string }} options
 */
export function agentwireWebSocketTransport({ baseUrl, agent, token }) {
  const url = `${baseUrl.replace(/\/$/, '').replace(/^http/, 'ws')}/v1/ai-sdk/ws`;
  return {
    url,
    params: { protocol: String(PROTOCOL), ...(token ? { access_token: token } : {}) },
    ...(agent ? { body: { agent } } : {}),
    /** @param {{ messages: any[], trigger: string, messageId?: string, body: object }} request */
    prepareSendMessagesRequest({ messages, trigger, messageId, body }) {
      return { messages: toSend(messages, trigger, messageId), body };
    },
  };
}
