// The proxy's end of one agent's tunnel (framed-agent-link.ts): what the registry asks of it, so
// that admission, descriptions, cluster views, refusals, heartbeats, probes and drain read as the
// registry's own words rather than frames.
import type { EventEmitter } from 'node:events';
import type { GateError } from '../errors.js';
import type { ClusterView } from './cluster-view.js';
import type { ConnectAnswerOptions } from './framed-answer.js';
import type { PingPeer } from './heartbeat.js';
import type { TunnelStream } from './tunnel-stream.js';

/** How a stream's open is awaited: ConnectAnswerOptions, its loss told with the link's reason. */
export interface LinkAnswerOptions extends Omit<ConnectAnswerOptions, 'lost'> {
  /** The error for a stream that closed before any answer; `why` says how, in words. */
  lost: (why: string) => GateError;
}

/** What the registry is told about its describe request. */
export interface DescribeReader {
  /** The agent's answer: 200, then `line`s; a 4xx from an agent older than descriptions. */
  answer(status: number): void;
  /** One line of the agent's description (without its newline). */
  line(line: Buffer): void;
  /** A line longer than the bound: nothing more is read. */
  overflow(bytes: number): void;
}

/** The describe request once sent: the proxy's verdict, or its refusal of a later description. */
export interface DescribeRequest {
  /** Admitted: the proxy ends its side of the stream. */
  admit(): void;
  /** A later description is refused: the stream is closed (REFUSED_STREAM), the tunnel goes on. */
  refuse(): void;
}

/** A client connection's stream: where to, for whom, and its first bytes (sent with the open). */
export interface ConnectRequest {
  target: string;
  client: string | undefined;
  firstBytes: Buffer | undefined;
}

/**
 * Events: 'goaway' (why, in words: the agent takes no new streams), 'error' (Error: logged),
 * 'close' (the tunnel is over, every stream with it).
 */
export interface AgentLink extends EventEmitter {
  /** The session, for heartbeats and probes. */
  readonly peer: PingPeer;
  /**
   * The streams the agent takes at once, as its HELLO said (its `maxStreams`): the proxy's cap of
   * client streams per tunnel is a few below it (settings.ts).
   */
  readonly streamLimit: number;
  /** True while new streams may be opened: no GOAWAY either way, not closed. */
  readonly usable: boolean;
  /**
   * Opens a client's stream and resolves with it once the agent has reached the target; the
   * errors are the caller's (`answer`). `counted` is told once, when the stream ends, whether it
   * ended in a reset (what the agent's rapid-reset budget counts). Throws when no stream can open.
   */
  connect(request: ConnectRequest, answer: LinkAnswerOptions, counted: (reset: boolean) => void): Promise<TunnelStream>;
  /** Tells the agent the cluster view; `unsupported` when it answers with a refusal (an older agent). */
  sendView(view: ClusterView, unsupported: (status: number) => void): void;
  /** Asks the agent to describe itself; undefined when the request could not be sent. */
  describe(maxLineBytes: number, reader: DescribeReader): DescribeRequest | undefined;
  /** No new streams (GOAWAY NO_ERROR); the open ones finish, then the connection ends. */
  goAway(): void;
  /**
   * Refuses the agent: GOAWAY with the error's code and message (readRefusalDebugData reads it),
   * then the connection ends; the socket is destroyed with `error`, so the listener counts the code.
   */
  refuse(error: GateError): void;
  /** Tells the agent `error` in a GOAWAY, streams left as they are (the caller ends them). */
  tell(error: GateError): void;
  /** Ends every stream and the connection now. */
  destroy(error?: GateError): void;
}
