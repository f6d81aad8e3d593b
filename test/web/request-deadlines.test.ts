// The web endpoints' header and request deadlines on a real proxy (GateProxy), whose web servers
// are handed their connections and so never get Node's own (issue 37): a partial request after
// TLS is answered 408 with the code and closed; a slow but complete body within the request
// deadline is read and answered; a keep-alive connection idle past the header deadline is not cut
// by it (Node's keep-alive rule closes it, quietly); HTTP/2 sessions get the same deadlines.
import t from 'tap';
import { connect as h2Connect } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { ErrorCodes } from '../../lib/errors.js';
import { AGENT_JOIN_PATH, PING_PATH } from '../../lib/wire/names.js';
import { startGateProxy, type RunningGateProxy } from '../helpers/gate-proxy.js';
import { webRequest } from '../helpers/web-abuse.js';

const HEADERS_MS = 300;
const REQUEST_MS = 1500;

/** A TLS connection to the proxy's web route whose received text is kept, and when it closed. */
interface Raw {
  socket: TLSSocket;
  text: () => string;
  closed: Promise<void>;
}

function raw(proxy: RunningGateProxy): Promise<Raw> {
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = tlsConnect({
      host: '127.0.0.1',
      port: proxy.port('multiplex'),
      servername: 'localhost',
      ca: proxy.ca,
      ALPNProtocols: ['http/1.1'],
    });
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    const closed = new Promise<void>((done) => socket.once('close', () => done()));
    socket.on('error', () => {});
    socket.once('secureConnect', () => resolve({ socket, text: () => text, closed }));
    socket.once('error', reject);
  });
}

/** Waits until `check` holds, polling; fails the wait (not the test) after `ms`. */
async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

function errorCode(text: string): string | undefined {
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  try {
    return (JSON.parse(body) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

t.test('web deadlines on handed-over connections', async (t) => {
  const proxy = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {},
    proxyService: { web_headers_timeout: `${HEADERS_MS}ms`, web_request_timeout: `${REQUEST_MS}ms` },
    // The join endpoint's own body deadline longer than the request deadline, to see the latter.
    auth: { join_body_timeout: '10s' },
  });
  const target = { host: '127.0.0.1', port: proxy.port('multiplex'), ca: proxy.ca };

  t.test('a partial request after TLS is answered 408 and closed at the header deadline', async (t) => {
    const c = await raw(proxy);
    c.socket.write(`GET ${PING_PATH} HTTP/1.1\r\nHost: localhost\r\nX-Slow: `);
    const closed = await Promise.race([c.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 10_000))]);
    t.ok(closed, 'the proxy closed the connection');
    t.match(c.text(), /^HTTP\/1\.1 408 /, 'answered 408');
    t.equal(errorCode(c.text()), ErrorCodes.WEB_HEADERS_TIMEOUT, 'with the header deadline code');
  });

  t.test('headers dribbled a byte at a time are cut at the deadline, not at each byte', async (t) => {
    const answer = await webRequest(target, PING_PATH, {
      method: 'GET',
      headers: { 'X-Slow': 'x'.repeat(200) },
      dribble: { chunkBytes: 1, everyMs: 20, head: true },
      giveUpMs: 10_000,
    });
    t.equal(answer.status, 408);
    t.equal(answer.code, ErrorCodes.WEB_HEADERS_TIMEOUT);
  });

  t.test('a slow but complete body within the request deadline is read and answered', async (t) => {
    // About 600 ms of body: past the header deadline, within the request deadline.
    const body = JSON.stringify({ token: 'not-a-token-of-this-proxy', name: 'slow-agent', csr: 'x'.repeat(40) });
    const answer = await webRequest(target, AGENT_JOIN_PATH, {
      body,
      dribble: { chunkBytes: Math.ceil(body.length / 6), everyMs: 100 },
      giveUpMs: 10_000,
    });
    t.not(answer.status, 408, `answered by the join endpoint (${answer.status} ${answer.code})`);
    t.equal(answer.code, ErrorCodes.JOIN_TOKEN_INVALID, 'which read the whole body and refused the token');
  });

  t.test('a body that never completes is answered 408 at the request deadline', async (t) => {
    const c = await raw(proxy);
    c.socket.write(
      `POST ${AGENT_JOIN_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"tok`,
    );
    const closed = await Promise.race([c.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 10_000))]);
    t.ok(closed, 'the proxy closed the connection');
    t.match(c.text(), /^HTTP\/1\.1 408 /, 'answered 408');
    t.equal(errorCode(c.text()), ErrorCodes.WEB_REQUEST_TIMEOUT, 'with the request deadline code');
  });

  t.test('a keep-alive connection idle past the header deadline follows the keep-alive rule', async (t) => {
    const c = await raw(proxy);
    const ask = `GET ${PING_PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n`;
    c.socket.write(ask);
    t.ok(await until(() => /\r\n\r\n\{/.test(c.text()), 5000), 'first answer');
    t.match(c.text(), /^HTTP\/1\.1 200 /);
    // Idle for more than three header deadlines: still open, and serves the next request.
    await new Promise((r) => setTimeout(r, HEADERS_MS * 3));
    t.notOk(c.socket.destroyed, 'still open after idling past the header deadline');
    const before = c.text().length;
    c.socket.write(ask);
    t.ok(await until(() => /HTTP\/1\.1 200 /.test(c.text().slice(before)), 5000), 'the second request on it is answered 200');
    // Then idle until Node's keep-alive timeout (5 s) closes it: quietly, no 408.
    const after = c.text().length;
    const closed = await Promise.race([c.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 15_000))]);
    t.ok(closed, 'closed by the keep-alive timeout');
    t.equal(c.text().slice(after), '', 'without a 408');
  });

  t.test('a keep-alive connection whose next request never completes is cut (allowance plus header deadline)', async (t) => {
    const c = await raw(proxy);
    c.socket.write(`GET ${PING_PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    t.ok(await until(() => /\r\n\r\n\{[\s\S]*\}$/.test(c.text()), 5000), 'first answer');
    const after = c.text().length;
    c.socket.write(`GET ${PING_PATH} HTTP/1.1\r\nHost: loc`);
    const closed = await Promise.race([c.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 15_000))]);
    t.ok(closed, 'closed');
    t.equal(errorCode(c.text().slice(after)), ErrorCodes.WEB_HEADERS_TIMEOUT, 'with a 408 and the header deadline code');
  });

  t.test('plaintext HTTP/1: a partial request is answered 408 and closed', async (t) => {
    const socket = netConnect({ host: '127.0.0.1', port: proxy.port('multiplex') });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => {});
    socket.write(`GET ${PING_PATH} HTTP/1.1\r\nHost: localhost\r\n`);
    const closed = await Promise.race([
      new Promise<boolean>((r) => socket.once('close', () => r(true))),
      new Promise<boolean>((r) => setTimeout(() => r(false), 10_000)),
    ]);
    t.ok(closed, 'closed');
    t.match(text, /^HTTP\/1\.1 408 /);
    t.equal(errorCode(text), ErrorCodes.WEB_HEADERS_TIMEOUT);
  });

  t.test('HTTP/2: a session with no request is closed at the header deadline; requests are served', async (t) => {
    const session = h2Connect(`https://localhost:${proxy.port('multiplex')}`, { ca: proxy.ca, host: '127.0.0.1', servername: 'localhost' });
    session.on('error', () => {});
    const status = await new Promise<number>((resolve, reject) => {
      const req = session.request({ ':path': PING_PATH });
      req.on('response', (headers) => resolve(Number(headers[':status'])));
      req.on('error', reject);
      req.resume();
      req.end();
    });
    t.equal(status, 200, 'a request on the session is served');
    const closed = await Promise.race([
      new Promise<boolean>((r) => session.once('close', () => r(true))),
      new Promise<boolean>((r) => setTimeout(() => r(false), 15_000)),
    ]);
    t.ok(closed, 'the session, left with nothing open, is closed (keep-alive allowance plus the header deadline)');

    // A stream whose body never ends is cancelled at the request deadline (RST_STREAM CANCEL).
    const unfinished = h2Connect(`https://localhost:${proxy.port('multiplex')}`, {
      ca: proxy.ca,
      host: '127.0.0.1',
      servername: 'localhost',
    });
    unfinished.on('error', () => {});
    const post = unfinished.request({ ':method': 'POST', ':path': AGENT_JOIN_PATH, 'content-type': 'application/json' });
    post.on('error', () => {});
    post.write('{"tok');
    const rst = await Promise.race([
      new Promise<number>((r) => post.once('close', () => r(post.rstCode ?? -1))),
      new Promise<number>((r) => setTimeout(() => r(-2), 10_000)),
    ]);
    t.equal(rst, 8, 'the stream is cancelled (CANCEL) at the request deadline');
    unfinished.destroy();

    const silent = h2Connect(`https://localhost:${proxy.port('multiplex')}`, { ca: proxy.ca, host: '127.0.0.1', servername: 'localhost' });
    silent.on('error', () => {});
    const silentClosed = await Promise.race([
      new Promise<boolean>((r) => silent.once('close', () => r(true))),
      new Promise<boolean>((r) => setTimeout(() => r(false), 10_000)),
    ]);
    t.ok(silentClosed, 'a session that never sends a request is closed');
  });
});

