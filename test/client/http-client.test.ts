import t from 'tap';
import { Agent as HttpAgent, createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { fetchText } from '../../lib/client/fetch-text.js';
import { proxyAgentFor, proxyUrlFor } from '../../lib/client/http-agent.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startFakeProxy, tunnelTo } from '../helpers/fake-proxy.js';

const certs = devCertificates();

async function serve(
  t: { teardown(fn: () => unknown): void },
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  tls = false,
): Promise<number> {
  const server: Server = tls ? createHttpsServer({ key: certs.server.key, cert: certs.server.cert }, handler) : createHttpServer(handler);
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}

t.test('proxy-agent gets the same answer as the dialer for every NO_PROXY form, CIDR included', async (t) => {
  const env = {
    HTTP_PROXY: 'http://u:p%40ss@proxy.corp:3128',
    HTTPS_PROXY: 'https://proxy.corp',
    NO_PROXY: '10.0.0.0/8,[fd00::1]:8080,.internal',
  };
  t.equal(proxyUrlFor('http://10.1.2.3/x', env), '', 'CIDR: direct');
  t.equal(proxyUrlFor('http://11.1.2.3/x', env), 'http://u:p%40ss@proxy.corp:3128');
  t.equal(proxyUrlFor('http://[fd00::1]:8080/', env), '');
  t.equal(proxyUrlFor('http://[fd00::1]:8081/', env), 'http://u:p%40ss@proxy.corp:3128');
  t.equal(proxyUrlFor('https://api.internal/', env), '');
  t.equal(proxyUrlFor('https://internal/', env), 'https://proxy.corp:443');
  t.equal(proxyUrlFor('http://127.0.0.1:8080/', env), '', 'loopback');
  t.throws(() => proxyUrlFor('http://example.com/', { HTTP_PROXY: 'ftp://x' }), { code: 'GATE_ERR_PROXY_ENV_INVALID' });
});

t.test('a real request honours a CIDR entry: direct inside it, through the proxy outside it', async (t) => {
  const directPort = await serve(t, (_req, res) => res.end('direct'));
  const proxy = await startFakeProxy(t, (socket, request) => {
    socket.end(`HTTP/1.1 200 OK\r\nContent-Length: ${9 + request.target.length}\r\nConnection: close\r\n\r\nvia-proxy${request.target}`);
  });
  // The direct agent never leaves loopback: whatever host it is asked for, it connects to our server.
  const asked: string[] = [];
  const direct = new HttpAgent();
  (direct as unknown as { createConnection: (o: { host: string }) => Socket }).createConnection = (o) => {
    asked.push(o.host);
    return connect({ host: '127.0.0.1', port: directPort });
  };
  const env = { HTTP_PROXY: `http://${proxy.host}:${proxy.port}`, NO_PROXY: '10.0.0.0/8' };
  const agent = proxyAgentFor({ env, httpAgent: direct });
  t.teardown(() => agent.destroy());
  const inside = await fetchText('http://10.20.30.40:8080/v', { agent });
  t.equal(inside.body, 'direct');
  t.same(asked, ['10.20.30.40'], 'the direct agent was used for 10.20.30.40');
  const outside = await fetchText('http://11.20.30.40:8080/v', { agent });
  t.equal(outside.body, 'via-proxyhttp://11.20.30.40:8080/v', 'absolute-form request to the proxy');
  t.equal(proxy.connections(), 1);
  t.same(asked, ['10.20.30.40'], 'the direct agent was not used again');
});

t.test('fetchText over https through a CONNECT proxy with credentials, status and body', async (t) => {
  const port = await serve(
    t,
    (req, res) => {
      res.statusCode = req.url === '/missing' ? 404 : 200;
      res.setHeader('content-type', 'text/plain');
      res.end(req.url === '/missing' ? 'none' : 'v1.2.3');
    },
    true,
  );
  const proxy = await startFakeProxy(t, tunnelTo(`127.0.0.1:${port}`));
  const env = { HTTPS_PROXY: `http://gate:s%3Acret@${proxy.host}:${proxy.port}` };
  const ok = await fetchText(`https://svc.gate.test:${port}/v1/webapi/automaticupgrades/channel/stable/cloud/version`, {
    env,
    ca: certs.ca.cert,
  });
  t.equal(ok.status, 200);
  t.equal(ok.body, 'v1.2.3');
  t.equal(ok.headers['content-type'], 'text/plain');
  t.equal(proxy.requests[0]?.target, `svc.gate.test:${port}`);
  t.equal(proxy.requests[0]?.headers['proxy-authorization'], `Basic ${Buffer.from('gate:s:cret').toString('base64')}`);
  const missing = await fetchText(`https://svc.gate.test:${port}/missing`, { env, ca: certs.ca.cert });
  t.equal(missing.status, 404);
  t.equal(missing.body, 'none');
});

t.test('fetchText: loopback is direct, bounded body, timeout, bad environment, bad URL', async (t) => {
  let hang: ServerResponse | undefined;
  const port = await serve(t, (req, res) => {
    if (req.url === '/big') res.end('x'.repeat(100_000));
    else if (req.url === '/hang') hang = res;
    else res.end('hello');
  });
  t.teardown(() => hang?.destroy());
  const proxy = await startFakeProxy(t, () => undefined);
  const env = { HTTP_PROXY: proxy.url };
  t.equal((await fetchText(`http://127.0.0.1:${port}/`, { env })).body, 'hello');
  t.equal(proxy.connections(), 0, 'loopback never goes through the proxy');
  await t.rejects(fetchText(`http://127.0.0.1:${port}/big`, { env, maxBytes: 1000 }), { code: 'GATE_ERR_FETCH_TOO_LARGE' });
  t.equal((await fetchText(`http://127.0.0.1:${port}/big`, { env, maxBytes: 100_000 })).body.length, 100_000);
  await t.rejects(fetchText(`http://127.0.0.1:${port}/hang`, { env, timeoutMs: 100 }), { code: 'GATE_ERR_FETCH_TIMEOUT' });
  await t.rejects(fetchText('http://example.com/', { env: { HTTP_PROXY: 'http://u:pw@localhost:1' } }), {
    code: 'GATE_ERR_PROXY_ENV_INVALID',
  });
  await t.rejects(fetchText('not a url'), { code: 'GATE_ERR_FETCH_FAILED' });
  await t.rejects(fetchText('ftp://example.com/'), { code: 'GATE_ERR_FETCH_FAILED' });
  const closed = await startFakeProxy(t, (s) => s.destroy());
  await t.rejects(fetchText('http://svc.gate.test/', { env: { HTTP_PROXY: closed.url } }), { code: 'GATE_ERR_FETCH_FAILED' });
});
