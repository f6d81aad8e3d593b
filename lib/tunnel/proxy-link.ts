// The agent's end of one tunnel (framed-proxy-link.ts): what the proxy's session tells AgentTunnel,
// so that admission, descriptions, cluster views, refusals, the heartbeat and drain read as the
// tunnel's own words rather than frames.
import type { ErrorCode } from '../errors.js';
import type { FramedSession } from '../tunnel-framing/framed-session.js';
import type { ClusterView } from './cluster-view.js';

/** The session as AgentTunnel holds it: a PingPeer (heartbeat.ts), ended with goAway() or destroy(error). */
export type ProxyLink = FramedSession;

/** The proxy's describe request as the agent answers it. */
export interface DescribeAnswer {
  /** Writes one line of the description (a JSON line, newline included). */
  write(line: string): void;
  /** Ends the agent's side: nothing more to describe (the tunnel is ending). */
  end(): void;
}

/** What a link tells its tunnel as the proxy speaks. */
export interface LinkEvents {
  /** The proxy is ready to be asked: its session began. */
  ready(): void;
  /** A cluster view; undefined when it was malformed (answered with a refusal). */
  view(view: ClusterView | undefined): void;
  /**
   * The proxy asks for a description. Returns what to call when the proxy ends its side (its
   * verdict: admitted) and when the stream has closed; undefined when one is open already: then
   * the request is refused.
   */
  describe(answer: DescribeAnswer): { verdict(): void; closed(): void } | undefined;
  /** A client connection's stream was served (for the agent's counts). */
  served(): void;
  /** The proxy sent GOAWAY: `why` in words, and its refusal when it carried one. */
  goaway(why: string, refusal: { code: ErrorCode; message: string } | undefined): void;
  /** The session failed (logged). */
  error(err: Error): void;
}
