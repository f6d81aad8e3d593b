/**
 * Under pressure: above the high-water mark one source address is held to its fair
 * share of the cap, and at the cap an undecided connection from the heaviest source makes room
 * for a newcomer from a lighter one. Routed connections are never shed.
 */
import t from 'tap';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { ConnectionBudget } from '../../lib/mux/connection-budget.js';
import { forward } from '../../lib/handlers/builders.js';
import type { MultiplexerOptions, Route } from '../../lib/mux/types.js';
import { captureLogs } from './log-capture.js';
import { closeServer, readUntil, startTaggedTcpServer, until } from '../helpers/net.js';

const echo = await startTaggedTcpServer('ECHO');
t.teardown(() => {
  for (const s of echo.sockets) s.destroy();
  return closeServer(echo.server);
});
const sshEcho: Route = { name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: echo.port }) };
/** The first two bytes of a TLS record header: a ClientHello that never finishes. */
const PARTIAL_TLS = Buffer.from([0x16, 0x03]);

interface Held {
  socket: Socket;
  received: Buffer[];
  closed: boolean;
}

async function withMux(
  options: Partial<MultiplexerOptions>,
  fn: (port: number, mux: Multiplexer, held: Held[]) => Promise<void>,
): Promise<void> {
  const mux = new Multiplexer({ routes: [sshEcho], detectTimeoutMs: 60_000, ...options });
  const { port } = await mux.listen({ port: 0 });
  const held: Held[] = [];
  try {
    await fn(port, mux, held);
  } finally {
    for (const h of held) h.socket.destroy();
    await mux.close({ graceMs: 50 });
  }
}

/** A connection from `from` that sends `bytes` and then waits; resolves once the mux counts it (or closed it). */
async function hold(port: number, mux: Multiplexer, held: Held[], from: string, bytes: Buffer = PARTIAL_TLS): Promise<Held> {
  const before = mux.stats().accepted;
  const socket = connect({ host: '127.0.0.1', port, localAddress: from });
  const h: Held = { socket, received: [], closed: false };
  socket.on('data', (d: Buffer) => h.received.push(d));
  socket.on('error', () => {});
  socket.on('close', () => (h.closed = true));
  await once(socket, 'connect');
  socket.write(bytes);
  held.push(h);
  await until(() => mux.stats().accepted > before, 'the connection to be accepted');
  return h;
}

async function sshEchoFrom(port: number, from: string, text: string): Promise<string> {
  const socket = connect({ host: '127.0.0.1', port, localAddress: from });
  socket.on('error', () => {});
  socket.write(`SSH-2.0-${text}\r\n`);
  const answer = await readUntil(socket, (s) => s.includes(text));
  socket.destroy();
  return answer;
}

t.test('below the high-water mark one address may open many; above it only its share', async (t) => {
  await withMux({ maxConnections: 20 }, async (port, mux, held) => {
    // cap 20, high water 0.8 → 16; share 0.1 → 2 per source under pressure.
    for (let i = 0; i < 16; i++) await hold(port, mux, held, '127.0.0.5');
    t.equal(mux.openConnections, 16, 'a NAT of 16 users behind one address is served below the mark');
    const over = await hold(port, mux, held, '127.0.0.5');
    await until(() => over.closed, 'the 17th from 127.0.0.5 to be closed');
    t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_FROM_SOURCE, 1, 'refused at accept: over its fair share');
    t.same(over.received, [], 'closed without a byte: nothing was read, nothing said');
    t.match(await sshEchoFrom(port, '127.0.0.6', 'other'), /^ECHO\n/, 'another address is served under pressure');
    t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_FROM_SOURCE, 1);
  });
});

t.test('at the cap: the oldest undecided connection of a heavier source is shed for a newcomer', async (t) => {
  const { logger, lines } = captureLogs();
  await withMux({ maxConnections: 10, highWater: 1, sourceShare: 0.5, logger }, async (port, mux, held) => {
    // Ten undecided: six from 127.0.1.1 (the heaviest), four from four other addresses.
    for (let i = 0; i < 6; i++) await hold(port, mux, held, '127.0.1.1');
    for (let i = 2; i < 6; i++) await hold(port, mux, held, `127.0.1.${i}`);
    t.equal(mux.openConnections, 10);
    const newcomer = await hold(port, mux, held, '127.0.2.1', Buffer.from('SSH-2.0-newcomer\r\n'));
    await until(() => Buffer.concat(newcomer.received).includes('newcomer'), 'the newcomer to be served');
    t.pass('a newcomer from a fresh address is served at the cap');
    const shed = held.filter((h) => h.closed);
    t.equal(shed.length, 1, 'exactly one connection made room');
    t.equal(shed[0], held[0], 'the oldest from the heaviest source');
    t.same([...Buffer.concat(shed[0]!.received)], [21, 3, 3, 0, 2, 2, 80], 'it was sending a ClientHello: a fatal internal_error alert');
    t.equal(mux.stats().failures.GATE_ERR_SHED, 1);
    t.match(
      lines.find((l) => l.code === 'GATE_ERR_SHED'),
      { protocol: 'tls-partial', remote: '127.0.1.1' },
      'logged with how far it got',
    );

    // A newcomer from the heaviest source (5 of 10, its share) takes nobody's slot.
    const same = await hold(port, mux, held, '127.0.1.1');
    await until(() => same.closed, 'the newcomer from 127.0.1.1 to be refused');
    t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_CONNECTIONS, 1, 'refused at the cap instead');
    t.equal(held.filter((h) => h.closed).length, 2, 'and nobody else was shed for it');
  });
});

