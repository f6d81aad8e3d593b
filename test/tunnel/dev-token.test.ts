// The development join token (any agent name, no expiry, no use limit) can be turned off, and is
// off by default once the configuration has static tokens (issue 37): a real proxy, real joins.
import t from 'tap';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { parseConfig } from '../../lib/config/load.js';
import { DEV_TOKEN_FILE } from '../../lib/tunnel/dev-token.js';
import { joinProxy, type JoinEndpoint } from '../../lib/tunnel/join-client.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { tempDir } from '../helpers/temp-dir.js';

const STATIC_TOKEN = 'static-token-0123456789abcdef';
/** A development token left in data_dir by an earlier start (or copied to agents long ago). */
const OLD_DEV_TOKEN = 'ab'.repeat(32);

async function refusal(p: Promise<unknown>): Promise<string | undefined> {
  return p.then(
    () => undefined,
    (err: GateError) => err.code,
  );
}

t.test('the configuration decides: off by default beside static tokens, on without them, either when asked', async (t) => {
  const read = (yaml: string): boolean => {
    const { config } = parseConfig(yaml);
    return config.agents.developmentToken;
  };
  t.equal(read(''), true, 'no static token: on (a laptop gets its first agent)');
  t.equal(read(`auth_service:\n  join_tokens: [{token: ${STATIC_TOKEN}}]\n`), false, 'static tokens: off');
  t.equal(read(`auth_service:\n  join_tokens: [{token: ${STATIC_TOKEN}}]\n  development_token: true\n`), true, 'asked for beside them');
  t.equal(read('auth_service:\n  development_token: false\n'), false, 'turned off with no token at all');
  t.throws(() => parseConfig('auth_service:\n  development_token: maybe\n'), /auth_service\.development_token: expected true or false/);
});

t.test('beside static tokens, a development token in data_dir is refused and no file is made', async (t) => {
  const dataDir = await tempDir(t, 'dev-token-off');
  await writeFile(join(dataDir, DEV_TOKEN_FILE), `${OLD_DEV_TOKEN}\n`, { mode: 0o600 });
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {},
    dataDir,
    auth: { join_tokens: [{ token: STATIC_TOKEN, agents: ['edge'] }] },
  });
  t.equal(gate.proxy.devTokenFile, undefined, 'the proxy names no development token file');
  const endpoint: JoinEndpoint = { proxy: `127.0.0.1:${gate.port('multiplex')}`, serverName: 'localhost', env: {} };
  const caPin = gate.proxy.caPin;
  t.equal(
    await refusal(joinProxy(endpoint, { token: OLD_DEV_TOKEN, name: 'anyone', caPin })),
    ErrorCodes.JOIN_TOKEN_INVALID,
    'the old development token no longer admits anyone',
  );
  const identity = await joinProxy(endpoint, { token: STATIC_TOKEN, name: 'edge', caPin });
  t.match(identity.cert, /BEGIN CERTIFICATE/, 'the static token still does');

  const fresh = await tempDir(t, 'dev-token-never-made');
  await startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir: fresh, auth: { join_tokens: [{ token: STATIC_TOKEN }] } });
  t.equal(await stat(join(fresh, DEV_TOKEN_FILE)).catch(() => 'absent'), 'absent', 'a fresh data_dir gets no token file');
});

t.test('development_token: true beside static tokens, and false without any', async (t) => {
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {},
    auth: { join_tokens: [{ token: STATIC_TOKEN }], development_token: true },
  });
  const file = gate.proxy.devTokenFile;
  t.ok(file, 'on when asked for');
  const token = (await readFile(file!, 'utf8')).trim();
  const endpoint: JoinEndpoint = { proxy: `127.0.0.1:${gate.port('multiplex')}`, serverName: 'localhost', env: {} };
  const identity = await joinProxy(endpoint, { token, name: 'any-name', caPin: gate.proxy.caPin });
  t.match(identity.cert, /BEGIN CERTIFICATE/, 'and it admits any name');

  const dataDir = await tempDir(t, 'dev-token-false');
  await writeFile(join(dataDir, DEV_TOKEN_FILE), `${OLD_DEV_TOKEN}\n`, { mode: 0o600 });
  const closed = await startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir, auth: { development_token: false } });
  t.equal(closed.proxy.devTokenFile, undefined);
  const closedEndpoint: JoinEndpoint = { proxy: `127.0.0.1:${closed.port('multiplex')}`, serverName: 'localhost', env: {} };
  t.equal(
    await refusal(joinProxy(closedEndpoint, { token: OLD_DEV_TOKEN, name: 'anyone', caPin: closed.proxy.caPin })),
    ErrorCodes.JOIN_TOKEN_INVALID,
    'no token at all admits anyone',
  );
});
