import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import {
  closeHandle,
  connectTcp,
  handlesAvailable,
  remoteEndpoint,
  shutdown,
  startReading,
  startRelayReading,
  takeConnections,
  write,
  type HandleOwner,
  type TcpHandle,
} from './uv.js';

/** Environment switch: `GATE_MUX_FAST_PATH=0` (or `off`, `false`) keeps every connection on net.Socket. */
export const FAST_PATH_ENV = 'GATE_MUX_FAST_PATH';

export type HandleCheck = { ok: true } | { ok: false; reason: string };

const PROBE = Buffer.from('gate-mux handle self-test');
const LIMIT_MS = 3000;

let result: Promise<HandleCheck> | undefined;

/**
 * Whether passthrough may run on bare libuv handles in this process. The bindings come from
 * `process.binding` (uv.ts), which Node keeps for compatibility but does not document: a member
 * that exists can still behave differently in another Node. So before the first listener takes
 * connections as handles, one loopback round trip goes through every call the fast path makes —
 * accept through `onconnection`, a read, the peer's address, a dial, a write, a read into a
 * managed buffer, the FIN both ways, close — and its bytes are compared. Checked once per
 * process; the answer (and why not) is shared by every multiplexer.
 */
export function checkHandles(env: NodeJS.ProcessEnv = process.env): Promise<HandleCheck> {
  const switchValue = env[FAST_PATH_ENV]?.trim().toLowerCase();
  if (switchValue === '0' || switchValue === 'off' || switchValue === 'false') {
    return Promise.resolve({ ok: false, reason: `turned off by ${FAST_PATH_ENV}=${env[FAST_PATH_ENV]}` });
  }
  if (!handlesAvailable) {
    return Promise.resolve({
      ok: false,
      reason: "this Node does not offer process.binding('tcp_wrap' | 'stream_wrap') with the members used",
    });
  }
  result ??= roundTrip().catch((err: unknown) => ({
    ok: false as const,
    reason: `self-test failed: ${err instanceof Error ? err.message : String(err)}`,
  }));
  return result;
}

/**
 * client --(PROBE)--> handle A (accepted bare) ==dial==> upstream B (net.Server, echoes and ends)
 * client <--(echo, FIN)-- handle A <--(echo, FIN)-- handle U (dialed bare, managed-buffer reads)
 */
async function roundTrip(): Promise<HandleCheck> {
  const servers: Server[] = [];
  const handles: TcpHandle[] = [];
  let timer: NodeJS.Timeout | undefined;
  try {
    const upstream = createServer({ allowHalfOpen: true }, (s) => {
      s.on('error', () => {});
      const got: Buffer[] = [];
      s.on('data', (d: Buffer) => got.push(d));
      s.on('end', () => s.end(Buffer.concat(got)));
    });
    servers.push(upstream);
    const front = createServer({ allowHalfOpen: true });
    servers.push(front);
    await Promise.all(
      servers.map((s) => new Promise<void>((resolve, reject) => s.once('error', reject).listen(0, '127.0.0.1', () => resolve()))),
    );
    const upstreamPort = (upstream.address() as AddressInfo).port;
    const relayed = new Promise<string | undefined>((resolve) => {
      if (!takeConnections(front, (handle) => relay(handle, upstreamPort, handles, resolve)))
        resolve('the listener has no handle to take connections from');
    });
    const client = connect({ host: '127.0.0.1', port: (front.address() as AddressInfo).port, allowHalfOpen: true });
    client.on('error', () => {});
    const echoed = new Promise<Buffer>((resolve) => {
      const got: Buffer[] = [];
      client.on('data', (d: Buffer) => got.push(d));
      client.on('end', () => resolve(Buffer.concat(got)));
    });
    client.end(PROBE);
    const deadline = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), LIMIT_MS)));
    const outcome = await Promise.race([Promise.all([relayed, echoed]), deadline]);
    client.destroy();
    if (outcome === 'timeout') return { ok: false, reason: `self-test: no answer within ${LIMIT_MS} ms` };
    const [problem, bytes] = outcome;
    if (problem !== undefined) return { ok: false, reason: `self-test: ${problem}` };
    if (!bytes.equals(PROBE))
      return { ok: false, reason: `self-test: ${bytes.length} bytes came back instead of the ${PROBE.length} sent` };
    return { ok: true };
  } finally {
    clearTimeout(timer);
    for (const handle of handles) closeHandle(handle);
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => (s.listening ? s.close(() => resolve()) : resolve()))));
  }
}

/** Reads the client's bytes and FIN on `client`, dials `port`, relays both ways with the fast path's calls. */
function relay(client: TcpHandle, port: number, handles: TcpHandle[], done: (problem: string | undefined) => void): void {
  handles.push(client);
  const received: Buffer[] = [];
  const expectedPeer = remoteEndpoint(client);
  if (expectedPeer.address !== '127.0.0.1' || expectedPeer.port === 0) return done(`getpeername gave ${JSON.stringify(expectedPeer)}`);
  const fromClient: HandleOwner = {
    onHandleData: (_h, chunk) => void received.push(Buffer.from(chunk)),
    onHandleEnd: (_h, error) => {
      if (error !== undefined) return done(`client read failed: ${error}`);
      const dialed = connectTcp('127.0.0.1', port, 4, toUpstream);
      if (typeof dialed === 'string') return done(`dial failed: ${dialed}`);
      handles.push(dialed);
    },
  };
  const toUpstream: HandleOwner = {
    onHandleData: (_h, chunk) => {
      const status = write(client, Buffer.from(chunk));
      if (status !== 'done' && status !== 'queued') done(`write to the client failed: ${status}`);
    },
    onHandleEnd: (_h, error) => {
      if (error !== undefined) return done(`upstream read failed: ${error}`);
      shutdown(client);
      done(undefined);
    },
    onHandleConnect: (upstream, error) => {
      if (error !== undefined) return done(`dial failed: ${error}`);
      // As a list: the writev a relay uses for a stream's gathered chunks.
      const status = write(upstream, received);
      if (status !== 'done' && status !== 'queued') return done(`write to the upstream failed: ${status}`);
      shutdown(upstream);
      if (!startRelayReading(upstream, toUpstream)) done('the upstream handle cannot read');
    },
  };
  if (!startReading(client, fromClient)) done('the accepted handle cannot read');
}
