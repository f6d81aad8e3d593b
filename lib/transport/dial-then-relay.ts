import { DialCancel } from './dial-cancel.js';

/**
 * What a side that carries a client to an upstream it dials first needs to say: how to dial,
 * what to do with the upstream once the client is known to be still there, and how to end the
 * client when the dial fails. The client is held (paused, or a stream not yet answered) meanwhile.
 */
export interface DialThenRelaySteps<Upstream> {
  /**
   * Opens the upstream; `cancel` is cancelled when the client closes first. A dial that hands it on
   * to an API taking an AbortSignal uses `cancel.signal` (made then, not for every client).
   */
  dial(cancel: DialCancel): Promise<Upstream>;
  /** Carries the client to the upstream: the client is still open. */
  relay(upstream: Upstream): void;
  /** Lets go of an upstream whose client left while it was being dialled. */
  release(upstream: Upstream): void;
  /** Ends the waiting client with the dial's failure (its code). Not called for a client that left. */
  fail(err: unknown): void;
  /** Whether the client is gone (default: `client.destroyed`). */
  gone?: () => boolean;
  /** Aborts the dial; pass one to cancel pending dials from outside too (a listener closing). */
  abort?: AbortController;
  /** The cancel's reason when the client closes first (default "client closed"). */
  closedWhy?: string;
}

/** A client end: a socket, or an HTTP/2 stream a peer opened. */
export interface HeldClient {
  readonly destroyed: boolean;
  once(event: 'close', listener: () => void): unknown;
  removeListener(event: 'close', listener: () => void): unknown;
}

/**
 * Hold the client, dial with cancel-on-close, then relay or fail with a code: the one order every
 * dialling handler follows (the tunnel, the environment proxy, peering, the local proxy). A client
 * that closes while the dial runs cancels it (no dial is left running for nobody) and is not told
 * anything; an upstream that arrives after its client left is released, never relayed.
 */
export async function dialThenRelay<Upstream>(client: HeldClient, steps: DialThenRelaySteps<Upstream>): Promise<void> {
  const cancel = new DialCancel(steps.abort);
  const onEarlyClose = (): void => cancel.cancel(new Error(steps.closedWhy ?? 'client closed'));
  client.once('close', onEarlyClose);
  let upstream: Upstream;
  try {
    upstream = await steps.dial(cancel);
  } catch (err) {
    if (!cancel.cancelled && !isGone(client, steps)) steps.fail(err);
    return;
  } finally {
    client.removeListener('close', onEarlyClose);
  }
  if (isGone(client, steps)) steps.release(upstream);
  else steps.relay(upstream);
}

function isGone(client: HeldClient, steps: DialThenRelaySteps<unknown>): boolean {
  return steps.gone ? steps.gone() : client.destroyed;
}