t.test('routed connections are never shed: at a cap of routed ones a newcomer is refused', async (t) => {
  await withMux({ maxConnections: 3, highWater: 1, sourceShare: 1 }, async (port, mux, held) => {
    for (let i = 1; i <= 3; i++) {
      const h = await hold(port, mux, held, `127.0.3.${i}`, Buffer.from(`SSH-2.0-routed-${i}\r\n`));
      await until(() => Buffer.concat(h.received).includes(`routed-${i}`), 'the echo');
    }
    const newcomer = await hold(port, mux, held, '127.0.3.9');
    await until(() => newcomer.closed, 'the newcomer to be refused');
    t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_CONNECTIONS, 1);
    t.equal(held.filter((h) => h.closed).length, 1, 'the routed three are all still open');
  });
});

t.test('one budget shared by two multiplexers caps them together', async (t) => {
  const budget = new ConnectionBudget({ cap: 4, highWater: 1, sourceShare: 1 });
  const other = new Multiplexer({ routes: [sshEcho], budget, detectTimeoutMs: 60_000 });
  const { port: otherPort } = await other.listen({ port: 0 });
  t.teardown(() => other.close({ graceMs: 50 }));
  await withMux({ budget }, async (port, mux, held) => {
    t.equal(mux.maxConnections, 4);
    for (let i = 0; i < 2; i++) await hold(port, mux, held, '127.0.4.1', Buffer.from(`SSH-2.0-a${i}\r\n`));
    for (let i = 0; i < 2; i++) await hold(otherPort, other, held, '127.0.4.2', Buffer.from(`SSH-2.0-b${i}\r\n`));
    await until(() => budget.open === 4, 'four slots taken');
    const fifth = await hold(port, mux, held, '127.0.4.3', Buffer.from('SSH-2.0-c\r\n'));
    await until(() => fifth.closed, 'the fifth to be refused');
    t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_CONNECTIONS, 1, 'refused although this multiplexer holds only two');
    for (const h of held) h.socket.destroy();
    await until(() => budget.open === 0, 'every slot to come back');
    t.equal(budget.sources.sources, 0, 'and every source count');
  });
});

t.test('setOptions: a new cap and fair share for new connections, held slots kept', async (t) => {
  await withMux({ maxConnections: 2 }, async (port, mux, held) => {
    await hold(port, mux, held, '127.0.5.1');
    await hold(port, mux, held, '127.0.5.2');
    mux.setOptions({ maxConnections: 3, detectTimeoutMs: 60_000 });
    t.equal(mux.maxConnections, 3);
    const third = await hold(port, mux, held, '127.0.5.3');
    const fourth = await hold(port, mux, held, '127.0.5.3');
    await until(() => fourth.closed, 'the fourth to be refused');
    t.notOk(third.closed, 'the third fits under the new cap');
    t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_CONNECTIONS, 1);
  });
});

t.test(
  "behind a PROXY-speaking balancer: the fair share counts the header's client; a connection without its header yet is shed",
  async (t) => {
    const proxyProtocol = { mode: 'on' as const, trusted: ['127.0.0.0/8'] };
    const header = (client: string): Buffer => Buffer.from(`PROXY TCP4 ${client} 192.0.2.1 4000 443\r\n`);
    const routed = async (port: number, mux: Multiplexer, held: Held[], client: string, tag: string): Promise<Held> => {
      const h = await hold(port, mux, held, '127.0.6.1', Buffer.concat([header(client), Buffer.from(`SSH-2.0-${tag}\r\n`)]));
      await until(() => Buffer.concat(h.received).includes(tag) || h.closed, `${tag} to be answered`);
      return h;
    };
    await withMux({ maxConnections: 10, highWater: 0.6, sourceShare: 0.2, proxyProtocol }, async (port, mux, held) => {
      // Every socket comes from the balancer (127.0.6.1); the clients are in the headers.
      for (let i = 0; i < 5; i++)
        t.notOk((await routed(port, mux, held, '198.51.100.7', `nat-${i}`)).closed, `198.51.100.7 #${i + 1} served below the mark`);
      // At 6 of 10 (the high-water mark) 198.51.100.7 holds 5, over its share of 2.
      t.ok((await routed(port, mux, held, '198.51.100.7', 'nat-5')).closed, 'the sixth is refused once its header names its client');
      t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_FROM_SOURCE, 1);
      t.notOk((await routed(port, mux, held, '198.51.100.8', 'other')).closed, 'another client behind the same balancer is served');
      // Fill the cap with connections whose header has not come, then one more.
      const headerless: Held[] = [];
      for (let i = 0; i < 4; i++) headerless.push(await hold(port, mux, held, '127.0.6.1', Buffer.alloc(0)));
      await until(() => mux.openConnections === 10, 'the cap to be reached');
      t.notOk((await routed(port, mux, held, '198.51.100.9', 'late')).closed, 'a newcomer at the cap is served');
      t.equal(mux.stats().failures.GATE_ERR_SHED, 1, 'one made room');
      t.ok(headerless[0]!.closed, 'the oldest connection without a header, whose client is not known yet');
    });
  },
);

t.test('a maxConnections above what the open-file limit carries is kept, with a warning', async (t) => {
  const { logger, lines } = captureLogs();
  const mux = new Multiplexer({ routes: [sshEcho], maxConnections: 2 ** 40, logger });
  t.equal(mux.maxConnections, 2 ** 40);
  t.match(lines.find((l) => l.level === 40)?.msg, /above what the open-file limit carries .* raise the limit \(systemd LimitNOFILE\)/);
  await mux.close({ graceMs: 0 });
});
