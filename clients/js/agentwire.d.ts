// Types of @agentwire/client (agentwire.js). Hand-written; keep in step.

export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'resumed' | 'closed';

/** A chat-scoped envelope of the log (see protocol/outbound/ for every type). */
export interface Envelope {
  type: string;
  chat_id: string;
  seq: number;
  ts: string;
  replay?: boolean;
  [field: string]: unknown;
}

/** A `chat.error` about one connection's message (no seq). */
export interface ConnectionError {
  type: 'chat.error';
  chat_id: string | null;
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
  sendMessage(text: string, options?: { multitaskStrategy?: 'reject' | 'enqueue' | 'interrupt' | 'steer' }): string;
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
}

export declare class AgentwireClient extends Emitter {
  constructor(url: string, options?: ClientOptions);
  readonly state: ConnectionState;
  readonly chats: Map<string, Chat>;
  on(type: 'state', fn: (state: ConnectionState, detail: { replayed?: number; attempt?: number; delayMs?: number }) => void): () => void;
  on(type: 'error', fn: (error: ConnectionError) => void): () => void;
  on(type: 'message', fn: (message: Record<string, unknown>) => void): () => void;
  startChat(options: { agent: string; chatId?: string; message?: string; context?: object }): Chat;
  openChat(chatId: string, options?: { fromStart?: boolean }): Chat;
  closeChat(chatId: string): void;
  sendMessage(chatId: string, text: string): string;
  submitInput(chatId: string, requestId: string, text: string): void;
  sendComponentResult(chatId: string, corr: string, data: unknown): void;
  patchArtifact(chatId: string, corr: string, patch: object[]): void;
  cancel(chatId: string): void;
  close(): void;
}

export declare function uuid(): string;
