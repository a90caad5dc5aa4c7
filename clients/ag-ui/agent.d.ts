import { HttpAgent, type HttpAgentConfig, type RunAgentInput, type BaseEvent } from '@ag-ui/client';
import type { Observable } from 'rxjs';

/** The agentwire wire protocol version this agent speaks. */
export declare const PROTOCOL: 1;

export interface AgentwireAgentConfig extends HttpAgentConfig {
  /** agentwire's AG-UI endpoint: `https://agentwire.example.com/v1/ag-ui`. */
  url: string;
  /** A new thread's agent (`forwardedProps.agent`, unless a run names its own). */
  agent?: string;
  /** A bearer token, sent as `Authorization` (`jwt` or `oidc` auth mode). */
  token?: string;
  /** How many times one run is rejoined after its stream broke (5). */
  maxRejoins?: number;
  /** The pause before the first rejoin, in ms, doubled each time (250). */
  rejoinDelayMs?: number;
}

/**
 * AG-UI's `HttpAgent` for agentwire: reads each SSE event's id, rejoins a
 * run whose stream broke (`Last-Event-ID`) as one verified run, and drops a
 * turn the server discarded after a restart (`agentwire.turn_discarded`).
 */
export declare class AgentwireAgent extends HttpAgent {
  agent: string | undefined;
  maxRejoins: number;
  rejoinDelayMs: number;
  constructor(config: AgentwireAgentConfig);
  /** Where run `input` is rejoined: `{url}/{threadId}/stream?runId=…`. */
  rejoinUrl(input: RunAgentInput): string;
  run(input: RunAgentInput): Observable<BaseEvent>;
  clone(): AgentwireAgent;
}
