/**
 * Connections closed, reset and idle-timed-out while bulk transfers run beside them,
 * on every transport. Each transfer's bytes must land on its own connection, byte-exact both
 * ways: the client checks the echo by SHA-256, the upstream checks what it received against the
 * connection id the client announced in its first line. The churn around the transfers makes
 * the process reuse descriptor numbers while other connections have bytes in flight (held in a
 * buffer, or in a pipe when the native relay splices), which is where bytes could cross from
 * one connection into another. Afterwards no socket, timer or descriptor may remain.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readdirSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { forward } from '../../lib/handlers/builders.js';
import { ErrorCodes } from '../../lib/errors.js';
import type { UpstreamAddress } from '../../lib/handlers/types.js';
import { closeServer, liveHandles, trackedServer as server, until } from '../helpers/net.js';
import { prng } from '../helpers/prng.js';
import { availableTransports, TRANSPORT_LABEL, TRANSPORT_OPTIONS } from '../helpers/transports.js';

const TRANSFERS = Number(process.env.GATE_STRESS_TRANSFERS ?? 16);
const TRANSFER_BYTES = 4 * 1024 * 1024;
const CHURNERS = 16;
/** Bounds the churn if the transfers take long (a saturated machine, a sanitizer build). */
const MAX_VICTIMS = 600;
const SEED = 0x57e55;

type Victim = 'client-close' | 'client-reset' | 'upstream-reset' | 'idle';
const VICTIMS: Victim[] = ['client-close', 'client-reset', 'upstream-reset', 'idle'];

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const hello = (id: number): Buffer => Buffer.from(`SSH-2.0-c${id}\r\n`);

/** Descriptors of this process by kind ("socket", "pipe", ...), from /proc/self/fd. */
function descriptors(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const fd of readdirSync('/proc/self/fd')) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // the directory's own descriptor, closed by now
    }
    const kind = /^(\w+):\[/.exec(target)?.[1] ?? 'file';
    out[kind] = (out[kind] ?? 0) + 1;
  }
  return out;
}

