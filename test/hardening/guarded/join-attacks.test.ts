// The attacks of the report that one join request froze every route for 17 seconds, against a
// real `gate-mux proxy` process, each under the ping guard (test/helpers/ping-guard.ts): every
// ping on a fresh TLS connection answers within 250 ms while the attack runs, and every abusive
// request is refused within 2 s with its code. Afterwards a real `gate-mux agent` joins with a
// valid token and carries a connection through its tunnel.
import t from 'tap';
import { join } from 'node:path';
import { ErrorCodes } from '../../../lib/errors.js';
import { createKeyAndRequest } from '../../../lib/pki/certificate-request.js';
import { AGENT_JOIN_PATH, AGENT_RENEW_PATH } from '../../../lib/wire/names.js';
import { spawnAgentProcess } from '../../helpers/agent-process.js';
import { hostileRsaCsr } from '../../helpers/hostile-csr.js';
import { closeServer, readUntil, startTaggedTcpServer, tlsClient, until } from '../../helpers/net.js';
import { expectRefusals, startGuardedProxy, timed, underPingGuard } from '../../helpers/ping-guard.js';
import { GATE_MUX } from '../../helpers/proxy-command.js';
import { tempDir } from '../../helpers/temp-dir.js';
import { inParallel, webRequest, type WebAnswer } from '../../helpers/web-abuse.js';

t.test('the attacks on join, each under the ping guard; then a real agent joins and holds its tunnel', async (t) => {
  const tagged = await startTaggedTcpServer('behind-the-agent');
  t.teardown(() => closeServer(tagged.server));
  const proxy = await startGuardedProxy(t, { proxy: ['upstreams:', `  redis: tunnel:survivor/127.0.0.1:${tagged.port}`] });
  const postJoin = (body: unknown): Promise<WebAnswer> => webRequest(proxy, AGENT_JOIN_PATH, { body: JSON.stringify(body) });
  const sendAll = (bodies: unknown[], concurrency: number) =>
    inParallel(bodies.length, concurrency, (i) => timed(() => postJoin(bodies[i])));

  // Built before any guard runs: the guard measures the proxy, not this process making keys.
  const hugeExponent = hostileRsaCsr({ name: 'evil', modulusBits: 4096, exponentBits: 120_000 });
  t.ok(hugeExponent.length > 20_000, `the report's request: ${hugeExponent.length} bytes of PEM`);
  const hugeModulus = hostileRsaCsr({ name: 'evil', modulusBits: 16_384, exponentBits: 17 });
  const ordinary = createKeyAndRequest('evil').csr;

  for (const [label, token] of [
    ['a wrong token', 'x'],
    ['a valid token (leaked, or an insider)', proxy.devToken],
  ] as const) {
    const code = token === 'x' ? ErrorCodes.JOIN_TOKEN_INVALID : ErrorCodes.JOIN_CSR_INVALID;
    const one = await underPingGuard(t, proxy, `one 120,000-bit-exponent CSR with ${label}`, () =>
      sendAll([{ name: 'evil', token, csr: hugeExponent }], 1),
    );
    expectRefusals(t, `120,000-bit exponent, ${label}`, one, [code]);
    const three = await underPingGuard(t, proxy, `three 120,000-bit-exponent CSRs at once with ${label}`, () =>
      sendAll(Array(3).fill({ name: 'evil', token, csr: hugeExponent }), 3),
    );
    expectRefusals(t, `three at once, ${label}`, three, [code]);
    const modulus = await underPingGuard(t, proxy, `ten 16,384-bit-modulus CSRs with ${label}`, () =>
      sendAll(Array(10).fill({ name: 'evil', token, csr: hugeModulus }), 10),
    );
    expectRefusals(t, `16,384-bit modulus, ${label}`, modulus, [code]);
  }

  const badTokens = await underPingGuard(t, proxy, '400 joins with wrong tokens and ordinary CSRs, 40 in flight', () =>
    sendAll(
      Array.from({ length: 400 }, (_, i) => ({ name: 'evil', token: `wrong-${i}`, csr: ordinary })),
      40,
    ),
  );
  expectRefusals(t, '400 wrong tokens', badTokens, [ErrorCodes.JOIN_TOKEN_INVALID]);

  // Bodies: the biggest (announced and sent past 64 KiB), the deepest (64 KiB of nesting), the
  // slowest (a byte every 100 ms: refused at the body deadline, not when the client gives up).
  // Keep-alive: the proxy answers at once and discards what is still coming (a client that said
  // `Connection: close` gets its connection closed under it, a reset that can swallow the answer).
  const oversized = await underPingGuard(t, proxy, '20 bodies over 64 KiB', () =>
    inParallel(20, 20, (i) =>
      timed(() =>
        webRequest(
          proxy,
          AGENT_JOIN_PATH,
          i % 2 === 0
            ? { body: JSON.stringify({ token: 'x', pad: 'x'.repeat(1_000_000) }), headers: { Connection: 'keep-alive' } }
            : { body: 'x'.repeat(200_000), headers: { 'Content-Length': 100_000, Connection: 'keep-alive' } },
        ),
      ),
    ),
  );
  expectRefusals(t, 'oversized bodies', oversized, [ErrorCodes.REQUEST_TOO_LARGE]);
  const depth = 32 * 1024 - 16;
  const nested = await underPingGuard(t, proxy, '20 bodies of 64 KiB nested JSON', () =>
    inParallel(20, 20, (i) =>
      timed(() =>
        webRequest(proxy, AGENT_JOIN_PATH, {
          body: i % 2 === 0 ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000),
        }),
      ),
    ),
  );
  // An array is not a join (400); an object nested 10,000 deep has no token (401).
  expectRefusals(t, 'nested JSON', nested, [ErrorCodes.INVALID_ARGUMENT, ErrorCodes.JOIN_TOKEN_INVALID]);
  const nestedToken = await underPingGuard(t, proxy, 'nested values where the token and CSR go', () =>
    sendAll(
      Array.from({ length: 20 }, () => ({ name: 'evil', token: { a: [[[[[['x']]]]]] }, csr: [[[[hugeExponent]]]] })),
      20,
    ),
  );
  expectRefusals(t, 'nested token values', nestedToken, [ErrorCodes.JOIN_TOKEN_INVALID]);
  const body = JSON.stringify({ name: 'evil', token: proxy.devToken, csr: ordinary });
  const slow = await underPingGuard(t, proxy, '30 slow bodies, a byte every 100 ms', () =>
    inParallel(30, 30, () => timed(() => webRequest(proxy, AGENT_JOIN_PATH, { body, dribble: { chunkBytes: 1, everyMs: 100 } }))),
  );
  expectRefusals(t, 'slow bodies', slow, [ErrorCodes.REQUEST_BODY_TIMEOUT]);
  const slowRenew = await underPingGuard(t, proxy, '10 slow renewal bodies without a certificate', () =>
    inParallel(10, 10, () => timed(() => webRequest(proxy, AGENT_RENEW_PATH, { body, dribble: { chunkBytes: 1, everyMs: 100 } }))),
  );
  expectRefusals(t, 'renewals without a certificate', slowRenew, [ErrorCodes.JOIN_RENEW_REFUSED]);

  // After all that, a real agent joins with the valid token and carries a connection.
  const stateDir = await tempDir(t, 'guard-agent');
  const agent = spawnAgentProcess(
    t,
    GATE_MUX,
    [
      'agent',
      '--proxy',
      `127.0.0.1:${proxy.port}`,
      '--server-name',
      'localhost',
      '--name',
      'survivor',
      '--state-dir',
      join(stateDir, 'state'),
      '--token',
      proxy.devToken,
      '--ca-pin',
      proxy.caPin,
      '--allow',
      `127.0.0.1:${tagged.port}`,
    ],
    { PATH: process.env.PATH },
  );
  await until(
    () => agent.output().includes('tunnel up') || agent.child.exitCode !== null,
    `the agent's tunnel (output so far: ${agent.output()})`,
    20_000,
  ).catch((err: Error) => t.fail(`${err.message}: ${agent.output()}`));
  t.match(agent.output(), /joined as survivor/, 'the agent joined');
  const client = await tlsClient(proxy.port, { servername: 'localhost', ca: proxy.ca, ALPNProtocols: ['gate-redis'] });
  t.equal(
    (await readUntil(client, (s) => s.includes('\n'))).trim(),
    'behind-the-agent',
    'and holds its tunnel: a client reached the target through it',
  );
  client.destroy();
  t.notMatch(proxy.output(), /"level":(50|60)/, 'nothing logged at error level');
});

