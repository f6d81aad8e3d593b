/**
 * 10,000 connections through one multiplexer, 100 at a time, with faults mixed in by a seeded
 * schedule: upstream refuses, accepts then resets, stalls (dial and idle timeouts), half-closes
 * first; clients reset mid-hello and mid-stream. Every healthy connection's bytes must arrive
 * byte-exact (SHA-256 both ways), each fault must end with its own code, and afterwards no
 * socket, timer or listener may remain.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { forward } from '../../lib/handlers/builders.js';
import type { UpstreamAddress } from '../../lib/handlers/types.js';
import { closeServer, liveHandles, refusedPort, trackedServer as server, until } from '../helpers/net.js';
import { prng } from '../helpers/prng.js';
import { stalledListener } from './stalled-listener.js';
import { availableTransports, TRANSPORT_LABEL, TRANSPORT_OPTIONS } from '../helpers/transports.js';

const TOTAL = Number(process.env.GATE_FAULTS_TOTAL ?? 10_000);
const CONCURRENCY = 100;
const SEED = 0x5eed_f00d;

type Kind =
  | 'echo'
  | 'upstream-first'
  | 'refuse'
  | 'upstream-reset'
  | 'stall-idle'
  | 'stall-dial'
  | 'client-reset-hello'
  | 'client-reset-stream';
const SCHEDULE: Array<[Kind, number]> = [
  ['echo', 55],
  ['upstream-first', 15],
  ['refuse', 6],
  ['upstream-reset', 6],
  ['stall-idle', 2],
  ['stall-dial', 2],
  ['client-reset-hello', 7],
  ['client-reset-stream', 7],
];
/** The code each fault must end with (healthy kinds: none). */
const EXPECTED_CODE: Partial<Record<Kind, string>> = {
  refuse: 'GATE_ERR_DIAL_REFUSED',
  'upstream-reset': 'GATE_ERR_UPSTREAM_RESET',
  'stall-idle': 'GATE_ERR_IDLE_TIMEOUT',
  'stall-dial': 'GATE_ERR_DIAL_TIMEOUT',
  'client-reset-hello': 'GATE_ERR_CLIENT_CLOSED',
  'client-reset-stream': 'GATE_ERR_CLIENT_RESET',
};

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
/** What an upstream-first server sends for client `id` (deterministic, so the client can check it). */
const upstreamPayload = (id: number): Buffer => prng(id ^ 0xabcdef).bytes(1 + (id % 7) * 3000);

// Four transports of 10,000 connections each: longer than the runner's default per file on a
// loaded machine (or a sanitizer build), so this file sets its own limit.
t.setTimeout(300_000);

