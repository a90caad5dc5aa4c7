// @ts-check
/**
 * `useChatList`: a React hook over the user's chats — the list
 * (`GET /v1/chats`) kept current by their feed: chats made elsewhere (a
 * backend's, a schedule's, another device's), unread counts, reads on any
 * device. The feed is a hint, not a log: the list is read again on every
 * `feed.subscribed` (the first, after a reconnect, after a lag), and the
 * events that follow are applied to it.
 */
import { useCallback, useEffect, useReducer } from 'react';

/**
 * @typedef {Record<string, any> & {id: string, unread: number, read_seq: number, last_seq?: number | null,
 *   last_activity_at?: string, pinned?: boolean, archived?: boolean}} ListedChat
 * @typedef {{chats: ListedChat[], loading: boolean, error: Error | null}} ChatListState
 */

/** Pinned first, then the latest activity first (as `GET /v1/chats`). */
function ordered(/** @type {ListedChat[]} */ chats) {
  return [...chats].sort(
    (a, b) => Number(Boolean(b.pinned)) - Number(Boolean(a.pinned)) || String(b.last_activity_at ?? '').localeCompare(String(a.last_activity_at ?? '')),
  );
}

/**
 * A `feed.chat` applied to the list: the chat's fields updated (or the chat
 * added), an archived one dropped.
 * @param {ListedChat[]} chats @param {any} e
 * @returns {ListedChat[]}
 */
export function applyFeedEvent(chats, e) {
  if (e?.type !== 'feed.chat' || typeof e.chat_id !== 'string') return chats;
  const rest = chats.filter((c) => c.id !== e.chat_id);
  if (e.archived) return rest;
  const known = chats.find((c) => c.id === e.chat_id);
  const fields = {
    id: e.chat_id,
    agent: e.agent,
    title: e.title ?? known?.title ?? null,
    preview: e.preview ?? known?.preview ?? null,
    unread: e.unread,
    read_seq: e.read_seq,
    last_seq: e.last_seq,
    last_activity_at: e.active_at ?? known?.last_activity_at,
    archived: false,
  };
  return ordered([...rest, { ...known, ...fields }]);
}

/** @param {ChatListState} state @param {any} action @returns {ChatListState} */
function reducer(state, action) {
  if (action.loaded) return { chats: ordered(action.loaded), loading: false, error: null };
  if (action.failed) return { ...state, loading: false, error: action.failed };
  if (action.loading) return { ...state, loading: true };
  return { ...state, chats: applyFeedEvent(state.chats, action) };
}

/**
 * @param {import('@agentwire/client').AgentwireClient} client
 * @param {{limit?: number}} [options] How many chats the list reads [default: the server's 20].
 */
export function useChatList(client, options = {}) {
  const [state, dispatch] = useReducer(reducer, { chats: [], loading: true, error: null });
  const { limit } = options;

  const refresh = useCallback(async () => {
    dispatch({ loading: true });
    try {
      const page = await client.listChats(limit === undefined ? {} : { limit });
      dispatch({ loaded: page.chats });
    } catch (e) {
      dispatch({ failed: e });
    }
  }, [client, limit]);

  useEffect(() => {
    const off = client.on('feed', (/** @type {any} */ e) => {
      if (e.type === 'feed.subscribed') refresh();
      else dispatch(e);
    });
    // Subscribed once per client (again on every connection); the first
    // `feed.subscribed` reads the list. A client subscribed before reads it here.
    if (client.feed) refresh();
    client.subscribeFeed();
    return off;
  }, [client, refresh]);

  const markRead = useCallback((/** @type {string} */ chatId, /** @type {number=} */ seq) => client.markRead(chatId, seq), [client]);

  return { ...state, refresh, markRead };
}
