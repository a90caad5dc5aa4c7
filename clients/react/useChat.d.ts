// Types of @agentwire/react (useChat.js, chatState.js). Hand-written; keep in step.
import type { AgentwireClient, Attachment, ConnectionState, Envelope, SendOptions } from '@agentwire/client';

export interface Message {
  seq: number;
  role: 'user' | 'agent';
  agent: string;
  text: string;
  reasoning?: string;
  streaming: boolean;
  /** What a cancelled, interrupted or timed-out run had said when it stopped. */
  partial?: boolean;
  /** A user's message's files (fetch each with `client.fetchFile(file_id)`). */
  attachments?: Attachment[];
  /** This message begins version `index + 1` of `all.length`; `all` holds the seq each starts at (for `switchTo`). */
  versions?: { all: number[]; index: number };
}

export interface ToolCall {
  corr: string;
  toolName: string;
  componentType: string | null;
  display: 'inline' | 'artifact';
  payload: unknown;
  awaiting: boolean;
  result?: unknown;
  success?: boolean;
  progress?: { percent: number; status: string };
  /** In a group run: the member that made the call. */
  agent?: string;
}

export interface InputRequest {
  requestId: string;
  prompt: string;
  password: boolean;
  /** A choice (a group's manual speaker selection): answer with one of them. */
  options?: string[];
  status: 'pending' | 'answered' | 'timed_out';
}

export interface ChatState {
  messages: Message[];
  toolCalls: ToolCall[];
  inputRequests: InputRequest[];
  run: 'idle' | 'running';
  lastRunEnd: string | null;
  usage: {
    total: number;
    prompt: number;
    completion: number;
    cost?: number;
    /** A group run's usage per member (and its selector, under the group's id). */
    byAgent?: Record<string, { total_tokens: number; prompt_tokens: number; completion_tokens: number; cost?: number }>;
  }[];
  errors: { code: string; message: string }[];
  /** Messages sent during a run (`enqueue`, `interrupt`, `steer`) that no run took yet. */
  queued: { seq: number; text: string; mode: string; attachments?: Attachment[] }[];
  lastSeq: number;
  /** The tree: each `chat.branch`'s seq → its `at`. */
  branches: Map<number, number>;
  /** Every envelope folded, newest first. */
  log: { m: Envelope; prev: ChatState['log'] } | null;
  nextVersions: { all: number[]; index: number } | null;
  /** What each agent served over AG-UI shares with the UI (`chat.agent_state`), by agent. */
  agentState: Record<string, unknown>;
}

export interface UseChat extends ChatState {
  connection: ConnectionState;
  pendingComponents: ToolCall[];
  pendingInputs: InputRequest[];
  send(text: string, options?: SendOptions): string | undefined;
  /** Uploads each file to the chat, then sends `text` attaching them. */
  sendFiles(text: string, files: Blob[], options?: Omit<SendOptions, 'attachments'>): Promise<string | undefined>;
  /** A new version of the user's message at `seq`; the agent answers it. */
  edit(seq: number, text: string): string | undefined;
  /** A new answer to the user's message at `seq` (default: the last), with `model` if given. */
  regenerate(seq?: number, model?: string): void;
  /** Makes the version that starts at `to` (from `versions.all`) the active one. */
  switchTo(to: number): void;
  submitInput(requestId: string, text: string): void;
  answer(corr: string, data: unknown): void;
  cancel(): void;
}

export declare function useChat(client: AgentwireClient, chatId: string | null): UseChat;
export declare function initialChatState(): ChatState;
export declare function applyEnvelope(state: ChatState, envelope: Envelope): ChatState;
/** As `applyEnvelope` on each, but a replay with branches is folded once. */
export declare function applyEnvelopes(state: ChatState, envelopes: Envelope[]): ChatState;
/** RFC 6902 `ops` applied to a copy of `doc`; throws if one does not apply. */
export declare function applyPatch(doc: unknown, ops: object[]): unknown;
