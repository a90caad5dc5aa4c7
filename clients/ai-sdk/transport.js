// @ts-check
/**
 * Options for the Vercel AI SDK's `DefaultChatTransport` against agentwire
 * (`new DefaultChatTransport(agentwireTransport({ baseUrl, agent, token }))`):
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
    prepareSendMessagesRequest({ id, messages, trigger, messageId, body }) {
      const edit = trigger === 'submit-message' && messageId !== undefined;
      return {
        headers: all,
        body: {
          ...body,
          id,
          trigger,
          ...(messageId !== undefined ? { messageId } : {}),
          ...(agent ? { agent } : {}),
          messages: edit ? messages : messages.slice(-1),
        },
      };
    },
    /** @param {{ id: string }} request */
    prepareReconnectToStreamRequest({ id }) {
      return { api: `${api}/${encodeURIComponent(id)}/stream`, headers: all };
    },
  };
}
