// Types of @agentwire/react (useChat.js, chatState.js). Hand-written; keep in step.
import type { AgentwireClient, ConnectionState, Envelope } from '../js/agentwire';

export interface Message {
  seq: number;
  role: 'user' | 'agent';
  agent: string;
  text: string;
  streaming: boolean;
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
}

export interface InputRequest {
  requestId: string;
  prompt: string;
  password: boolean;
  status: 'pending' | 'answered' | 'timed_out';
}

export interface ChatState {
  messages: Message[];
  toolCalls: ToolCall[];
  inputRequests: InputRequest[];
  run: 'idle' | 'running';
  lastRunEnd: string | null;
  usage: { total: number; prompt: number; completion: number; cost?: number }[];
  errors: { code: string; message: string }[];
  lastSeq: number;
}

export interface UseChat extends ChatState {
  connection: ConnectionState;
  pendingComponents: ToolCall[];
  pendingInputs: InputRequest[];
  send(text: string): string | undefined;
  submitInput(requestId: string, text: string): void;
  answer(corr: string, data: unknown): void;
  cancel(): void;
}

export declare function useChat(client: AgentwireClient, chatId: string | null): UseChat;
export declare function initialChatState(): ChatState;
export declare function applyEnvelope(state: ChatState, envelope: Envelope): ChatState;
