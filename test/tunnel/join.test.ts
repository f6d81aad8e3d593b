// Agents joining the YAML-configured proxy (GateProxy) over its web port: CA pin, tokens from the
// configuration and the development token, short-lived certificates, renewal with the current
// certificate; each failure with its code and nothing issued. Then the tunnel the joined identity
// holds, and a `tunnel:<agent>/<host:port>` upstream through it (offline first: a prompt failure).
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { readFile, stat } from 'node:fs/promises';
import { createServer as createHttpsServer } from 'node:https';
import { request } from 'node:https';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { parseConfig } from '../../lib/config/load.js';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { caPin } from '../../lib/pki/ca-pin.js';
import { createKeyAndRequest } from '../../lib/pki/certificate-request.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import { fetchPinnedCa, joinProxy, renewalTime, renewIdentity, type JoinEndpoint } from '../../lib/tunnel/join-client.js';
import { AGENT_CA_PATH, AGENT_JOIN_PATH, AGENT_RENEW_PATH } from '../../lib/wire/names.js';
import { captureLogs } from '../hardening/log-capture.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { closeServer, listening, readAll, readUntil, startTaggedTcpServer, tlsClient, until } from '../helpers/net.js';

const STATIC_TOKEN = 'static-token-for-edge-0123456789';
const EXPIRED_TOKEN = 'expired-token-0123456789abcdef';

async function rejection(promise: Promise<unknown>): Promise<GateError> {
  return promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (err: GateError) => err,
  );
}

