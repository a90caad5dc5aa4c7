import type { AgentwireClient, FeedEvent } from '@agentwire/client';

/** A chat as `GET /v1/chats` lists it, kept current by the feed. */
export interface ListedChat {
  id: string;
  agent: string;
  title?: string | null;
  preview?: string | null;
  unread: number;
  read_seq: number;
  last_seq?: number | null;
  last_activity_at?: string;
  pinned?: boolean;
  archived?: boolean;
  [field: string]: unknown;
}

export interface UseChatList {
  /** Pinned first, then the latest activity first. */
  chats: ListedChat[];
  loading: boolean;
  error: Error | null;
  /** Reads the list again. */
  refresh(): Promise<void>;
  /** Marks a chat read up to `seq` [default: its end], on every device. */
  markRead(chatId: string, seq?: number): void;
}

export declare function useChatList(client: AgentwireClient, options?: { limit?: number }): UseChatList;
/** A `feed.chat` applied to a list: the chat updated or added, an archived one dropped. */
export declare function applyFeedEvent(chats: ListedChat[], event: FeedEvent): ListedChat[];
