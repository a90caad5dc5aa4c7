// Types of @agentwire/client (agentwire.js). Hand-written; keep in step.

export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'resumed' | 'closed';

/** The wire protocol version this client speaks (sent as `protocol` on the
 * WebSocket URL; a server of another version: an `error` with
 * `error_code: 'PROTOCOL_MISMATCH'`, and the client stops). */
export const PROTOCOL: 1;

/** A chat-scoped envelope of the log (see protocol/outbound/ for every type). */
export interface Envelope {
  type: string;
  chat_id: string;
  seq: number;
  ts: string;
  replay?: boolean;
  [field: string]: unknown;
}

/** A `chat.error` about one connection's message (no seq), or the
 * client's own `PROTOCOL_MISMATCH`. */
export interface ConnectionError {
  type: 'chat.error';
  chat_id?: string | null;
  message: string;
  error_code: string;
  details?: unknown;
  recoverable: boolean;
}

export interface ClientOptions {
  /** Bearer token, sent as `access_token`. */
  token?: string;
  /** Where the last seq per chat is kept; `null` keeps it in memory only. */
  storage?: Storage | null;
  /** The WebSocket constructor [default: the global one]. */
  WebSocket?: typeof WebSocket;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  maxQueued?: number;
  /** The server's HTTP base, for files [default: the WebSocket URL's origin]. */
  httpUrl?: string;
  /** The fetch function for files [default: the global one]. */
  fetch?: typeof fetch;
}

/** A file stored in a chat (`POST /v1/chats/{id}/files`). */
export interface StoredFile {
  id: string;
  chat_id: string;
  name: string;
  /** Sniffed from the content by the server. */
  media_type: string;
  size: number;
  sha256: string;
  created_at: string;
}

/** A file a user's message attaches, as its `chat.text` logs it. */
export interface Attachment {
  file_id: string;
  name: string;
  media_type: string;
  size: number;
}

export interface SendOptions {
  multitaskStrategy?: 'reject' | 'enqueue' | 'interrupt' | 'steer';
  /** Files uploaded to the chat, by id or as `upload` returned them. */
  attachments?: (string | StoredFile | Attachment)[];
}

export interface ResumedDetail {
  replayed: number;
  recovered: boolean;
  lastSeq: number;
}

declare class Emitter {
  on(type: string, fn: (...args: any[]) => void): () => void;
  emit(type: string, ...args: unknown[]): void;
}

export declare class Chat extends Emitter {
  readonly id: string;
  /** The seq of the last envelope delivered. */
  lastSeq: number;
  /** Every envelope delivered, in order. */
  readonly log: Envelope[];
  on(type: 'envelope' | '*', fn: (envelope: Envelope) => void): () => void;
  on(type: 'error', fn: (error: ConnectionError) => void): () => void;
  on(type: 'resumed', fn: (detail: ResumedDetail) => void): () => void;
  on(type: 'reset', fn: (boundary: object) => void): () => void;
  on(type: string, fn: (envelope: Envelope) => void): () => void;
  sendMessage(text: string, options?: SendOptions): string;
  /** Uploads a file to this chat; rejects with the server's `code` and message. */
  upload(file: Blob, options?: { name?: string }): Promise<StoredFile>;
  submitInput(requestId: string, text: string): void;
  sendComponentResult(corr: string, data: unknown): void;
  patchArtifact(corr: string, patch: object[]): void;
  /** Goes on from `text` in place of the user's message `seq`; returns its client_msg_id. */
  edit(seq: number, text: string): string;
  /** Answers the user's message `seq` (default: the last) again, with `model` for that run. */
  regenerate(seq?: number, model?: string): void;
  /** Makes the version holding envelope `to` the active one. */
  switchTo(to: number): void;
  cancel(): void;
  resume(): void;
  /** Marks this chat read up to `seq` [default: the last envelope delivered]. */
  markRead(seq?: number): void;
}

/** Where one of the user's chats stands (`feed.chat`), as `GET /v1/chats` shows it. */
export interface FeedChat {
  type: 'feed.chat';
  reason: 'created' | 'updated' | 'read';
  chat_id: string;
  agent: string;
  title?: string | null;
  preview?: string | null;
  unread: number;
  read_seq: number;
  last_seq: number;
  active_at: string;
  archived: boolean;
}

/** A feed event: a chat's change, the subscription's start, or its end for falling behind. */
export type FeedEvent = FeedChat | { type: 'feed.subscribed' } | { type: 'feed.lagged' };

/** A page of the user's chats (`GET /v1/chats`). */
export interface ChatList {
  chats: Array<Record<string, unknown> & { id: string; unread: number; read_seq: number; last_seq?: number | null }>;
  next_cursor?: string | null;
}

export declare class AgentwireClient extends Emitter {
  constructor(url: string, options?: ClientOptions);
  readonly state: ConnectionState;
  readonly chats: Map<string, Chat>;
  on(type: 'state', fn: (state: ConnectionState, detail: { replayed?: number; attempt?: number; delayMs?: number }) => void): () => void;
  on(type: 'error', fn: (error: ConnectionError) => void): () => void;
  on(type: 'message', fn: (message: Record<string, unknown>) => void): () => void;
  /** The user's feed, once `subscribeFeed` was called: on each `feed.subscribed`, read `listChats`. */
  on(type: 'feed', fn: (event: FeedEvent) => void): () => void;
  /** Follows the user's feed, again after every reconnect and `feed.lagged`. */
  subscribeFeed(): void;
  unsubscribeFeed(): void;
  /** Marks a chat read up to `seq` [default: its end]. */
  markRead(chatId: string, seq?: number): void;
  /** The user's chats, with unread counts (`GET /v1/chats`). */
  listChats(options?: { limit?: number; cursor?: string; archived?: boolean }): Promise<ChatList>;
  startChat(options: { agent: string; chatId?: string; message?: string; context?: object; attachments?: (string | StoredFile | Attachment)[] }): Chat;
  openChat(chatId: string, options?: { fromStart?: boolean }): Chat;
  closeChat(chatId: string): void;
  sendMessage(chatId: string, text: string, options?: SendOptions): string;
  upload(chatId: string, file: Blob, options?: { name?: string }): Promise<StoredFile>;
  /** Where a file is served (with the token: see `fetchFile`). */
  fileUrl(fileId: string): string;
  /** A file's bytes, fetched with the token. */
  fetchFile(fileId: string): Promise<Blob>;
  submitInput(chatId: string, requestId: string, text: string): void;
  sendComponentResult(chatId: string, corr: string, data: unknown): void;
  patchArtifact(chatId: string, corr: string, patch: object[]): void;
  cancel(chatId: string): void;
  close(): void;
}

export declare function uuid(): string;
