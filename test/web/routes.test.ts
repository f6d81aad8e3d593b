import t, { type Test } from 'tap';
import { createServer as createHttpServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { ProxyAgent } from 'proxy-agent';
import { parseConfig } from '../../lib/config/load.js';
import type { MaintenanceConfig } from '../../lib/config/maintenance-schedule.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { planListeners } from '../../lib/proxy/listener-plan.js';
import { buildPing } from '../../lib/proxy/ping.js';
import { createWebRoutes } from '../../lib/web/routes.js';
import type { FindAutoUpdate } from '../../lib/web/find.js';
import { VersionChannels, type FetchText } from '../../lib/web/version-channels.js';
import { requirePeer } from '../helpers/peers.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

const CHANNEL = '/v1/webapi/automaticupgrades/channel';
const SCHEDULE = '/v1/webapi/automaticupgrades/schedule';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function listen(server: Server, host: string): Promise<number> {
  return new Promise((resolve) => server.listen(0, host, () => resolve((server.address() as AddressInfo).port)));
}

function close(server: Server, sockets: Set<Socket>): Promise<void> {
  for (const socket of sockets) socket.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}

function trackSockets(server: Server): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return sockets;
}

/** Serves the web routes on 127.0.0.1; paths they decline get 404 from here. */
async function serveRoutes(
  t: Test,
  channels: VersionChannels,
  pingFile = 'proxy_service:\n  web_listen_addr: 127.0.0.1:3080\n',
  maintenance?: () => MaintenanceConfig | undefined,
  find?: (host: string, group: string) => FindAutoUpdate,
) {
  const { config } = parseConfig(pingFile);
  const handler = createWebRoutes({
    ping: () => buildPing(config, planListeners(config), 'v0.1.0'),
    channels,
    ...(maintenance ? { maintenance } : {}),
    ...(find ? { find } : {}),
  });
  const server = createHttpServer((req, res) => {
    if (!handler(req, res)) {
      res.statusCode = 404;
      res.end('fallback');
    }
  });
  const sockets = trackSockets(server);
  const port = await listen(server, '127.0.0.1');
  t.teardown(() => close(server, sockets));
  return {
    config,
    get: (path: string, method = 'GET'): Promise<Answer> =>
      new Promise((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port, path, method, agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        });
        req.on('error', reject);
        req.end();
      }),
  };
}

function errorOf(answer: Answer): { code: string; message: string } {
  return (JSON.parse(answer.body) as { error: { code: string; message: string } }).error;
}

t.test('ping and static channels over real HTTP', async (t) => {
  const channels = new VersionChannels({ channels: { 'stable/cloud': { kind: 'static', version: '1.2.3' } }, proxyVersion: '0.1.0' });
  const web = await serveRoutes(t, channels);

  const ping = await web.get('/webapi/ping');
  t.equal(ping.status, 200);
  t.equal(ping.headers['content-type'], 'application/json');
  t.same(JSON.parse(ping.body), buildPing(web.config, planListeners(web.config), 'v0.1.0'));
  t.equal(JSON.parse(ping.body).server_version, 'v0.1.0');
  t.equal((await web.get('/webapi/ping?x=1')).status, 200, 'query string ignored');

  const def = await web.get(`${CHANNEL}/default/version`);
  t.equal(def.status, 200);
  t.equal(def.body, 'v0.1.0');
  t.equal(def.headers['content-type'], 'text/plain; charset=utf-8');
  t.equal(def.headers['cache-control'], 'no-cache');

  const cloud = await web.get(`${CHANNEL}/stable/cloud/version`);
  t.equal(cloud.status, 200);
  t.equal(cloud.body, 'v1.2.3', 'a name with a slash');

  const head = await web.get(`${CHANNEL}/stable/cloud/version`, 'HEAD');
  t.equal(head.status, 200);
  t.equal(head.body, '');
  t.equal(head.headers['content-length'], '6');
});

