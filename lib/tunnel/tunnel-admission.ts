// The agent's side of its admission by the proxy (agent-tunnel.ts): what it has heard so far, and
// whether that is enough. A session's start proves nothing (a refusal starts one too); a PING
// answered does, since a refused session has sent its GOAWAY before it could answer, and TCP keeps
// that order. A proxy that asks the agent to describe itself queued that request before it could
// answer the PING, and then admits the tunnel only by ending its side of the describe stream.
import { ErrorCodes, GateError } from '../errors.js';

export class TunnelAdmission {
  /** The first PING was answered. */
  private pinged = false;
  /** The proxy asked for a description: then only its verdict (the stream's end) admits. */
  private asked = false;
  private verdict = false;
  /** Why admission failed for want of an answer, once the deadline passed. */
  timedOut: GateError | undefined;
  private timer: NodeJS.Timeout | undefined;

  /**
   * `complete` once the proxy has admitted the tunnel; `silent` when it has not within `timeoutMs`
   * (a path that went quiet after the TLS handshake: the dial loop must not wait for a heartbeat).
   */
  constructor(
    private readonly timeoutMs: number,
    private readonly complete: () => void,
    private readonly silent: (error: GateError) => void,
  ) {}

  /** Starts the deadline (the dial's own ended with the TLS handshake). */
  start(): void {
    this.timer = setTimeout(() => {
      this.timedOut = new GateError(
        ErrorCodes.AGENT_HEARTBEAT_TIMEOUT,
        `the proxy did not admit the tunnel within ${this.timeoutMs} ms (no PING answer or verdict): the path is silent`,
      );
      this.silent(this.timedOut);
    }, this.timeoutMs);
    this.timer.unref();
  }

  /** The first PING was answered. */
  pingAnswered(): void {
    this.pinged = true;
    this.check();
  }

  /** The proxy asked for a description: its verdict is awaited too. */
  describeAsked(): void {
    this.asked = true;
  }

  /** The proxy ended its side of the describe stream: admitted, as far as the description goes. */
  admittedDescription(): void {
    this.verdict = true;
    this.check();
  }

  /** No more waiting (the session ended, or the tunnel came up): the deadline is cleared. */
  disarm(): void {
    clearTimeout(this.timer);
  }

  private check(): void {
    if (!this.pinged || (this.asked && !this.verdict)) return;
    this.complete();
  }
}
