/**
 * Slowloris: 2,000 connections dribble a never-ending ClientHello one byte a second while real TLS
 * clients keep coming. The detection deadline must close every slow one (GATE_ERR_DETECT_TIMEOUT,
 * counted in stats) and every real client must be served, also while the slow ones hold their
 * sockets. Counts and codes only, no durations. Needs ~4,000 descriptors (client + server side);
 * the test checks the soft limit and says so instead of failing obscurely.
 */
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { execFileSync } from 'node:child_process';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { forward } from '../../lib/handlers/builders.js';
import { closeServer, readUntil, startTaggedTlsServer, tlsClient, until } from '../helpers/net.js';
import { availableTransports, TRANSPORT_LABEL, TRANSPORT_OPTIONS } from '../helpers/transports.js';

const SLOW = 2000;
const DETECT_TIMEOUT_MS = 3000;
const OPEN_BATCH = 100; // connections opened per batch, one batch every 50 ms

function softFileLimit(): number {
  try {
    return Number(execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim());
  } catch {
    return NaN;
  }
}

// The real clients' connections are forwarded: run it on each transport that can carry them.
for (const name of availableTransports(t))
  t.test(
    `${SLOW} slowloris connections are closed by the detection deadline while real clients are served on ${TRANSPORT_LABEL[name]}`,
    async (t) => {
      const limit = softFileLimit();
      if (Number.isFinite(limit) && limit < SLOW * 2 + 200) {
        t.fail(`ulimit -n is ${limit}; this test needs ${SLOW * 2 + 200} (raise the soft limit: ulimit -n 8192)`);
        return;
      }
      const upstream = await startTaggedTlsServer('REAL');
      t.teardown(() => closeServer(upstream.server));
      const mux = new Multiplexer({
        ...TRANSPORT_OPTIONS[name],
        detectTimeoutMs: DETECT_TIMEOUT_MS,
        routes: [{ name: 'real', match: { sni: 'localhost' }, handler: forward({ host: '127.0.0.1', port: upstream.port }) }],
      });
      const { port } = await mux.listen({ port: 0, backlog: 4096 });
      t.teardown(() => mux.close({ graceMs: 100 }));

      // A record header announcing 16 KiB of handshake, then the hello's first bytes: each is valid
      // so far, and the hello can never complete at one byte a second before the deadline.
      const script = Buffer.from([0x16, 0x03, 0x01, 0x3f, 0xff, 0x01, 0x00, 0x3f, 0xfb, 0x03, 0x03, ...Buffer.alloc(64, 7)]);
      interface Slow {
        socket: Socket;
        sent: number;
        closedByServer: boolean;
        closed: boolean;
      }
      const slow: Slow[] = [];
      let closedCount = 0;
      const open = (): void => {
        const socket = connect({ host: '127.0.0.1', port });
        const s: Slow = { socket, sent: 0, closedByServer: false, closed: false };
        // The multiplexer's close arrives as a FIN, or as a reset when a dribbled byte was still
        // unread in its receive buffer (Linux answers close() with RST then): both are its doing.
        socket.on('error', (err: NodeJS.ErrnoException) => {
          if (err.code === 'ECONNRESET') s.closedByServer = true;
        });
        socket.on('end', () => (s.closedByServer = true));
        socket.on('close', () => {
          s.closed = true;
          closedCount++;
        });
        socket.once('connect', () => {
          socket.write(script.subarray(0, 1));
          s.sent = 1;
        });
        slow.push(s);
      };
      const dribble = setInterval(() => {
        for (const s of slow) {
          if (s.closed || s.sent === 0 || s.sent >= script.length) continue;
          s.socket.write(script.subarray(s.sent, s.sent + 1));
          s.sent++;
        }
      }, 1000);
      t.teardown(() => {
        clearInterval(dribble);
        for (const s of slow) s.socket.destroy();
      });

      // Real clients, one after another for as long as the attack lasts.
      let served = 0;
      let servedUnderAttack = 0;
      let realFailures = 0;
      let attackOver = false;
      const real = (async () => {
        while (!attackOver) {
          const openBefore = slow.length - closedCount;
          try {
            const socket = await tlsClient(port, { servername: 'localhost' });
            socket.write('ping\n');
            const answer = await readUntil(socket, (s) => s.includes('ping'));
            socket.destroy();
            if (!answer.startsWith('REAL sni=localhost')) throw new Error(answer);
            served++;
            // Slow ones open before and after this client: it was served in the middle of the attack.
            if (openBefore >= SLOW / 2 && slow.length - closedCount >= SLOW / 2) servedUnderAttack++;
          } catch {
            realFailures++;
          }
          await new Promise((r) => setTimeout(r, 20));
        }
      })();

      for (let i = 0; i < SLOW; i += OPEN_BATCH) {
        for (let j = 0; j < OPEN_BATCH; j++) open();
        await new Promise((r) => setTimeout(r, 50));
      }
      await until(() => closedCount === SLOW, 'every slow connection to be closed', DETECT_TIMEOUT_MS * 10);
      attackOver = true;
      await real;
      clearInterval(dribble);
      await until(() => mux.openConnections === 0, 'the multiplexer to settle');

      const stats = mux.stats();
      t.equal(slow.filter((s) => s.closedByServer).length, SLOW, 'every slow connection was closed by the multiplexer');
      t.equal(stats.failures.GATE_ERR_DETECT_TIMEOUT, SLOW, 'each with GATE_ERR_DETECT_TIMEOUT');
      const maxSent = Math.max(...slow.map((s) => s.sent));
      t.ok(maxSent < script.length, `no slow connection got to finish its script (most bytes sent: ${maxSent})`);
      t.equal(realFailures, 0, 'no real client failed');
      t.ok(
        servedUnderAttack >= 3,
        `real clients served while at least ${SLOW / 2} slow ones were open: ${servedUnderAttack} (all: ${served})`,
      );
      t.equal(stats.byRoute.real?.connections, served, 'every real client went through the route');
      t.comment(
        `slowloris: ${SLOW} closed by the deadline; ${served} real TLS clients served, ${servedUnderAttack} under attack; most bytes dribbled ${maxSent}`,
      );
    },
  );