t.test('critical answers yes or no; the schedule is served as a cluster_maintenance_config', async (t) => {
  const channels = new VersionChannels({
    channels: { 'stable/cloud': { kind: 'static', version: '1.2.4', critical: true }, edge: { kind: 'static', version: '1.3.0' } },
    proxyVersion: '0.1.0',
  });
  const web = await serveRoutes(t, channels, undefined, () => ({ utcStartHour: 2, weekdays: [0, 3] }));
  const yes = await web.get(`${CHANNEL}/stable/cloud/critical`);
  t.equal(yes.status, 200);
  t.equal(yes.body, 'yes');
  t.equal(yes.headers['content-type'], 'text/plain; charset=utf-8');
  t.equal(yes.headers['cache-control'], 'no-cache');
  t.equal((await web.get(`${CHANNEL}/edge/critical`)).body, 'no', 'not marked: no');
  t.equal((await web.get(`${CHANNEL}/default/critical`)).body, 'no', 'default: the proxy version, not critical');
  const schedule = await web.get(`${SCHEDULE}?x=1`);
  t.equal(schedule.status, 200);
  t.equal(schedule.headers['content-type'], 'application/yaml; charset=utf-8');
  t.equal(
    schedule.body,
    'kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: 2\n    weekdays: [Sunday, Wednesday]\n',
  );
});

t.test('find: the rollout answer for a host and group; a query that is not one is 400 with its code', async (t) => {
  const HOST = '0b7c6a1e-2f4d-4c3b-9a8e-1d2c3b4a5f60';
  const asked: Array<[string, string]> = [];
  const web = await serveRoutes(t, new VersionChannels({ channels: {}, proxyVersion: '0.1.0' }), undefined, undefined, (host, group) => {
    asked.push([host, group]);
    return group === 'dev'
      ? { managed: true, agent_version: '1.3.0', agent_auto_update: true, reason: 'canary of group dev' }
      : { managed: false };
  });
  const dev = await web.get(`/v1/webapi/find?host=${HOST.toUpperCase()}&group=dev`);
  t.equal(dev.status, 200);
  t.equal(dev.headers['content-type'], 'application/json');
  t.equal(dev.headers['cache-control'], 'no-cache');
  t.same(JSON.parse(dev.body), {
    auto_update: { managed: true, agent_version: '1.3.0', agent_auto_update: true, reason: 'canary of group dev' },
  });
  t.same(JSON.parse((await web.get(`/v1/webapi/find?host=${HOST}`)).body), { auto_update: { managed: false } });
  t.same(
    asked,
    [
      [HOST, 'dev'],
      [HOST, 'default'],
    ],
    'the host in lower case; no group is the default group',
  );
  for (const [query, why] of [
    ['', /host/],
    ['?host=nope', /host/],
    [`?host=${HOST}&host=${HOST}`, /host/],
    [`?host=${HOST}&group=a%20b`, /group/],
    [`?host=${HOST}&group=a&group=b`, /group/],
    [`?host=${HOST}&group=${'g'.repeat(2000)}`, /longer than 1024/],
  ] as const) {
    const bad = await web.get(`/v1/webapi/find${query}`);
    t.equal(bad.status, 400, `${query.slice(0, 60)}: 400`);
    t.equal(errorOf(bad).code, 'GATE_ERR_INVALID_ARGUMENT');
    t.match(errorOf(bad).message, why);
  }
  t.equal(asked.length, 2, 'an invalid query never reaches the rollout');
  t.equal((await web.get(`/v1/webapi/find?host=${HOST}`, 'POST')).status, 405);
  t.equal((await web.get('/v1/webapi/find/x')).body, 'fallback', 'another path is not find');
  const unmanaged = await serveRoutes(t, new VersionChannels({ channels: {}, proxyVersion: '0.1.0' }));
  t.same(
    JSON.parse((await unmanaged.get(`/v1/webapi/find?host=${HOST}&group=dev`)).body),
    { auto_update: { managed: false } },
    'no rollout: unmanaged',
  );
});

