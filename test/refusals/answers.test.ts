// Each protocol's answer to a failed route, byte for byte (golden vectors checked field by field
// against the protocol documents named in lib/refusals/), and what each waits for before answering.
import t from 'tap';
import { deserialize } from 'bson';
import { ErrorCodes } from '../../lib/errors.js';
import { describeFailure, type RouteFailure } from '../../lib/refusals/failure.js';
import { httpRefusal, httpResponse, wantsJson } from '../../lib/refusals/http.js';
import { errorReply, mongodbRefusal } from '../../lib/refusals/mongodb.js';
import { errPacket, mysqlRefusal } from '../../lib/refusals/mysql.js';
import { errorResponse, postgresRefusal } from '../../lib/refusals/postgres.js';
import { refusalForConnection, refusalForRoute } from '../../lib/refusals/protocols.js';
import { redisRefusal } from '../../lib/refusals/redis.js';
import { disconnectPacket, sshRefusal } from '../../lib/refusals/ssh.js';
import { REFUSAL_READ_LIMIT, type RefusalAnswer } from '../../lib/refusals/step.js';

const short: RouteFailure = { code: 'GATE_ERR_X', detail: undefined, kind: 'unavailable', text: 'gate: x (GATE_ERR_X)', hint: undefined };
const offline = describeFailure({ code: ErrorCodes.AGENT_OFFLINE, message: 'agent db-1 is offline (not connected to this proxy)' }, 'db-1');
const hex = (a: RefusalAnswer): string | undefined => (a.need ? 'need' : a.bytes?.toString('hex'));
const int32be = (...ns: number[]): Buffer =>
  Buffer.concat(ns.map((n) => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255])));

t.test('the words: a fixed table, the agent name, the codes; unknown codes classed by their name', async (t) => {
  t.same(offline, {
    code: ErrorCodes.AGENT_OFFLINE,
    detail: undefined,
    kind: 'unavailable',
    text: 'gate: agent "db-1" is offline (GATE_ERR_AGENT_OFFLINE)',
    hint: 'The agent is not connected to the proxy: start it, or check its connection to the proxy.',
  });
  const refused = describeFailure(
    { code: ErrorCodes.AGENT_STREAM_FAILED, message: 'agent db-1 -> 10.0.0.5:5432: connect ECONNREFUSED (GATE_ERR_DIAL_REFUSED)' },
    'db-1',
  );
  t.equal(
    refused.text,
    'gate: agent "db-1": the target refused the connection (GATE_ERR_AGENT_STREAM_FAILED, agent: GATE_ERR_DIAL_REFUSED)',
  );
  t.notMatch(refused.text, '10.0.0.5', "the error's own message is never repeated");
  t.equal(describeFailure({ code: ErrorCodes.AGENT_STREAM_FAILED, message: 'x (GATE_ERR_DIAL_TIMEOUT)' }).kind, 'timeout');
  // A code this table does not know yet (another part of the tree adds it) is classed by its name.
  t.same(
    [describeFailure({ code: 'GATE_ERR_AGENT_BUSY' }, 'db-1').kind, describeFailure({ code: 'GATE_ERR_AGENT_BUSY' }, 'db-1').text],
    ['busy', 'gate: agent "db-1" is busy (GATE_ERR_AGENT_BUSY)'],
  );
  t.equal(describeFailure({ code: 'GATE_ERR_SOMETHING_TIMEOUT' }).kind, 'timeout');
  t.equal(describeFailure({ code: 'GATE_ERR_NEW_THING' }).text, 'gate: the route to the upstream failed (GATE_ERR_NEW_THING)');
  // Nothing but our code's shape and a name's shape ever gets in.
  t.equal(describeFailure({ code: 'GATE_ERR_X\r\nSet-Cookie: a=b' }).code, ErrorCodes.HANDLER_FAILED);
  t.match(describeFailure({ code: ErrorCodes.AGENT_OFFLINE }, 'db"\r\n1').text, /^gate: the upstream is offline/);
});