// The native relay (recv/send and splice), the bare handles (the default) and net.Socket carry forwarded connections in
// different code; the same schedule must end the same way on each.
for (const name of availableTransports(t))
  t.test(
    `${TOTAL} connections on ${TRANSPORT_LABEL[name]} with faults mixed in: healthy ones byte-exact, faults coded, nothing left`,
    async (t) => {
      const before = liveHandles();
      const received = new Map<number, string>(); // upstream-first: what the upstream got, by client id
      const echo = await server((s) => s.pipe(s));
      const first = await server((s) => {
        let buf = Buffer.alloc(0);
        let id = -1;
        s.on('data', (d: Buffer) => {
          buf = Buffer.concat([buf, d]);
          if (id < 0) {
            const m = /^SSH-2\.0-c(\d+)\r\n/.exec(buf.subarray(0, 32).toString('latin1'));
            if (!m) return;
            id = Number(m[1]);
            s.end(upstreamPayload(id)); // FIN first, while the client is still sending
          }
        });
        s.on('end', () => received.set(id, sha(buf)));
      });
      const resetter = await server((s) => s.once('data', () => s.resetAndDestroy()));
      const staller = await server(() => {}); // accepts, never reads or writes
      const stalled = await stalledListener();
      const refused = await refusedPort();

      // Dial timeout under the idle timeout: a stalled dial is reported as such, not as idleness.
      const mux = new Multiplexer({
        ...TRANSPORT_OPTIONS[name],
        // 1 s, not less: on a saturated machine a healthy transfer can pause for a few hundred ms.
        idleTimeoutMs: 1000,
        routes: [
          {
            name: 'ssh',
            match: { protocol: 'ssh' },
            handler: forward((info) => targets.get(info.local.port)!, { dialTimeoutMs: 200 }),
          },
        ],
      });
      // One listener per upstream behaviour: the listener port a client picks says where it goes.
      const targets = new Map<number, UpstreamAddress>();
      const listenerFor = new Map<Kind, number>();
      for (const [kind, port] of [
        ['echo', echo.port],
        ['upstream-first', first.port],
        ['refuse', refused],
        ['upstream-reset', resetter.port],
        ['stall-idle', staller.port],
        ['stall-dial', stalled.port],
      ] as Array<[Kind, number]>) {
        const { port: listenPort } = await mux.listen({ port: 0, backlog: 1024 });
        targets.set(listenPort, { host: '127.0.0.1', port });
        listenerFor.set(kind, listenPort);
      }
      listenerFor.set('client-reset-hello', listenerFor.get('echo')!);
      listenerFor.set('client-reset-stream', listenerFor.get('echo')!);

      const rand = prng(SEED);
      const weights = SCHEDULE.reduce((a, [, w]) => a + w, 0);
      const pickKind = (): Kind => {
        let r = rand.int(weights);
        for (const [kind, w] of SCHEDULE) if ((r -= w) < 0) return kind;
        return 'echo';
      };
      const plan = Array.from({ length: TOTAL }, (_, id) => {
        const kind = pickKind();
        const size = rand.chance(0.02) ? rand.range(64 * 1024, 256 * 1024) : rand.range(1, 8 * 1024);
        return { id, kind, payload: Buffer.concat([Buffer.from(`SSH-2.0-c${id}\r\n`), rand.bytes(size)]), chunks: rand.range(1, 6) };
      });

      const counts: Record<string, number> = {};
      const mismatches: string[] = [];
      let bytesVerified = 0;

      const inFlight = new Map<number, string>();
      const dump = process.env.GATE_FAULTS_DEBUG
        ? setInterval(() => console.error([...inFlight.values()].join(' '), mux.openConnections), 3000)
        : undefined;
      async function runOne(p: (typeof plan)[number]): Promise<void> {
        inFlight.set(p.id, p.kind);
        try {
          await runOneInner(p);
        } finally {
          inFlight.delete(p.id);
        }
      }
      async function runOneInner(p: (typeof plan)[number]): Promise<void> {
        counts[p.kind] = (counts[p.kind] ?? 0) + 1;
        const socket = connect({ host: '127.0.0.1', port: listenerFor.get(p.kind)!, allowHalfOpen: true });
        socket.on('error', () => {});
        // Half-open so our FIN order is ours to choose; once the other side is done, so are we.
        socket.on('end', () => socket.end());
        const got: Buffer[] = [];
        let gotBytes = 0;
        socket.on('data', (d: Buffer) => {
          got.push(d);
          gotBytes += d.length;
        });
        // Not once(): it rejects on 'error', and resets are expected here.
        const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
        const connected = await new Promise<boolean>((resolve) => {
          socket.once('connect', () => resolve(true));
          socket.once('close', () => resolve(false));
        });
        if (!connected) {
          mismatches.push(`#${p.id} (${p.kind}): could not connect`);
          return;
        }
        switch (p.kind) {
          case 'client-reset-hello':
            socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]));
            await new Promise((r) => setTimeout(r, 5));
            socket.resetAndDestroy();
            break;
          case 'client-reset-stream':
            socket.write(p.payload.subarray(0, Math.min(p.payload.length, 20 + (p.id % 100))));
            await until(() => gotBytes > 0, 'some echo', 10_000);
            socket.resetAndDestroy();
            break;
          case 'echo':
          case 'upstream-first': {
            // Send in seeded pieces, then FIN: the echo (or the upstream's own payload) must be exact.
            const step = Math.ceil(p.payload.length / p.chunks);
            for (let off = 0; off < p.payload.length; off += step) {
              if (!socket.write(p.payload.subarray(off, off + step))) await once(socket, 'drain');
            }
            socket.end();
            break;
          }
          default:
            socket.write(p.payload.subarray(0, 64));
        }
        await closed;
        const all = Buffer.concat(got);
        if (p.kind === 'echo') {
          if (sha(all) !== sha(p.payload)) mismatches.push(`echo #${p.id}: ${all.length}/${p.payload.length} bytes`);
          else bytesVerified += all.length * 2;
        } else if (p.kind === 'upstream-first') {
          const expected = upstreamPayload(p.id);
          if (sha(all) !== sha(expected)) mismatches.push(`upstream-first #${p.id}: got ${all.length}/${expected.length} bytes`);
          else bytesVerified += all.length;
        }
      }

      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < plan.length) await runOne(plan[next++]!);
        }),
      );
      clearInterval(dump);
      await until(() => mux.openConnections === 0, 'the multiplexer to settle', 10_000);
      // Client-side checks of the upstream-first half: what the upstream received after its own FIN.
      for (const p of plan) {
        if (p.kind !== 'upstream-first') continue;
        if (received.get(p.id) !== sha(p.payload)) mismatches.push(`upstream-first #${p.id}: upstream got a different stream`);
        else bytesVerified += p.payload.length;
      }

      const stats = mux.stats();
      t.same(mismatches.slice(0, 10), [], `every healthy connection byte-exact (${mismatches.length} mismatches)`);
      const expectedFailures: Record<string, number> = {};
      for (const [kind, code] of Object.entries(EXPECTED_CODE)) if (counts[kind]) expectedFailures[code] = counts[kind];
      t.same(stats.failures, expectedFailures, 'each fault ended with its own code, healthy ones with none');
      t.equal(stats.accepted, TOTAL);
      t.equal(
        stats.byRoute.ssh?.errors,
        TOTAL - (counts.echo ?? 0) - (counts['upstream-first'] ?? 0) - (counts['client-reset-hello'] ?? 0),
        'route errors = routed faults',
      );

      await mux.close({ graceMs: 100 });
      // The stalling upstream never reads, so it never sees the multiplexer's FIN: close its side.
      for (const s of [echo, first, resetter, staller]) for (const socket of s.sockets) socket.destroy();
      await Promise.all([echo, first, resetter, staller].map((s) => closeServer(s.server)));
      await stalled.close();
      await until(() => liveHandles().sockets <= before.sockets, 'sockets to close', 10_000);
      const after = liveHandles();
      t.same(after, before, 'no socket, timer or listener left');
      t.equal(mux.openConnections, 0);
      t.comment(
        `faults: ${TOTAL} connections ${JSON.stringify(counts)}; ${(bytesVerified / 1048576).toFixed(1)} MiB hash-verified; failures ${JSON.stringify(stats.failures)}`,
      );
    },
  );