t.test('partial requests holding every slot are closed at the header deadline, and the slots serve again', async (t) => {
  // Issue 37's attack in small: max_connections slots, each taken by a request that never ends.
  const SLOTS = 20;
  const proxy = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {},
    // One test address may take every slot (the fair share would otherwise stop it first).
    proxyService: { web_headers_timeout: '1s', max_connections: SLOTS, high_water: 1, source_share: 1 },
  });
  const target = { host: '127.0.0.1', port: proxy.port('multiplex'), ca: proxy.ca };
  const held = await Promise.all(Array.from({ length: SLOTS }, () => raw(proxy)));
  for (const c of held) c.socket.write(`GET ${PING_PATH} HTTP/1.1\r\nHost: localhost\r\nX-Never: `);
  const during = await raw(proxy).then(
    (c) => {
      c.socket.destroy();
      return 'served';
    },
    () => 'refused',
  );
  t.equal(during, 'refused', 'while they hold the slots, a new client is refused');
  t.ok((proxy.stats('multiplex').failures[ErrorCodes.TOO_MANY_CONNECTIONS] ?? 0) >= 1, 'at the cap');
  const allClosed = await Promise.race([
    Promise.all(held.map((c) => c.closed)).then(() => true),
    new Promise<boolean>((r) => setTimeout(() => r(false), 15_000)),
  ]);
  t.ok(allClosed, `all ${SLOTS} partial requests closed by the proxy`);
  t.ok(
    held.every((c) => errorCode(c.text()) === ErrorCodes.WEB_HEADERS_TIMEOUT),
    'each with 408 and the header deadline code',
  );
  t.ok(await until(() => proxy.stats('multiplex').open === 0, 5000), 'every slot free again');
  const answer = await webRequest(target, PING_PATH, { method: 'GET', giveUpMs: 10_000 });
  t.equal(answer.status, 200, 'a new client is served');
});
