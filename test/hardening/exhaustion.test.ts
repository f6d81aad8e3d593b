/**
 * Safe under exhaustion by default: the example proxy runs under `ulimit -n 256` with
 * no limit configured. Its cap comes from the descriptor limit; a flood of connections that never
 * finish a ClientHello, from one address and then spread over 127.0.0.0/8, is refused or shed
 * with its codes while a client from another address gets /webapi/ping, an already-routed
 * transfer finishes byte-exact, nothing stays open, and the log has a bounded number of lines
 * whose counts add up exactly.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { connectionCapFor } from '../../lib/mux/descriptor-limit.js';
import { DEFAULT_HIGH_WATER, DEFAULT_SOURCE_SHARE } from '../../lib/mux/connection-budget.js';
import { DEFAULT_LOG_BURST } from '../../lib/log-limiter.js';
import { startProxyCommand, stopProxyCommand } from '../helpers/proxy-command.js';
import { closeServer, readUntil, startTaggedTcpServer, until } from '../helpers/net.js';
import { prng } from '../helpers/prng.js';
import { tempDir } from '../helpers/temp-dir.js';

const OPEN_FILES = 256;
const CAP = connectionCapFor(OPEN_FILES); // 88
const FLOOD = 300;
const BATCH = 50;
/** The first two bytes of a TLS record header, then nothing: a ClientHello that never comes. */
const PARTIAL_TLS = Buffer.from([0x16, 0x03]);

interface Flood {
  sockets: Socket[];
  closedByServer: () => number;
  held: () => number;
  destroy: () => void;
}

/** Opens `count` connections in bounded batches, from `addressOf(i)`, each sending PARTIAL_TLS. */
async function flood(port: number, count: number, addressOf: (i: number) => string): Promise<Flood> {
  const sockets: Socket[] = [];
  let closed = 0;
  let destroying = false;
  for (let i = 0; i < count; i += BATCH) {
    const batch: Array<Promise<unknown>> = [];
    for (let j = i; j < Math.min(count, i + BATCH); j++) {
      const socket = connect({ host: '127.0.0.1', port, localAddress: addressOf(j) });
      socket.on('error', () => {});
      socket.resume(); // a shed one gets an alert first: read it, or its 'close' never comes
      socket.on('close', () => {
        if (!destroying) closed++;
      });
      batch.push(Promise.race([once(socket, 'connect').then(() => socket.write(PARTIAL_TLS)), once(socket, 'close')]));
      sockets.push(socket);
    }
    await Promise.all(batch);
  }
  return {
    sockets,
    closedByServer: () => closed,
    held: () => sockets.filter((s) => !s.destroyed).length,
    destroy: () => {
      destroying = true;
      for (const s of sockets) s.destroy();
    },
  };
}

