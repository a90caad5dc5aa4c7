// @ts-check
/**
 * `@agentwire/ag-ui`'s `AgentwireAgent`: AG-UI's `HttpAgent` (`@ag-ui/client`) for agentwire's
 * `/v1/ag-ui`, which keeps a run through a dropped stream by itself:
 *
 * - it reads the `id` of every SSE event it receives (agentwire gives each
 *   one; `HttpAgent` ignores them);
 * - when the stream breaks before the run's `RUN_FINISHED` or `RUN_ERROR`
 *   (a network cut, a server restart), it rejoins the run —
 *   `GET {url}/{threadId}/stream?runId=…` with `Last-Event-ID` — and goes on
 *   with exactly the events after the last it had, as one stream (so AG-UI's
 *   event verification sees one run), a few times with a growing pause;
 * - a turn a restart cut off is dropped from `messages` when the server says
 *   so (`CUSTOM agentwire.turn_discarded`): its words never stay doubled.
 *
 * It speaks agentwire wire protocol `PROTOCOL` (1), sent as
 * `Agentwire-Protocol` on every request.
 */
import { HttpAgent, runHttpRequest, transformHttpEventStream } from '@ag-ui/client';
import { Observable } from 'rxjs';

/** The wire protocol version this agent speaks. */
export const PROTOCOL = 1;

/** The end of an SSE event: a blank line (any of the three line ends). */
const EVENT_END = /\r\n\r\n|\n\n|\r\r/;

/**
 * `response`, its body passed on event by event, with the `id` of each
 * event given to `seen` (the last one's is what a rejoin sends). A body
 * that breaks (a cut connection) ends after its last whole event instead of
 * failing — the half event dropped, the run rejoined — so `@ag-ui/client`
 * never parses half an event, nor cancels a failed reader (which would
 * leave its rejection unhandled).
 * @param {Response} response @param {(id: string) => void} seen
 */
function watchingIds(response, seen) {
  if (!response.body) return response;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = '';
  /** The whole events of what came, their ids seen; the rest kept. */
  const whole = (/** @type {string} */ text) => {
    pending += text;
    let out = '';
    let end;
    while ((end = pending.search(EVENT_END)) >= 0) {
      const size = pending.startsWith('\r\n', end) ? 4 : 2;
      const block = pending.slice(0, end);
      out += pending.slice(0, end + size);
      pending = pending.slice(end + size);
      for (const line of block.split(/\r\n|\n|\r/)) {
        if (line.startsWith('id:')) seen(line.slice(3).trimStart());
      }
    }
    return out;
  };
  const body = new ReadableStream({
    async pull(controller) {
      // Read until a whole event came (a pull that gives nothing is not
      // asked again).
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) {
            const rest = whole(decoder.decode()) + pending;
            if (rest) controller.enqueue(encoder.encode(rest));
            return controller.close();
          }
          const events = whole(decoder.decode(value, { stream: true }));
          if (events) return controller.enqueue(encoder.encode(events));
        }
      } catch {
        controller.close();
      }
    },
    cancel(reason) {
      return reader.cancel(reason).catch(() => {});
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

export class AgentwireAgent extends HttpAgent {
  /**
   * @param {import('@ag-ui/client').HttpAgentConfig & { agent?: string, token?: string, maxRejoins?: number, rejoinDelayMs?: number }} config
   *   `url`: agentwire's `…/v1/ag-ui`; `agent`: a new thread's agent (sent
   *   as `forwardedProps.agent` unless a run names its own); `token`: a
   *   bearer token (`Authorization`); `maxRejoins` (5): rejoins of one run
   *   at most; `rejoinDelayMs` (250): the first pause, doubled each time.
   */
  constructor(config) {
    const headers = {
      ...(config.headers ?? {}),
      ...(config.token ? { authorization: `Bearer ${config.token}` } : {}),
      'agentwire-protocol': String(PROTOCOL),
    };
    super({ ...config, headers });
    this.agent = config.agent;
    this.maxRejoins = config.maxRejoins ?? 5;
    this.rejoinDelayMs = config.rejoinDelayMs ?? 250;
    // A turn the server discarded (a restart cut it off) leaves `messages`.
    this.subscribe({
      onCustomEvent: ({ event, messages }) => {
        if (event.name !== 'agentwire.turn_discarded') return;
        const gone = new Set([event.value?.messageId, event.value?.reasoningMessageId].filter(Boolean));
        return gone.size ? { messages: messages.filter((m) => !gone.has(m.id)) } : undefined;
      },
    });
  }

  /** A copy with the same settings (AG-UI's `clone` copies its own fields only). */
  clone() {
    const copy = /** @type {AgentwireAgent} */ (super.clone());
    copy.agent = this.agent;
    copy.maxRejoins = this.maxRejoins;
    copy.rejoinDelayMs = this.rejoinDelayMs;
    return copy;
  }

  /** The request of run `input`, with the agent of a new thread. @param {import('@ag-ui/client').RunAgentInput} input */
  requestInit(input) {
    const named = this.agent && input.forwardedProps?.agent === undefined
      ? { ...input, forwardedProps: { ...(input.forwardedProps ?? {}), agent: this.agent } }
      : input;
    return super.requestInit(named);
  }

  /** Where run `input` is rejoined. @param {import('@ag-ui/client').RunAgentInput} input */
  rejoinUrl(input) {
    const base = this.url.replace(/\/+$/, '');
    return `${base}/${encodeURIComponent(input.threadId)}/stream?runId=${encodeURIComponent(input.runId)}`;
  }

  /** @param {import('@ag-ui/client').RunAgentInput} input */
  run(input) {
    return new Observable((subscriber) => {
      /** @type {string | null} */
      let lastId = null;
      let ended = false;
      let rejoins = 0;
      /** @type {import('rxjs').Subscription | null} */
      let inner = null;
      const signal = this.abortController.signal;
      const request = (first) => async () => {
        const response = first
          ? await this.fetch(this.url, this.requestInit(input))
          : await this.fetch(this.rejoinUrl(input), {
            method: 'GET',
            headers: { ...this.headers, accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
            signal,
          });
        // Nothing in flight, nothing after the last event: the run is over.
        if (!first && response.status === 204) ended = true;
        return watchingIds(response, (id) => { lastId = id; });
      };
      const follow = (first) => {
        inner = transformHttpEventStream(runHttpRequest(request(first)), this.debugLogger).subscribe({
          next: (event) => {
            if (event.type === 'RUN_FINISHED' || event.type === 'RUN_ERROR') ended = true;
            subscriber.next(event);
          },
          error: (error) => again(error),
          complete: () => (ended ? subscriber.complete() : again(new Error('the stream ended before the run did'))),
        });
      };
      /** The stream broke before the run ended: rejoin it, unless stopped
       * (or it never began: a refused request is the caller's to see).
       * @param {unknown} error */
      const again = (error) => {
        if (ended || signal.aborted || lastId === null || rejoins >= this.maxRejoins) {
          if (ended) subscriber.complete();
          else subscriber.error(error);
          return;
        }
        rejoins += 1;
        setTimeout(() => {
          if (!signal.aborted) follow(false);
          else subscriber.error(error);
        }, this.rejoinDelayMs * 2 ** (rejoins - 1));
      };
      follow(true);
      return () => inner?.unsubscribe();
    });
  }
}