t.test('join, tunnel, renew: the configured proxy issues identities and routes through them', async (t) => {
  const logs = captureLogs();
  const tagged = await startTaggedTcpServer('behind-the-agent');
  t.teardown(() => closeServer(tagged.server));
  const target = `127.0.0.1:${tagged.port}`;
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { redis: `tunnel:edge/${target}` },
    auth: {
      join_tokens: [
        { token: STATIC_TOKEN, agents: ['edge'], max_uses: 1 },
        { token: EXPIRED_TOKEN, expires: '2020-01-01T00:00:00Z' },
      ],
      // Beside static tokens the development token is off unless asked for.
      development_token: true,
      agent_certificate_ttl: '10m',
    },
    logger: logs.logger,
  });
  const port = gate.port('multiplex');
  const endpoint: JoinEndpoint = { proxy: `127.0.0.1:${port}`, serverName: 'localhost', env: {} };
  const pin = gate.proxy.caPin;
  t.equal(pin, caPin(gate.ca), 'the pin is of the cluster CA');
  t.match(pin, /^sha256:[0-9a-f]{64}$/);

  // No agent yet: a client of the tunnelled route is closed at once with GATE_ERR_AGENT_OFFLINE.
  const early = await tlsClient(port, { servername: 'localhost', ca: gate.ca, ALPNProtocols: ['gate-redis'] });
  early.on('error', () => {});
  early.end('PING\r\n');
  t.match(await readAll(early), `(${ErrorCodes.AGENT_OFFLINE})`, 'told why, in a Redis error');
  await until(() => gate.stats('multiplex').failures[ErrorCodes.AGENT_OFFLINE] === 1, 'offline recorded');
  t.ok(
    logs.lines.some((l) => l.code === ErrorCodes.AGENT_OFFLINE),
    'GATE_ERR_AGENT_OFFLINE logged',
  );

  // The development token: 0600 in data_dir, any name.
  const tokenFile = gate.proxy.devTokenFile!;
  t.equal((await stat(tokenFile)).mode & 0o777, 0o600, 'the development token file is 0600');
  const devToken = (await readFile(tokenFile, 'utf8')).trim();
  t.match(devToken, /^[0-9a-f]{64}$/);

  // Failures one by one, each with its code, nothing issued.
  t.equal(await fetchPinnedCa(endpoint, pin), gate.ca, 'the CA fetched and pinned');
  const wrongPin = `sha256:${'0'.repeat(64)}`;
  t.equal(
    (await rejection(joinProxy(endpoint, { token: STATIC_TOKEN, name: 'edge', caPin: wrongPin }))).code,
    ErrorCodes.JOIN_PIN_MISMATCH,
    'wrong pin',
  );
  t.equal(
    (await rejection(joinProxy(endpoint, { token: 'not-a-token-at-all-xxxxx', name: 'edge', caPin: pin }))).code,
    ErrorCodes.JOIN_TOKEN_INVALID,
    'unknown token',
  );
  t.equal(
    (await rejection(joinProxy(endpoint, { token: EXPIRED_TOKEN, name: 'edge', caPin: pin }))).code,
    ErrorCodes.JOIN_TOKEN_EXPIRED,
    'expired token',
  );
  t.equal(
    (await rejection(joinProxy(endpoint, { token: STATIC_TOKEN, name: 'other', caPin: pin }))).code,
    ErrorCodes.JOIN_NAME_NOT_ALLOWED,
    'a name the token does not allow',
  );
  const mismatch = await postJoin(port, gate.ca, { token: STATIC_TOKEN, name: 'edge', csr: createKeyAndRequest('someone-else').csr });
  t.equal(mismatch.status, 400);
  t.equal(mismatch.code, ErrorCodes.JOIN_CSR_NAME_MISMATCH, 'a CSR for another name');
  const garbage = await postJoin(port, gate.ca, { token: STATIC_TOKEN, name: 'edge', csr: 'not a csr' });
  t.equal(garbage.code, ErrorCodes.JOIN_CSR_INVALID, 'a CSR that is not one');

  // A proxy that presents another CA's certificate but answers with the right CA: the pin matches,
  // the join's verified TLS does not, and the token is never sent.
  const foreign = CertificateAuthority.create('impostor').issue({
    commonName: 'localhost',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
  });
  let impostorSawJoin = false;
  const impostor = createHttpsServer({ ...foreign }, (req, res) => {
    if (req.url === AGENT_JOIN_PATH) impostorSawJoin = true;
    res.end(req.url === AGENT_CA_PATH ? gate.ca : '');
  });
  const impostorPort = await listening(impostor);
  t.teardown(() => closeServer(impostor));
  const untrusted = await rejection(
    joinProxy({ ...endpoint, proxy: `127.0.0.1:${impostorPort}` }, { token: STATIC_TOKEN, name: 'edge', caPin: pin }),
  );
  t.equal(untrusted.code, ErrorCodes.JOIN_SERVER_UNTRUSTED, 'a proxy presenting another CA');
  t.equal(impostorSawJoin, false, 'the token never reached it');

  // The static token works once, for its name; a second use is refused.
  const identity = await joinProxy(endpoint, { token: STATIC_TOKEN, name: 'edge', caPin: pin });
  const cert = new X509Certificate(identity.cert);
  t.match(cert.subject, /CN=edge/);
  t.ok(cert.verify(new X509Certificate(gate.ca).publicKey), 'signed by the cluster CA');
  const lifetime = Date.parse(cert.validTo) - Date.now();
  t.ok(lifetime > 9 * 60_000 && lifetime <= 10 * 60_000 + 1000, `short-lived: ${Math.round(lifetime / 1000)} s left`);
  const renewAt = renewalTime(identity.cert);
  t.ok(renewAt > Date.now() && renewAt < Date.parse(cert.validTo), 'renewal is planned ahead, before expiry');
  t.equal(
    (await rejection(joinProxy(endpoint, { token: STATIC_TOKEN, name: 'edge', caPin: pin }))).code,
    ErrorCodes.JOIN_TOKEN_EXHAUSTED,
    'use limit reached',
  );
  const devIdentity = await joinProxy(endpoint, { token: devToken, name: 'any-name', caPin: pin });
  t.match(new X509Certificate(devIdentity.cert).subject, /CN=any-name/, 'the development token admits any name');

  // The joined identity holds the tunnel; the YAML upstream reaches the target through it.
  const agent = startAgent({
    proxy: endpoint.proxy,
    name: 'edge',
    ...identity,
    serverName: 'localhost',
    env: {},
    resources: [target],
    backoff: { initialMs: 50, maxMs: 400 },
  });
  t.teardown(() => agent.close());
  await agent.waitConnected();
  t.same(gate.proxy.tunnels.agents(), ['edge']);
  const client = await tlsClient(port, { servername: 'localhost', ca: gate.ca, ALPNProtocols: ['gate-redis'] });
  t.equal(
    (await readUntil(client, (s) => s.includes('\n'))).trim(),
    'behind-the-agent',
    'YAML upstream tunnel:edge/... carried the client',
  );
  client.destroy();

  // Renewal: the current certificate, no token; a fresh certificate and key for the same name.
  const renewed = await renewIdentity(endpoint, { ...identity, name: 'edge' });
  const renewedCert = new X509Certificate(renewed.cert);
  t.match(renewedCert.subject, /CN=edge/);
  t.not(renewedCert.serialNumber, cert.serialNumber, 'a new certificate');
  t.not(renewed.key, identity.key, 'a new key');
  const stranger = CertificateAuthority.create('elsewhere').issue({ commonName: 'edge', usage: 'client' });
  const refused = await rejection(renewIdentity(endpoint, { ...stranger, ca: gate.ca, name: 'edge' }));
  t.equal(refused.code, ErrorCodes.JOIN_RENEW_REFUSED, 'renewal with a certificate from another CA');

  // Nothing secret in the log: no token, no private key.
  for (const secret of [STATIC_TOKEN, EXPIRED_TOKEN, devToken, 'PRIVATE KEY', identity.key.split('\n')[3]!]) {
    t.notOk(logs.text().includes(secret), `not logged: ${secret.slice(0, 10)}…`);
  }
  for (const code of [
    ErrorCodes.JOIN_TOKEN_INVALID,
    ErrorCodes.JOIN_TOKEN_EXPIRED,
    ErrorCodes.JOIN_NAME_NOT_ALLOWED,
    ErrorCodes.JOIN_CSR_NAME_MISMATCH,
    ErrorCodes.JOIN_TOKEN_EXHAUSTED,
    ErrorCodes.JOIN_RENEW_REFUSED,
  ]) {
    t.ok(
      logs.lines.some((l) => l.code === code),
      `${code} logged`,
    );
  }
});