function ping(port: number, ca: string, localAddress: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/webapi/ping', ca, servername: 'localhost', localAddress, agent: false },
      (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

interface LogLine {
  code?: string;
  protocol?: string;
  suppressed?: number;
  msg: string;
}

t.test(`under ulimit -n ${OPEN_FILES}: floods are refused at the derived cap, real clients served, logs bounded and exact`, async (t) => {
  const upstream = await startTaggedTcpServer('SSH-2.0-upstream');
  t.teardown(() => {
    for (const s of upstream.sockets) s.destroy();
    return closeServer(upstream.server);
  });
  const dir = await tempDir(t, 'exhaustion');
  const config = join(dir, 'gate.yaml');
  // No max_connections, no per-source limit, no idle timeout: the defaults a new user runs with.
  // A long detection deadline, so the flood holds its connections for as long as the test says.
  writeFileSync(
    config,
    `version: v3\ndata_dir: ${join(dir, 'data')}\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n  public_addr: localhost\n  detect_timeout: 120s\n  upstreams:\n    ssh: 127.0.0.1:${upstream.port}\n`,
  );
  const { child, output } = await startProxyCommand(t, ['--config', config], dir, { openFiles: OPEN_FILES });
  const port = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(output())![1]);
  const ca = readFileSync(/development CA: (\S+)/.exec(output())![1]!, 'utf8');
  t.match(
    output(),
    `at most ${CAP} open connections: (open-file limit ${OPEN_FILES} - `,
    'the cap derived from the descriptor limit is logged at start',
  );
  const descriptors = (): number => readdirSync(`/proc/${child.pid}/fd`).length;

  const baseline = descriptors();
  t.equal((await ping(port, ca, '127.0.0.2')).status, 200, 'ping before the flood');
  // The proxy closes its side of the ping a moment after the client has its answer.
  await until(() => descriptors() === baseline, 'the ping to be closed on both ends');

  // An SSH session routed before the flood (two descriptors: client and upstream).
  const routed = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.3' });
  routed.write('SSH-2.0-before-the-flood\r\n');
  await readUntil(routed, (s) => s.includes('before-the-flood'));
  await until(() => descriptors() === baseline + 2, 'the routed session to hold its two descriptors');

  // 1. From one address. Below the high-water mark it may open many (a NAT); from there on it is
  // held to its share, which it already has: every further connection is refused at accept.
  const one = await flood(port, FLOOD, () => '127.0.0.1');
  const serverHeld = (): number => descriptors() - baseline - 2;
  await until(() => one.held() === serverHeld(), 'both ends to agree on what is open', 10_000);
  const pressureAt = Math.ceil(CAP * DEFAULT_HIGH_WATER);
  t.equal(one.held(), pressureAt - 1, `it got the slots up to the high-water mark (${pressureAt} with the routed session) and no more`);
  t.equal(one.closedByServer(), FLOOD - (pressureAt - 1), 'the rest were refused');

  const during = await ping(port, ca, '127.0.0.2');
  t.equal(during.status, 200, 'a client from another address gets /webapi/ping during the flood');
  t.match(JSON.parse(during.body), { server_version: /./ });
  const payload = prng(0x16).bytes(256 * 1024);
  const echoed = new Promise<Buffer>((resolve) => {
    const got: Buffer[] = [];
    let n = 0;
    routed.on('data', (d: Buffer) => {
      got.push(d);
      n += d.length;
      if (n >= payload.length) resolve(Buffer.concat(got));
    });
    routed.resume();
  });
  routed.write(payload);
  const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
  t.equal(sha(await echoed), sha(payload), 'the routed session moves 256 KiB byte-exact during the flood');
  const fresh = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.4' });
  fresh.write('SSH-2.0-during-the-flood\r\n');
  t.match(
    await readUntil(fresh, (s) => s.includes('during-the-flood')),
    /^SSH-2\.0-upstream\n/,
    'a new session from another address still dials its upstream',
  );
  fresh.destroy();
  routed.destroy();
  one.destroy();
  await until(() => descriptors() === baseline, 'every descriptor of the flood and the sessions to be closed', 10_000);
  t.pass('nothing left open after the flood from one address');

  // 2. Spread over 127.0.0.0/8, two connections per address: the fair share never bites, the cap
  // does. At the cap a newcomer from a lighter address takes the slot of the oldest undecided
  // connection of a heavier one; the cap holds, and the proxy keeps answering.
  const spread = await flood(port, FLOOD, (i) => `127.1.${Math.floor(i / 2 / 250)}.${1 + ((i >> 1) % 250)}`);
  await until(() => spread.held() === descriptors() - baseline, 'both ends to agree on what is open', 10_000);
  t.ok(spread.held() <= CAP, `the cap holds: ${spread.held()} of ${FLOOD} open, at most ${CAP}`);
  t.equal(spread.held() + spread.closedByServer(), FLOOD);
  t.equal((await ping(port, ca, '127.2.0.1')).status, 200, 'ping from a fresh address at the cap');
  // The ping took one more slot by shedding: read what is held once the client has seen that
  // close too (read at once, the shed connection could still count as held, and later as closed
  // by the test instead of by the server).
  await until(() => spread.held() === descriptors() - baseline, 'both ends to agree after the ping', 10_000);
  const spreadHeld = spread.held();
  spread.destroy();
  t.equal((await ping(port, ca, '127.1.0.1')).status, 200, 'and at once when the flood stops, from a flooding address');
  await until(() => descriptors() === baseline, 'every descriptor of the spread flood to be closed', 10_000);
  t.pass('nothing left open after the spread flood');

  t.equal(await stopProxyCommand(child), 0, 'SIGTERM: drains and exits 0');
  const lines = output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
  const failureLines = lines.filter((l) => l.code !== undefined);
  const counted = (code: string): { lines: number; total: number } => {
    const of = failureLines.filter((l) => l.code === code);
    return { lines: of.length, total: of.reduce((n, l) => n + (l.suppressed ?? 1), 0) };
  };
  const refusedOne = counted('GATE_ERR_TOO_MANY_FROM_SOURCE');
  const shed = counted('GATE_ERR_SHED');
  const atCap = counted('GATE_ERR_TOO_MANY_CONNECTIONS');
  const closed = counted('GATE_ERR_CLIENT_CLOSED');
  t.equal(
    refusedOne.total,
    one.closedByServer(),
    `every refusal of the one-address flood is counted (${refusedOne.total} in ${refusedOne.lines} lines)`,
  );
  t.equal(
    shed.total + atCap.total,
    spread.closedByServer(),
    `every shed (${shed.total}) and refusal at the cap (${atCap.total}) of the spread flood is counted`,
  );
  t.equal(closed.total, pressureAt - 1 + spreadHeld, 'and every flood connection the test closed itself');
  t.ok(
    failureLines
      .filter((l) => l.code === 'GATE_ERR_CLIENT_CLOSED' && l.suppressed === undefined)
      .every((l) => l.protocol === 'tls-partial'),
    'labelled tls-partial, not silent',
  );
  const perCode = new Map<string, number>();
  for (const l of failureLines) perCode.set(l.code!, (perCode.get(l.code!) ?? 0) + 1);
  for (const [code, n] of perCode) t.ok(n <= 2 * (DEFAULT_LOG_BURST + 1), `${code}: ${n} lines for many more failures`);
  t.ok(
    failureLines.length <= 8 * (DEFAULT_LOG_BURST + 1),
    `${failureLines.length} failure lines in all for ${2 * FLOOD} flood connections`,
  );
  t.comment(
    `cap ${CAP}; one address: ${pressureAt - 1} held, ${one.closedByServer()} refused; spread: ${spreadHeld} held, ${shed.total} shed, ${atCap.total} refused at the cap; ${failureLines.length} failure log lines; fair share ${Math.floor(CAP * DEFAULT_SOURCE_SHARE)}`,
  );
});