t.test('errors: 400, 404, 405 with short JSON', async (t) => {
  const channels = new VersionChannels({ channels: {}, proxyVersion: '0.1.0' });
  const web = await serveRoutes(t, channels);
  for (const path of [
    `${CHANNEL}/Stable/version`,
    `${CHANNEL}/stable%2Fcloud/version`,
    `${CHANNEL}/stable/../default/version`,
    `${CHANNEL}//version`,
    `${CHANNEL}/version`,
    `${CHANNEL}/a$b/version`,
  ]) {
    const answer = await web.get(path);
    t.equal(answer.status, 400, path);
    t.equal(answer.headers['content-type'], 'application/json');
    t.equal(errorOf(answer).code, 'invalid_channel_name', path);
  }
  const unknown = await web.get(`${CHANNEL}/stable/cloud/version`);
  t.equal(unknown.status, 404);
  t.same(errorOf(unknown), { code: 'channel_not_found', message: 'no channel named "stable/cloud"' });
  const verb = await web.get(`${CHANNEL}/default/latest`);
  t.equal(verb.status, 404);
  t.equal(errorOf(verb).code, 'unknown_endpoint');
  const unknownCritical = await web.get(`${CHANNEL}/stable/cloud/critical`);
  t.equal(unknownCritical.status, 404, 'critical: the same 404 for an unknown channel');
  t.equal(errorOf(unknownCritical).code, 'channel_not_found');
  t.equal(errorOf(await web.get(`${CHANNEL}/Stable/critical`)).code, 'invalid_channel_name', 'and the same 400 for a bad name');
  const schedule = await web.get(SCHEDULE);
  t.equal(schedule.status, 404, 'no maintenance schedule configured');
  t.equal(errorOf(schedule).code, 'schedule_not_configured');
  t.equal((await web.get(SCHEDULE, 'POST')).status, 405);

  for (const method of ['POST', 'PUT', 'DELETE']) {
    const answer = await web.get(`${CHANNEL}/default/version`, method);
    t.equal(answer.status, 405, method);
    t.equal(answer.headers.allow, 'GET, HEAD');
    t.equal(errorOf(answer).code, 'method_not_allowed');
  }
  t.equal((await web.get('/webapi/ping', 'POST')).status, 405);

  const other = await web.get('/webapi/other');
  t.equal(other.status, 404);
  t.equal(other.body, 'fallback', 'declined paths are left to the caller');
});

function withCredentials(proxyUrl: string, user: string, pass: string): string {
  const url = new URL(proxyUrl);
  url.username = user;
  url.password = pass;
  return url.toString();
}

/** fetchText for tests: node:https through proxy-agent, whose getProxyForUrl names the tinyproxy. */
function fetchThrough(proxyUrl: string, ca: string): { fetchText: FetchText; agent: ProxyAgent } {
  const agent = new ProxyAgent({ getProxyForUrl: () => proxyUrl });
  const fetchText: FetchText = (url, { timeoutMs }) =>
    new Promise((resolve, reject) => {
      const req = httpsRequest(url, { agent, ca }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      });
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end();
    });
  return { fetchText, agent };
}