/** A raw join request (to send what `joinProxy` never would), verified against the cluster CA. */
function postJoin(port: number, ca: string, body: unknown): Promise<{ status: number; code: string | undefined }> {
  return webRequest(port, ca, 'POST', AGENT_JOIN_PATH, JSON.stringify(body));
}

function webRequest(
  port: number,
  ca: string,
  method: string,
  path: string,
  payload?: string,
): Promise<{ status: number; code: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, servername: 'localhost', ca, method, path, headers: { 'content-type': 'application/json' }, agent: false },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          let code: string | undefined;
          try {
            code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
          } catch {
            code = undefined;
          }
          resolve({ status: res.statusCode ?? 0, code });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

t.test('the join endpoints refuse what is not a join', async (t) => {
  const gate = await startGateProxy(t, { mode: 'multiplex', upstreams: {} });
  const port = gate.port('multiplex');
  t.match(await webRequest(port, gate.ca, 'GET', AGENT_JOIN_PATH), { status: 405, code: 'method_not_allowed' });
  t.match(await webRequest(port, gate.ca, 'POST', AGENT_CA_PATH, '{}'), { status: 405 });
  t.match(await webRequest(port, gate.ca, 'POST', AGENT_JOIN_PATH, 'not json'), { status: 400, code: ErrorCodes.INVALID_ARGUMENT });
  t.match(await webRequest(port, gate.ca, 'POST', AGENT_JOIN_PATH, '[1]'), { status: 400, code: ErrorCodes.INVALID_ARGUMENT });
  // The token is checked before anything else: with a wrong one, a bad name or a missing CSR is never looked at.
  t.match(await webRequest(port, gate.ca, 'POST', AGENT_JOIN_PATH, JSON.stringify({ name: 'a b', token: 'x', csr: 'y' })), {
    status: 401,
    code: ErrorCodes.JOIN_TOKEN_INVALID,
  });
  t.match(await webRequest(port, gate.ca, 'POST', AGENT_JOIN_PATH, JSON.stringify({ name: 'ok', token: 'x' })), {
    status: 401,
    code: ErrorCodes.JOIN_TOKEN_INVALID,
  });
  const devToken = (await readFile(gate.proxy.devTokenFile!, 'utf8')).trim();
  t.match(await webRequest(port, gate.ca, 'POST', AGENT_JOIN_PATH, JSON.stringify({ name: 'a b', token: devToken, csr: 'y' })), {
    status: 403,
    code: ErrorCodes.JOIN_NAME_NOT_ALLOWED,
  });
  t.match(await webRequest(port, gate.ca, 'POST', AGENT_JOIN_PATH, JSON.stringify({ name: 'ok', token: devToken })), {
    status: 400,
    code: ErrorCodes.JOIN_CSR_INVALID,
  });
  t.match(await webRequest(port, gate.ca, 'POST', AGENT_JOIN_PATH, JSON.stringify({ name: 'ok', csr: 'y' })), {
    status: 401,
    code: ErrorCodes.JOIN_TOKEN_INVALID,
  });
  const big = await webRequest(port, gate.ca, 'POST', AGENT_JOIN_PATH, JSON.stringify({ pad: 'x'.repeat(100_000) })).catch(
    (err: Error) => err,
  );
  t.match(big, { status: 413, code: ErrorCodes.REQUEST_TOO_LARGE }, 'a body over 64 KiB is refused unread (its Content-Length says so)');
  t.match(
    await webRequest(port, gate.ca, 'POST', AGENT_RENEW_PATH, JSON.stringify({ csr: 'y' })),
    { status: 401, code: ErrorCodes.JOIN_RENEW_REFUSED },
    'no client certificate',
  );
  t.match(await webRequest(port, gate.ca, 'GET', '/webapi/ping'), { status: 200 }, 'the other web endpoints still answer');
});

