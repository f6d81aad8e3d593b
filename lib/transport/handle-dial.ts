import { lookup as dnsLookup } from 'node:dns';
import { isIP } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import { resolveDialOrder, type DialAddress, type Lookup } from './address-order.js';
import { dialDeadline } from './dial-deadline.js';
import { TcpDial } from './tcp-dial.js';
import { closeHandle, errnoError, type TcpHandle } from './uv.js';

/** `host:port`, an IPv6 host in brackets (RFC 3986 §3.2.2), as the messages below name a dial. */
function authorityOf(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * The one set of words for a dial that failed, whoever dialed (`forward` on either transport,
 * the native relay's report, the agent's connection to a target): GATE_ERR_DIAL_REFUSED when the
 * host answered that nothing listens there, else GATE_ERR_DIAL_FAILED with the errno name.
 */
export function dialFailure(err: unknown, host: string, port: number): GateError {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
  const where = authorityOf(host, port);
  if (code === 'ECONNREFUSED') return new GateError(ErrorCodes.DIAL_REFUSED, `upstream ${where} refused the connection`, { cause: err });
  return new GateError(ErrorCodes.DIAL_FAILED, `dialing upstream ${where} failed: ${code ?? (err as Error).message}`, { cause: err });
}

/** GATE_ERR_DIAL_TIMEOUT in the same words as dialFailure. */
export function dialTimeout(host: string, port: number, timeoutMs: number): GateError {
  return new GateError(ErrorCodes.DIAL_TIMEOUT, `upstream ${authorityOf(host, port)} did not accept within ${timeoutMs} ms`);
}

export interface HandleDialOptions {
  /** The deadline for the whole dial, name resolution included. */
  timeoutMs: number;
  /** Resolves a name (default `dns.lookup`); every address it gives is tried (RFC 8305 order). */
  lookup?: Lookup | undefined;
  /**
   * Offered the address when there is exactly one (an IP literal, or a name with one address),
   * before any connect or timer of this dial: true means the caller dials it another way (the
   * native relay, with its own deadline), and this dial ends without calling `done`.
   */
  takeOver?: ((address: DialAddress) => boolean) | undefined;
}

/**
 * A TCP connection on a bare libuv handle (uv.ts) to `host:port`: the name resolved, its
 * addresses tried as RFC 8305 orders them (TcpDial), one deadline over it all (dialDeadline).
 * `done` runs once: with the connected handle (the caller owns it), or with dialFailure /
 * dialTimeout. The returned function cancels a dial under way (nothing is called after it). The
 * one handle dial: `forward` on handles and the agent's connection to a target both use it. Only
 * where `handlesAvailable` (uv.ts).
 */
export function dialHandle(
  host: string,
  port: number,
  options: HandleDialOptions,
  done: (outcome: TcpHandle | GateError) => void,
): () => void {
  const dial = new HandleDial(host, port, options, done);
  dial.start();
  return () => dial.cancel();
}

class HandleDial {
  private tcp: TcpDial | undefined;
  private cancelDeadline: (() => void) | undefined;
  private settled = false;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly options: HandleDialOptions,
    private readonly done: (outcome: TcpHandle | GateError) => void,
  ) {}

  start(): void {
    const { host, port } = this;
    const family = isIP(host);
    if (family !== 0) return this.connect([{ address: host, family: family === 6 ? 6 : 4 }]);
    this.startDeadline();
    // Every address of the name: one the upstream does not listen on (localhost's ::1 when the
    // server binds 127.0.0.1) must not fail a dial that the next address would carry.
    resolveDialOrder(host, this.options.lookup ?? (dnsLookup as Lookup), (err, addresses) => {
      if (this.settled) return;
      if (err) return this.settle(dialFailure(err, host, port));
      if (addresses.length === 0) return this.settle(dialFailure(errnoError('ENOTFOUND'), host, port));
      this.connect(addresses);
    });
  }

  cancel(): void {
    if (this.settled) return;
    this.finish();
  }

  private startDeadline(): void {
    if (this.cancelDeadline) return;
    const { host, port } = this;
    const { timeoutMs } = this.options;
    this.cancelDeadline = dialDeadline(timeoutMs, () => this.settle(dialTimeout(host, port, timeoutMs)));
  }

  private connect(addresses: DialAddress[]): void {
    const only = addresses.length === 1 ? addresses[0]! : undefined;
    if (only && this.options.takeOver?.(only)) return this.finish();
    this.startDeadline();
    this.tcp = new TcpDial(this.port, (outcome) =>
      this.settle(typeof outcome === 'string' ? dialFailure(errnoError(outcome), this.host, this.port) : outcome),
    );
    this.tcp.connect(addresses);
  }

  private settle(outcome: TcpHandle | GateError): void {
    if (this.settled) {
      if (!(outcome instanceof GateError)) closeHandle(outcome);
      return;
    }
    this.finish();
    this.done(outcome);
  }

  private finish(): void {
    this.settled = true;
    this.cancelDeadline?.();
    this.tcp?.cancel();
  }
}
