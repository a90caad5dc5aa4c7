import type { HttpChatTransportInitOptions, UIMessage, WebSocketChatTransportInitOptions } from 'ai';

/** The agentwire wire protocol version these options speak. */
export declare const PROTOCOL: 1;

/** Where the chat is and who asks. */
export interface AgentwireTransportOptions {
  /** The server's address, `https://agentwire.example.com`. */
  baseUrl: string;
  /** The agent of a new chat (the server's default when unset). */
  agent?: string;
  /** A bearer token, in `jwt` or `oidc` auth mode. */
  token?: string;
  /** More headers for every request. */
  headers?: Record<string, string>;
  /** A fetch of one's own (a test's, a proxy's). */
  fetch?: typeof fetch;
}

/** The options of a `WebSocketChatTransport` (`ai` 7). */
export interface AgentwireWebSocketOptions {
  /** The server's address; `http(s)` becomes `ws(s)`. */
  baseUrl: string;
  /** The agent of a new chat (the server's default when unset). */
  agent?: string;
  /** A bearer token, sent as `?access_token=` at the handshake. */
  token?: string;
}

/**
 * Options for `new DefaultChatTransport(…)`: only the last message goes up
 * (an edit sends the messages up to it); the agent, token and protocol
 * version go with every request; `resumeStream()` reads the run from
 * agentwire's log.
 */
export declare function agentwireTransport<UI_MESSAGE extends UIMessage = UIMessage>(
  options: AgentwireTransportOptions,
): HttpChatTransportInitOptions<UI_MESSAGE>;

/**
 * Options for `new WebSocketChatTransport(…)`: one socket for many chats,
 * the token and version in the handshake's query, only the last message up.
 */
export declare function agentwireWebSocketTransport<UI_MESSAGE extends UIMessage = UIMessage>(
  options: AgentwireWebSocketOptions,
): WebSocketChatTransportInitOptions<UI_MESSAGE>;