t.test('separate mode: agents join on the web port and hold their tunnel on tunnel_listen_addr', async (t) => {
  const tagged = await startTaggedTcpServer('separate-target');
  t.teardown(() => closeServer(tagged.server));
  const target = `127.0.0.1:${tagged.port}`;
  const gate = await startGateProxy(t, { mode: 'separate', upstreams: { redis: `tunnel:sep/${target}` } });
  const endpoint: JoinEndpoint = { proxy: gate.address('web'), serverName: 'localhost', env: {} };
  const token = (await readFile(gate.proxy.devTokenFile!, 'utf8')).trim();
  const identity = await joinProxy(endpoint, { token, name: 'sep', caPin: gate.proxy.caPin });
  const agent = startAgent({
    proxy: gate.address('tunnel'),
    name: 'sep',
    ...identity,
    serverName: 'localhost',
    env: {},
    resources: [target],
  });
  t.teardown(() => agent.close());
  await agent.waitConnected();
  t.equal(gate.route('tunnel', 'tunnel').connections, 1, 'the tunnel came in on its own port');
  const client = await tlsClient(gate.port('redis'), { servername: 'localhost', ca: gate.ca, ALPNProtocols: ['gate-redis'] });
  t.equal(
    (await readUntil(client, (s) => s.includes('\n'))).trim(),
    'separate-target',
    'the redis port reaches the target through the agent',
  );
  client.destroy();

  // A reload that revokes the agent's certificate ends its tunnel at once.
  const doc = parseYaml(gate.yaml) as { auth_service: Record<string, unknown> };
  doc.auth_service.revoked_agent_certificates = [new X509Certificate(identity.cert).serialNumber];
  const refused = once(agent, 'refused');
  await gate.proxy.reload(parseConfig(stringifyYaml(doc)).config);
  t.equal(((await refused) as [GateError])[0].code, ErrorCodes.AGENT_CERT_REVOKED, 'revoked by the reload');
  t.same(gate.proxy.tunnels.agents(), []);
});
