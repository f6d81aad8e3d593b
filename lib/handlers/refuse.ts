import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import type { GateError } from '../errors.js';
import { describeFailure } from '../refusals/failure.js';
import { type RefusalProtocol, refusalForConnection, refusalStep } from '../refusals/protocols.js';
import { REFUSAL_READ_LIMIT } from '../refusals/step.js';
import type { ConnectionInfo } from './types.js';

/**
 * The one place a failed route's client is answered in its own protocol (issue 41): the handlers
 * that dial an upstream for a client (the tunnel's, `forward`) call it on their failure path only,
 * so a working connection never reaches it. The words come from refusals/ (pure, bytes in and
 * bytes out); this drives them on the client's stream, bounded in bytes and in time.
 */

/** What a route says about answering its failures: a protocol, `none`, or (undefined) the connection's own. */
export type RefusalChoice = RefusalProtocol | 'none' | undefined;

/** How long the client has to send the first message an answer waits for (a startup message, a command). */
export const REFUSAL_READ_MS = 5_000;
/** How long the client has to read the answer and close, before the connection is closed anyway. */
export const REFUSAL_LINGER_MS = 2_000;

const DEFAULT_LIMITS = { readMs: REFUSAL_READ_MS, lingerMs: REFUSAL_LINGER_MS };

/**
 * The protocol to answer `client` in, if any: the route's choice, else what the connection shows
 * (ALPN, plaintext greeting). Never for a TLS connection the proxy did not end itself (a
 * passthrough route: only the TLS alert can be said there).
 */
export function refusalFor(choice: RefusalChoice, client: Duplex | undefined, info: ConnectionInfo): RefusalProtocol | undefined {
  if (choice === 'none') return undefined;
  // `client` undefined: a client still on its bare handle, so plaintext or TLS passed through.
  const tlsHere = client instanceof TLSSocket || info.negotiatedAlpn !== undefined;
  if ((info.protocol === 'tls' || info.postgresSslRequest) && !tlsHere) return undefined;
  return choice ?? refusalForConnection(info);
}

/**
 * Ends `client` with `error` after telling it why in `protocol`: reads what the protocol waits for
 * (at most REFUSAL_READ_LIMIT bytes within REFUSAL_READ_MS, `first` being what was read already),
 * writes the answer and ends its side, then waits at most REFUSAL_LINGER_MS for the client to close
 * (reading and dropping what it still sends, so the close is a FIN, not a reset that could discard
 * the answer before the client reads it). The connection is destroyed with `error` in every case,
 * so it is logged and counted with the route's code as before. `agent` names a tunnel route's agent.
 */
export function refuseClient(
  client: Duplex,
  error: GateError,
  protocol: RefusalProtocol,
  first: Buffer | undefined,
  agent?: string,
  limits: { readMs: number; lingerMs: number } = DEFAULT_LIMITS,
): void {
  if (client.destroyed) return;
  const loading = refusalStep(protocol);
  let step = typeof loading === 'function' ? loading : undefined;
  const failure = describeFailure(error, agent);
  let received = first === undefined ? Buffer.alloc(0) : first.subarray(0, REFUSAL_READ_LIMIT);
  let answered = false;
  let timer: NodeJS.Timeout | undefined;
  const finish = (): void => {
    clearTimeout(timer);
    client.removeListener('data', onData);
    client.removeListener('end', onEnd);
    client.destroy(error);
  };
  /** No more bytes will be waited for: the client ended, or the read deadline passed. */
  let ended = false;
  const decide = (final: boolean): void => {
    // Until the protocol's answer is loaded (MongoDB's, the first time), bytes are only kept.
    if (!step || answered) return;
    const result = step(received, failure, final || ended);
    if (result.need) return;
    answered = true;
    received = Buffer.alloc(0);
    clearTimeout(timer);
    if (!result.bytes || !client.writable) return finish();
    // When the client has ended already, the answer is flushed and the connection closed then.
    if (client.readableEnded) client.end(result.bytes, finish);
    else {
      client.end(result.bytes);
      timer = setTimeout(finish, limits.lingerMs);
    }
  };
  const onData = (chunk: Buffer): void => {
    if (answered) return; // dropped: the client's close is awaited, bounded by the linger timer
    const room = REFUSAL_READ_LIMIT - received.length;
    received = Buffer.concat([received, chunk.length > room ? chunk.subarray(0, room) : chunk]);
    decide(received.length >= REFUSAL_READ_LIMIT);
  };
  // Registered before the stream's own end handling: the close that follows the client's FIN is
  // this one, with the route's error, not a clean one that would hide the failure.
  const onEnd = (): void => {
    ended = true;
    if (answered) finish();
    else decide(true);
  };
  client.once('close', () => clearTimeout(timer));
  if (typeof loading !== 'function') {
    loading.then(
      (loaded) => {
        step = loaded;
        if (!client.destroyed) decide(received.length >= REFUSAL_READ_LIMIT);
      },
      () => finish(),
    );
  }
  if (client.readableEnded) {
    ended = true;
    return decide(true);
  }
  timer = setTimeout(() => {
    ended = true;
    decide(true);
  }, limits.readMs);
  client.on('data', onData);
  client.once('end', onEnd);
  client.resume();
  decide(received.length >= REFUSAL_READ_LIMIT);
}