t.test('forwarded channels through a real tinyproxy to a real HTTPS server', async (t) => {
  if (!requirePeer(t, 'tinyproxy', 'tinyproxy')) return;
  const { server: serverCert, ca } = devCertificates();

  // The upstream: answers per channel, counting hits; `slow` never answers.
  const hits: Record<string, number> = {};
  const upstream = createHttpsServer({ cert: serverCert.cert, key: serverCert.key }, (req, res) => {
    const path = req.url ?? '';
    hits[path] = (hits[path] ?? 0) + 1;
    if (path === '/v1/stable/rolling/version') res.end('2.3.4\n');
    else if (path === '/v1/stable/rolling/critical') res.end('yes\n');
    else if (path === '/v1/broken/version' || path === '/v1/broken/critical') {
      res.statusCode = 500;
      res.end('oops');
    } else if (path === '/v1/slow/version' || path === '/v1/slow/critical') {
      // hold the request: the proxy's timeout must give up
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  const upstreamSockets = new Set<Socket>();
  upstream.on('secureConnection', (socket) => {
    upstreamSockets.add(socket);
    socket.once('close', () => upstreamSockets.delete(socket));
  });
  const upstreamPort = await listen(upstream, '127.0.0.1');
  t.teardown(() => close(upstream, upstreamSockets));

  const tinyproxy = await startTinyproxy(t, { basicAuth: { user: 'gate', pass: 's3cret' } });
  if (!tinyproxy) return;

  const { fetchText, agent } = fetchThrough(withCredentials(tinyproxy.url, 'gate', 's3cret'), ca.cert);
  t.teardown(() => agent.destroy());
  let now = 5_000_000;
  const base = `https://127.0.0.1:${upstreamPort}/v1`;
  const channels = new VersionChannels({
    channels: {
      'stable/rolling': { kind: 'forward', url: `${base}/stable/rolling` },
      broken: { kind: 'forward', url: `${base}/broken` },
      slow: { kind: 'forward', url: `${base}/slow` },
    },
    proxyVersion: '0.1.0',
    fetchText,
    timeoutMs: 300,
    now: () => now,
  });
  const web = await serveRoutes(t, channels);

  const first = await web.get(`${CHANNEL}/stable/rolling/version`);
  t.equal(first.status, 200);
  t.equal(first.body, 'v2.3.4');
  t.equal(first.headers['cache-control'], 'no-cache');
  t.equal(hits['/v1/stable/rolling/version'], 1);
  t.match(tinyproxy.output(), new RegExp(`CONNECT 127\\.0\\.0\\.1:${upstreamPort}`), 'the fetch went through tinyproxy');

  now += 30_000;
  t.equal((await web.get(`${CHANNEL}/stable/rolling/version`)).body, 'v2.3.4');
  t.equal(hits['/v1/stable/rolling/version'], 1, 'served from the cache within a minute');
  now += 30_000;
  t.equal((await web.get(`${CHANNEL}/stable/rolling/version`)).body, 'v2.3.4');
  t.equal(hits['/v1/stable/rolling/version'], 2, 'fetched again once the minute is over');

  const broken = await web.get(`${CHANNEL}/broken/version`);
  t.equal(broken.status, 502);
  t.equal(errorOf(broken).code, 'upstream_failed');
  t.notMatch(broken.body, /127\.0\.0\.1|500/, 'upstream details stay in the log');
  t.equal((await web.get(`${CHANNEL}/broken/version`)).status, 502);
  t.equal(hits['/v1/broken/version'], 1, 'the failure is cached too');

  const slow = await web.get(`${CHANNEL}/slow/version`);
  t.equal(slow.status, 502, 'a silent upstream is a timeout, answered 502');
  t.equal(hits['/v1/slow/version'], 1, 'the request did reach the upstream');

  // /critical is forwarded like /version: <forward_url>/critical, its own cache entry, same errors.
  const critical = await web.get(`${CHANNEL}/stable/rolling/critical`);
  t.equal(critical.status, 200);
  t.equal(critical.body, 'yes');
  t.equal(hits['/v1/stable/rolling/critical'], 1);
  t.equal(hits['/v1/stable/rolling/version'], 2, 'asking critical did not refetch the version');
  now += 59_000;
  t.equal((await web.get(`${CHANNEL}/stable/rolling/critical`)).body, 'yes');
  t.equal(hits['/v1/stable/rolling/critical'], 1, 'critical served from the cache within a minute');
  now += 1_000;
  t.equal((await web.get(`${CHANNEL}/stable/rolling/critical`)).body, 'yes');
  t.equal(hits['/v1/stable/rolling/critical'], 2, 'and fetched again once the minute is over');
  const brokenCritical = await web.get(`${CHANNEL}/broken/critical`);
  t.equal(brokenCritical.status, 502);
  t.equal(errorOf(brokenCritical).code, 'upstream_failed');
  t.notMatch(brokenCritical.body, /127\.0\.0\.1|500/, 'upstream details stay in the log');
  t.equal((await web.get(`${CHANNEL}/broken/critical`)).status, 502);
  t.equal(hits['/v1/broken/critical'], 1, 'the critical failure is cached too');
  t.equal((await web.get(`${CHANNEL}/slow/critical`)).status, 502, 'a silent upstream: 502 for critical too');
  t.equal(hits['/v1/slow/critical'], 1);
});

t.test('a proxy refusing our credentials is an upstream failure', async (t) => {
  if (!requirePeer(t, 'tinyproxy', 'tinyproxy')) return;
  const { server: serverCert, ca } = devCertificates();
  let hits = 0;
  const upstream = createHttpsServer({ cert: serverCert.cert, key: serverCert.key }, (_req, res) => {
    hits++;
    res.end('v1.0.0');
  });
  const sockets = trackSockets(upstream);
  const upstreamPort = await listen(upstream, '127.0.0.1');
  t.teardown(() => close(upstream, sockets));
  const tinyproxy = await startTinyproxy(t, { basicAuth: { user: 'gate', pass: 'right' } });
  if (!tinyproxy) return;

  const serve = async (proxyUrl: string) => {
    const { fetchText, agent } = fetchThrough(proxyUrl, ca.cert);
    t.teardown(() => agent.destroy());
    const channels = new VersionChannels({
      channels: { edge: { kind: 'forward', url: `https://127.0.0.1:${upstreamPort}/v1/edge` } },
      proxyVersion: '0.1.0',
      fetchText,
      timeoutMs: 2000,
    });
    return serveRoutes(t, channels);
  };
  const wrong = await serve(withCredentials(tinyproxy.url, 'gate', 'wrong'));
  t.equal((await wrong.get(`${CHANNEL}/edge/version`)).status, 502);
  t.equal(hits, 0, 'the proxy did not let the request through');
  const right = await serve(withCredentials(tinyproxy.url, 'gate', 'right'));
  const answer = await right.get(`${CHANNEL}/edge/version`);
  t.equal(answer.status, 200, 'control: the right credentials pass');
  t.equal(answer.body, 'v1.0.0');
  t.equal(hits, 1);
});
