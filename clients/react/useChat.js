// @ts-check
/**
 * `useChat`: a React hook over an agentwire chat. It folds the chat's
 * envelopes (exactly once, in order, across reconnects — the client's job)
 * into messages with streaming text, tool calls with their results and
 * progress, pending input requests and components, usage and the run state;
 * of a chat that branched (edits, regenerates), the active path, with the
 * versions where there are several.
 */
import { useCallback, useEffect, useReducer, useState } from 'react';

import { applyEnvelope, applyEnvelopes, initialChatState } from './chatState.js';

export { applyEnvelope, applyEnvelopes, applyPatch, initialChatState } from './chatState.js';

/** @param {import('./chatState.js').ChatState} state @param {any} action */
function reducer(state, action) {
  if (action.reset) return initialChatState();
  if (Array.isArray(action.foldAll)) return applyEnvelopes(state, action.foldAll);
  if (action.connectionError) {
    const e = action.connectionError;
    return { ...state, errors: [...state.errors, { code: e.error_code, message: e.message }] };
  }
  return applyEnvelope(state, action);
}

/**
 * @param {import('@agentwire/client').AgentwireClient} client
 * @param {string | null} chatId  The chat to follow (opened and replayed), or `null`.
 */
export function useChat(client, chatId) {
  const [state, dispatch] = useReducer(reducer, undefined, initialChatState);
  const [connection, setConnection] = useState(client.state);

  useEffect(() => {
    const off = client.on('state', (/** @type {string} */ s) => setConnection(/** @type {any} */ (s)));
    // The state may have changed between the render and this effect (a
    // socket that opened meanwhile): read it again once listening.
    setConnection(client.state);
    return off;
  }, [client]);

  useEffect(() => {
    dispatch({ reset: true });
    if (!chatId) return undefined;
    // A chat this client already follows (just started, say) is folded from
    // what it delivered so far; any other is replayed from its first seq.
    const known = client.chats.get(chatId);
    const chat = known ?? client.openChat(chatId, { fromStart: true });
    // The log so far, folded at once (an envelope carries `replay: true`,
    // so the action's key is another).
    dispatch({ foldAll: chat.log.slice() });
    const offEnvelope = chat.on('envelope', dispatch);
    const offError = chat.on('error', (/** @type {any} */ e) => dispatch({ connectionError: e }));
    const offReset = chat.on('reset', () => dispatch({ reset: true }));
    return () => {
      offEnvelope();
      offError();
      offReset();
      if (!known) client.closeChat(chatId);
    };
  }, [client, chatId]);

  const chat = chatId ? client.chats.get(chatId) : undefined;
  const send = useCallback(
    (/** @type {string} */ text, /** @type {{multitaskStrategy?: string, attachments?: any[]}=} */ options) => chat?.sendMessage(text, options),
    [chat],
  );
  /** Uploads each file to the chat, then sends `text` attaching them. */
  const sendFiles = useCallback(
    async (/** @type {string} */ text, /** @type {Blob[]} */ files, /** @type {{multitaskStrategy?: string}=} */ options) => {
      if (!chat || !chatId) return undefined;
      const stored = [];
      for (const f of files) stored.push(await client.upload(chatId, f));
      return chat.sendMessage(text, { ...options, attachments: stored });
    },
    [client, chat, chatId],
  );
  const edit = useCallback((/** @type {number} */ seq, /** @type {string} */ text) => chat?.edit(seq, text), [chat]);
  const regenerate = useCallback(
    (/** @type {number=} */ seq, /** @type {string=} */ model) => chat?.regenerate(seq, model),
    [chat],
  );
  const switchTo = useCallback((/** @type {number} */ to) => chat?.switchTo(to), [chat]);
  const submitInput = useCallback((/** @type {string} */ id, /** @type {string} */ text) => chat?.submitInput(id, text), [chat]);
  const answer = useCallback((/** @type {string} */ corr, /** @type {unknown} */ data) => chat?.sendComponentResult(corr, data), [chat]);
  const cancel = useCallback(() => chat?.cancel(), [chat]);

  return {
    ...state,
    connection,
    /** Tool calls waiting for the user. */
    pendingComponents: state.toolCalls.filter((c) => c.awaiting && c.componentType),
    /** Input requests waiting for the user. */
    pendingInputs: state.inputRequests.filter((r) => r.status === 'pending'),
    send,
    sendFiles,
    edit,
    regenerate,
    switchTo,
    submitInput,
    answer,
    cancel,
  };
}
