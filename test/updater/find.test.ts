// The rollout question (`GET /v1/webapi/find`): the answer's parser on its own, then fetchFind
// against a tiny real HTTP server on loopback that answers as the contract says (and as a proxy
// without rollouts, an erring one, a flooding one and a mute one do).
import t from 'tap';
import { createServer } from 'node:http';
import { ErrorCodes } from '../../lib/errors.js';
import { fetchFind, findUrl, MAX_FIND_BYTES, MAX_FIND_REASON, parseFindAnswer } from '../../lib/updater/find.js';
import { managed, startFindServer } from '../helpers/find-server.js';
import { closeServer, listening, startMuteServer } from '../helpers/net.js';

const HOST = '0b5f2c1e-7d3a-8e4f-9a6b-1c2d3e4f5a6b';

t.test('parseFindAnswer: managed, not managed, and what is refused', async (t) => {
  t.same(parseFindAnswer('{"auto_update":{"managed":false}}'), { managed: false });
  t.same(parseFindAnswer(managed('v1.3.0', true, 'canary').body), { managed: true, agentVersion: '1.3.0', now: true, reason: 'canary' });
  t.same(
    parseFindAnswer('{"auto_update":{"managed":true,"agent_version":"1.2.3","agent_auto_update":false}}'),
    { managed: true, agentVersion: '1.2.3', now: false, reason: '' },
    'reason is optional',
  );
  const forged = parseFindAnswer(managed('1.3.0', false, `waiting for group dev\nwould upgrade now (rollout)${'x'.repeat(400)}`).body);
  t.equal((forged as { reason: string }).reason.includes('\n'), false, 'no second line can be forged');
  t.equal((forged as { reason: string }).reason.length, MAX_FIND_REASON, 'the reason is cut');
  for (const [body, why] of [
    ['not json', /not JSON/],
    ['[]', /no auto_update/],
    ['{"auto_update":{"managed":"yes"}}', /managed is not/],
    ['{"auto_update":{"managed":true,"agent_auto_update":true}}', /agent_version is not a string/],
    ['{"auto_update":{"managed":true,"agent_version":"latest","agent_auto_update":true}}', /"latest" is not a version/],
    ['{"auto_update":{"managed":true,"agent_version":"1.3.0","agent_auto_update":"true"}}', /agent_auto_update is not/],
    ['{"auto_update":{"managed":true,"agent_version":"1.3.0","agent_auto_update":true,"reason":5}}', /reason is not a string/],
  ] as const) {
    t.throws(() => parseFindAnswer(body), { code: ErrorCodes.UPGRADE_FIND, message: why }, body);
  }
});

t.test('findUrl encodes the host and the group as a query', async (t) => {
  t.equal(
    findUrl('https://gate.example.com:443/', HOST, 'dev & prod'),
    `https://gate.example.com:443/v1/webapi/find?host=${HOST}&group=dev+%26+prod`,
  );
});

t.test('fetchFind against a real server: the answer, 404, an error answer, http refused', async (t) => {
  const server = await startFindServer(t);
  const ask = { proxy: server.url, allowHttp: true, host: HOST, group: 'dev' };
  t.equal(await fetchFind(ask), undefined, '404: a proxy without rollouts');
  t.equal(server.requests.at(-1), `/v1/webapi/find?host=${HOST}&group=dev`, 'the agent and its group are asked for');
  server.find = managed('1.3.0', false, 'waiting for group dev');
  t.same(await fetchFind(ask), { managed: true, agentVersion: '1.3.0', now: false, reason: 'waiting for group dev' });
  server.find = { status: 200, body: '{"auto_update":{"managed":false}}' };
  t.same(await fetchFind(ask), { managed: false });
  server.find = { status: 400, body: '{"error":{"code":"GATE_ERR_INVALID_ARGUMENT","message":"host is not a server id"}}' };
  await t.rejects(fetchFind(ask), { code: ErrorCodes.UPGRADE_FIND, message: /answered HTTP 400: host is not a server id/ });
  server.find = { status: 500, body: 'oops' };
  await t.rejects(fetchFind(ask), { code: ErrorCodes.UPGRADE_FIND, message: /HTTP 500/ });
  await t.rejects(fetchFind({ ...ask, allowHttp: false }), { code: ErrorCodes.UPGRADE_INSECURE });
});

t.test('fetchFind is bounded: a body over the limit and a server that never answers', async (t) => {
  const flood = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(`{"auto_update":{"managed":false},"pad":"${'x'.repeat(MAX_FIND_BYTES)}"}`);
  });
  const port = await listening(flood);
  t.teardown(() => closeServer(flood));
  await t.rejects(fetchFind({ proxy: `http://127.0.0.1:${port}`, allowHttp: true, host: HOST, group: 'dev' }), {
    code: ErrorCodes.FETCH_TOO_LARGE,
  });
  const mute = await startMuteServer(t);
  await t.rejects(fetchFind({ proxy: `http://${mute.address}`, allowHttp: true, host: HOST, group: 'dev', timeoutMs: 300 }), {
    code: ErrorCodes.FETCH_TIMEOUT,
  });
});