t.test('per-source rate limits: 429 GATE_ERR_RATE_LIMITED past the burst, before the body is read', async (t) => {
  const proxy = await startGuardedProxy(t, {
    auth: ['join_rate_limit: {burst: 20, per_minute: 60}', 'renew_rate_limit: {burst: 5, per_minute: 0}'],
  });
  const joins = await underPingGuard(t, proxy, '100 joins from one source', () =>
    inParallel(100, 20, () =>
      timed(() => webRequest(proxy, AGENT_JOIN_PATH, { body: JSON.stringify({ name: 'a', token: 'x', csr: 'y' }) })),
    ),
  );
  const limited = joins.filter((o) => o.value.code === ErrorCodes.RATE_LIMITED);
  t.ok(
    limited.length >= 79 && limited.length <= 80,
    `the burst of 20 served (at most one refilled), the rest refused: ${limited.length} of 100`,
  );
  t.ok(
    limited.every((o) => o.value.status === 429),
    'with status 429',
  );
  expectRefusals(t, 'joins', joins, [ErrorCodes.RATE_LIMITED, ErrorCodes.JOIN_TOKEN_INVALID]);
  const renewals = await inParallel(8, 1, () => webRequest(proxy, AGENT_RENEW_PATH, { body: '{}' }));
  t.same(
    renewals.map((r) => r.code),
    [...Array(5).fill(ErrorCodes.JOIN_RENEW_REFUSED), ...Array(3).fill(ErrorCodes.RATE_LIMITED)],
    'renewals have their own bucket',
  );
});

t.test("behind a trusted balancer, the rate limit counts the PROXY header's client, not the balancer", async (t) => {
  const proxy = await startGuardedProxy(t, {
    auth: ['join_rate_limit: {burst: 3, per_minute: 0}'],
    proxy: ['proxy_protocol: on', 'proxy_protocol_trusted_networks: [127.0.0.1/32]'],
  });
  const body = JSON.stringify({ name: 'a', token: 'x', csr: 'y' });
  const from = (client: string) => inParallel(4, 1, () => webRequest(proxy, AGENT_JOIN_PATH, { body, proxyFrom: client }));
  const codes = (answers: WebAnswer[]): Array<string | undefined> => answers.map((a) => a.code);
  const limitedAfterThree = [
    ErrorCodes.JOIN_TOKEN_INVALID,
    ErrorCodes.JOIN_TOKEN_INVALID,
    ErrorCodes.JOIN_TOKEN_INVALID,
    ErrorCodes.RATE_LIMITED,
  ];
  t.same(codes(await from('203.0.113.7')), limitedAfterThree, 'one client: three, then 429');
  t.same(codes(await from('198.51.100.9')), limitedAfterThree, 'another client through the same balancer has its own bucket');
});