t.test('PostgreSQL: an ErrorResponse once the startup message is whole; nothing for a cancel request', async (t) => {
  t.equal(
    errorResponse(short).toString('hex'),
    // 'E', length 48, S FATAL, V FATAL, C 08001, M text, terminator
    `45${'00000030'}${Buffer.from('SFATAL\0VFATAL\0C08001\0Mgate: x (GATE_ERR_X)\0\0').toString('hex')}`,
  );
  const startup = Buffer.concat([int32be(16, 196608), Buffer.from('user\0u\0\0')]);
  t.equal(hex(postgresRefusal(startup.subarray(0, 7), offline, false)), 'need', 'less than a header');
  t.equal(hex(postgresRefusal(startup.subarray(0, 12), offline, false)), 'need', 'part of the message');
  const answer = postgresRefusal(startup, offline, false);
  t.equal(hex(answer), errorResponse(offline).toString('hex'), 'the whole message: answered');
  t.match(errorResponse(offline).toString('latin1'), 'HThe agent is not connected', 'the hint field');
  t.equal(hex(postgresRefusal(int32be(16, 80877102, 1, 2), offline, false)), undefined, 'a cancel request: closed, no answer');
  t.equal(hex(postgresRefusal(int32be(100_000, 196608), offline, false)), undefined, 'a length no client sends: closed');
  t.equal(hex(postgresRefusal(startup.subarray(0, 12), offline, true)), undefined, 'cut short: closed');
  const busy = errorResponse(describeFailure({ code: 'GATE_ERR_AGENT_BUSY' }, 'db-1')).toString('latin1');
  t.match(busy, 'C57P03\0', 'overload is 57P03 cannot_connect_now');
});

t.test('MySQL: an ERR_Packet at once, sequence 0, no SQL state marker', async (t) => {
  t.equal(errPacket(short).toString('hex'), `170000${'00'}ff8004${Buffer.from('gate: x (GATE_ERR_X)').toString('hex')}`);
  t.equal(hex(mysqlRefusal(Buffer.alloc(0), short)), errPacket(short).toString('hex'), 'nothing read first');
  const busy = errPacket(describeFailure({ code: 'GATE_ERR_AGENT_BUSY' }));
  t.equal(busy.readUInt16LE(5), 1040, 'overload: ER_CON_COUNT_ERROR');
  t.equal(errPacket(describeFailure({ code: ErrorCodes.AGENT_TARGET_DENIED })).readUInt16LE(5), 1130);
});

t.test('Redis: an error reply to the first command line', async (t) => {
  t.equal(hex(redisRefusal(Buffer.from('*1\r'), short, false)), 'need');
  t.equal(redisRefusal(Buffer.from('*1\r\n$4\r\nPING\r\n'), short, false).need, false);
  const answer = redisRefusal(Buffer.from('PING\n'), short, false);
  t.equal(answer.need ? '' : answer.bytes?.toString(), '-ERR gate: x (GATE_ERR_X)\r\n');
});

t.test('SSH: the identification string, then SSH_MSG_DISCONNECT in an unencrypted packet', async (t) => {
  const packet = disconnectPacket(7, 'gate: x');
  // length 28, padding 7; payload: 1, reason 7, string "gate: x", empty language tag; 7 bytes of padding
  t.equal(
    packet.toString('hex'),
    `0000001c07${'01'}00000007${'00000007'}${Buffer.from('gate: x').toString('hex')}00000000${'00'.repeat(7)}`,
  );
  for (const text of ['', 'a', 'abcdefgh', 'x'.repeat(300)]) {
    const p = disconnectPacket(2, text);
    t.equal(p.length % 8, 0, `a multiple of the block size (${text.length})`);
    t.ok(p[4]! >= 4 && p.readUInt32BE(0) === p.length - 4, 'padding at least 4; the length field');
  }
  const answer = sshRefusal(Buffer.alloc(0), offline);
  t.match(answer.need ? '' : answer.bytes?.toString('latin1'), /^SSH-2\.0-gate-mux\r\n/);
  const denied = sshRefusal(Buffer.alloc(0), describeFailure({ code: ErrorCodes.AGENT_TARGET_DENIED }, 'db-1'));
  t.equal(denied.need ? 0 : denied.bytes?.readUInt32BE(18 + 6), 1, 'a denied target: HOST_NOT_ALLOWED_TO_CONNECT');
});