for (const name of availableTransports(t)) {
  t.test(
    `transfers stay byte-exact on their own connections while others close, reset and time out, on ${TRANSPORT_LABEL[name]}`,
    async (t) => {
      const before = liveHandles();
      const fdsBefore = descriptors();
      // The echo upstream hashes what each connection sent it, by the id in its first line.
      const receivedBy = new Map<number, string>();
      const echo = await server((s) => {
        const hash = createHash('sha256');
        let head = '';
        let id = -1;
        s.on('data', (d: Buffer) => {
          hash.update(d);
          if (id < 0) {
            head += d.subarray(0, 32).toString('latin1');
            const m = /^SSH-2\.0-c(\d+)\r\n/.exec(head);
            if (m) id = Number(m[1]);
          }
          if (!s.write(d)) s.pause();
        });
        s.on('drain', () => s.resume());
        s.on('end', () => {
          if (id >= 0) receivedBy.set(id, hash.digest('hex'));
          s.end();
        });
      });
      const resetter = await server((s) => s.once('data', () => s.resetAndDestroy()));

      const mux = new Multiplexer({
        ...TRANSPORT_OPTIONS[name],
        // 1 s, not less: on a saturated machine a healthy transfer can pause for a few hundred ms.
        idleTimeoutMs: 1000,
        routes: [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward((info) => targets.get(info.local.port)!) }],
      });
      const targets = new Map<number, UpstreamAddress>();
      const echoListener = (await mux.listen({ port: 0, backlog: 1024 })).port;
      targets.set(echoListener, { host: '127.0.0.1', port: echo.port });
      const resetListener = (await mux.listen({ port: 0, backlog: 1024 })).port;
      targets.set(resetListener, { host: '127.0.0.1', port: resetter.port });

      const rand = prng(SEED);
      const mismatches: string[] = [];
      let transfersRunning = TRANSFERS;

      /** One bulk transfer: seeded pieces with backpressure, then FIN; the echo must match. */
      async function transfer(id: number): Promise<void> {
        const payload = Buffer.concat([hello(id), prng(SEED ^ id).bytes(TRANSFER_BYTES)]);
        const socket = connect({ host: '127.0.0.1', port: echoListener, allowHalfOpen: true });
        socket.on('error', (err) => mismatches.push(`transfer #${id}: ${err.message}`));
        const got: Buffer[] = [];
        socket.on('data', (d: Buffer) => got.push(d));
        const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
        socket.on('end', () => socket.end());
        await once(socket, 'connect');
        const pieces = prng(SEED + id);
        for (let off = 0; off < payload.length; ) {
          const n = pieces.range(1, 256 * 1024);
          if (!socket.write(payload.subarray(off, off + n))) await once(socket, 'drain');
          off += n;
        }
        socket.end();
        await ended;
        if (dump) progress.push(`t${id} done`);
        const all = Buffer.concat(got);
        if (sha(all) !== sha(payload)) mismatches.push(`transfer #${id}: echo ${all.length}/${payload.length} bytes, not the bytes sent`);
        if (receivedBy.get(id) !== sha(payload)) mismatches.push(`transfer #${id}: the upstream got a different stream`);
      }

      const victims: Record<Victim, number> = { 'client-close': 0, 'client-reset': 0, 'upstream-reset': 0, idle: 0 };
      let victimIds = TRANSFERS;
      /** One connection ended early beside the transfers; resolves when the client saw it close. */
      async function victim(kind: Victim): Promise<void> {
        const id = victimIds++;
        victims[kind]++;
        const socket = connect({ host: '127.0.0.1', port: kind === 'upstream-reset' ? resetListener : echoListener, allowHalfOpen: true });
        socket.on('error', () => {});
        let gotBytes = 0;
        socket.on('data', (d: Buffer) => (gotBytes += d.length));
        // Half-open like the transfers: when the multiplexer ends the connection, so does the client.
        socket.on('end', () => socket.end());
        const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
        const connected = await new Promise<boolean>((resolve) => {
          socket.once('connect', () => resolve(true));
          socket.once('close', () => resolve(false));
        });
        if (!connected) {
          mismatches.push(`victim #${id} (${kind}): could not connect`);
          return;
        }
        const body = Buffer.concat([hello(id), rand.bytes(rand.range(1, 128 * 1024))]);
        switch (kind) {
          case 'client-close':
            // Gone while its echo is still coming back: the relay's writes to it fail or drain away.
            socket.write(body);
            socket.end();
            setImmediate(() => socket.destroy());
            break;
          case 'client-reset':
            socket.write(body);
            await until(() => gotBytes > 0 || socket.destroyed, 'some echo', 20_000);
            socket.resetAndDestroy();
            break;
          case 'upstream-reset':
            socket.write(body);
            break;
          case 'idle':
            socket.write(hello(id)); // routed, then silent until the idle timeout closes it
            break;
        }
        await closed;
        if (dump) progress.push(`v${id} ${kind} done`);
      }

      const progress: string[] = [];
      const dump = process.env.GATE_STRESS_DEBUG
        ? setInterval(
            () => console.error(transfersRunning, victimIds, mux.openConnections, JSON.stringify(victims), progress.slice(-5)),
            2000,
          )
        : undefined;
      const churn = async (): Promise<void> => {
        while (transfersRunning > 0 && victimIds - TRANSFERS < MAX_VICTIMS) await victim(rand.pick(VICTIMS));
      };
      await Promise.all([
        ...Array.from({ length: TRANSFERS }, (_, id) => transfer(id).finally(() => transfersRunning--)),
        ...Array.from({ length: CHURNERS }, churn),
      ]);
      clearInterval(dump);
      await until(() => mux.openConnections === 0, 'the multiplexer to settle', 20_000);

      t.same(mismatches.slice(0, 10), [], `every transfer byte-exact on its own connection (${mismatches.length} mismatches)`);
      const failures = mux.stats().failures;
      t.equal(failures[ErrorCodes.IDLE_TIMEOUT] ?? 0, victims.idle, 'each idle connection, and only those, timed out');
      t.equal(failures[ErrorCodes.UPSTREAM_RESET] ?? 0, victims['upstream-reset'], 'each upstream reset named as such');
      const clientResets = failures[ErrorCodes.CLIENT_RESET] ?? 0;
      // A client that closes while its echo is on the way may reset the relay's write (or not).
      t.ok(
        clientResets >= victims['client-reset'] && clientResets <= victims['client-reset'] + victims['client-close'],
        `client resets ${clientResets}: every reset client, at most the closing ones besides`,
      );
      const otherCodes = Object.keys(failures).filter(
        (c) => c !== ErrorCodes.IDLE_TIMEOUT && c !== ErrorCodes.UPSTREAM_RESET && c !== ErrorCodes.CLIENT_RESET,
      );
      t.same(otherCodes, [], 'no other failure');
      t.ok(victimIds - TRANSFERS > TRANSFERS, `the churn ran beside the transfers (${victimIds - TRANSFERS} connections ended early)`);

      await mux.close({ graceMs: 100 });
      for (const s of [echo, resetter]) for (const socket of s.sockets) socket.destroy();
      await Promise.all([echo, resetter].map((s) => closeServer(s.server)));
      await until(
        () => liveHandles().sockets <= before.sockets && liveHandles().servers <= before.servers,
        'sockets and listeners to close',
        10_000,
      );
      t.same(liveHandles(), before, 'no socket, timer or listener left');
      await until(() => (descriptors().socket ?? 0) <= (fdsBefore.socket ?? 0), 'socket descriptors to close', 10_000);
      const fdsAfter = descriptors();
      t.equal(fdsAfter.socket ?? 0, fdsBefore.socket ?? 0, 'no socket descriptor left (the native side closes its duplicates)');
      // The native relay keeps up to 32 empty pipes (64 descriptors) for the next splice.
      t.ok(
        (fdsAfter.pipe ?? 0) - (fdsBefore.pipe ?? 0) <= 64,
        `pipes: ${fdsBefore.pipe ?? 0} before, ${fdsAfter.pipe ?? 0} after (at most the spare pipes more)`,
      );
      t.comment(
        `${TRANSFERS} transfers of ${TRANSFER_BYTES / 1048576} MiB each way; ended early beside them: ${JSON.stringify(victims)}; failures ${JSON.stringify(failures)}`,
      );
    },
  );
}