t.test('MongoDB: the reply to the handshake, OP_MSG to OP_MSG, OP_REPLY to OP_QUERY', async (t) => {
  const msg = Buffer.alloc(21 + 5);
  msg.writeInt32LE(26, 0);
  msg.writeInt32LE(77, 4);
  msg.writeInt32LE(2013, 12);
  t.equal(hex(mongodbRefusal(msg.subarray(0, 20), offline, false)), 'need');
  const answer = mongodbRefusal(msg, offline, false);
  const bytes = answer.need ? Buffer.alloc(0) : (answer.bytes ?? Buffer.alloc(0));
  t.same(
    [bytes.readInt32LE(0), bytes.readInt32LE(8), bytes.readInt32LE(12), bytes.readUInt32LE(16), bytes[20]],
    [bytes.length, 77, 2013, 0, 0],
  );
  t.same(deserialize(bytes.subarray(21)), { ok: 0, errmsg: offline.text, code: 6, codeName: 'HostUnreachable' });
  t.equal(errorReply(short, 7, true).toString('hex').slice(0, 42), '6b0000000000000007000000dd0700000000000000', 'golden header');
  const query = Buffer.from(msg);
  query.writeInt32LE(2004, 12);
  const reply = mongodbRefusal(query, offline, false);
  const r = reply.need ? Buffer.alloc(0) : (reply.bytes ?? Buffer.alloc(0));
  t.same([r.readInt32LE(8), r.readInt32LE(12), r.readInt32LE(32)], [77, 1, 1], 'OP_REPLY, one document');
  t.same(deserialize(r.subarray(36)).errmsg, offline.text);
  const other = Buffer.from(msg);
  other.writeInt32LE(2012, 12);
  t.equal(hex(mongodbRefusal(other, offline, false)), undefined, 'not a handshake: closed');
  other.writeInt32LE(2013, 12);
  other.writeInt32LE(REFUSAL_READ_LIMIT + 1, 0);
  t.equal(hex(mongodbRefusal(other, offline, false)), undefined, 'larger than any handshake: closed');
});

t.test('HTTP: 502, 503, 504 after the request head; JSON when asked', async (t) => {
  t.equal(hex(httpRefusal(Buffer.from('GET / HTTP/1.1\r\nHost: a\r\n'), offline, false)), 'need');
  const answer = httpRefusal(Buffer.from('GET / HTTP/1.1\r\nHost: a\r\n\r\n'), offline, false);
  const text = answer.need ? '' : (answer.bytes?.toString() ?? '');
  t.match(text, /^HTTP\/1\.1 502 Bad Gateway\r\n/);
  t.match(text, 'Content-Type: text/plain; charset=utf-8\r\n');
  t.match(text, 'Connection: close\r\n');
  t.equal(text.split('\r\n\r\n')[1], `${offline.text}\n${offline.hint}\n`);
  const length = Number(/Content-Length: (\d+)/.exec(text)?.[1]);
  t.equal(length, Buffer.byteLength(text.split('\r\n\r\n')[1]!), 'Content-Length is the body');
  t.match(httpResponse(describeFailure({ code: ErrorCodes.DIAL_TIMEOUT }), false).toString(), /^HTTP\/1\.1 504 Gateway Timeout/);
  const busy = httpResponse(describeFailure({ code: 'GATE_ERR_AGENT_BUSY' }), false).toString();
  t.match(busy, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
  t.match(busy, 'Retry-After: 5\r\n');
  const json = httpResponse(offline, true).toString();
  t.same(JSON.parse(json.split('\r\n\r\n')[1]!), { error: { code: offline.code, message: offline.text, hint: offline.hint } });
  t.ok(wantsJson('GET / HTTP/1.1\r\naccept: text/html, application/problem+json;q=0.9'), 'a +json type');
  t.notOk(wantsJson('GET /application/json HTTP/1.1\r\nX-Accept: application/json'), 'only the Accept header counts');
});

t.test('which protocol: the route names it, else the negotiated ALPN, else the greeting', async (t) => {
  t.same(['postgres', 'mysql', 'redis', 'mongodb', 'ssh', 'web', 'kube', 'tunnel'].map(refusalForRoute), [
    'postgres',
    'mysql',
    'redis',
    'mongodb',
    'ssh',
    'http',
    undefined,
    undefined,
  ]);
  const seen = (protocol: string, negotiatedAlpn?: string) => refusalForConnection({ protocol, negotiatedAlpn });
  t.same(
    [
      seen('tls', 'gate-postgres-ping'),
      seen('postgres', 'postgresql'),
      seen('tls', 'gate-mysql-OC4w'),
      seen('tls', 'gate-redis'),
      seen('tls', 'gate-mongodb'),
      seen('tls', 'gate-proxy-ssh'),
      seen('tls', 'http/1.1'),
      seen('tls', 'h2'),
      seen('ssh'),
      seen('http1'),
      seen('h2'),
      seen('postgres'),
      seen('silent'),
      seen('tls'),
    ],
    [
      'postgres',
      'postgres',
      'mysql',
      'redis',
      'mongodb',
      'ssh',
      'http',
      undefined,
      'ssh',
      'http',
      undefined,
      'postgres',
      undefined,
      undefined,
    ],
  );
});
