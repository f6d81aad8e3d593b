import t from 'tap';
import {
  HTTP1_METHODS,
  HTTP2_PREFACE,
  PROXY_V2_SIGNATURE,
  sniffGreeting,
  sniffHttp1,
  sniffHttp2,
  sniffPostgres,
  sniffProxyV1,
  sniffProxyV2,
  sniffSsh,
  sniffTls,
  type GreetingProtocol,
  type GreetingResult,
} from '../../lib/sniff/greeting.js';
import { loadHelloFixtures } from '../fixtures/hello-fixtures.js';
import { prng } from '../helpers/prng.js';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');
const int32 = (...ns: number[]): Buffer =>
  Buffer.concat(
    ns.map((n) => {
      const x = Buffer.alloc(4);
      x.writeInt32BE(n);
      return x;
    }),
  );

const sslRequest = int32(8, 80877103);
const gssencRequest = int32(8, 80877104);
const cancelRequest = int32(16, 80877102, 4242, 0x12345678);
function startup(params: Record<string, string>, version = 196608): Buffer {
  const body = Buffer.concat([...Object.entries(params).map(([k, v]) => b(`${k}\0${v}\0`)), Buffer.from([0])]);
  return Buffer.concat([int32(8 + body.length, version), body]);
}
const psqlStartup = startup({ user: 'postgres', database: 'postgres', application_name: 'psql', client_encoding: 'UTF8' });

interface Case {
  label: string;
  bytes: Buffer;
  /** expected final verdict on the whole input */
  protocol: GreetingProtocol | 'no';
  /** how many bytes must be seen before the decision */
  decidedAt: number;
  length?: number;
}

const tlsHello = loadHelloFixtures()[0]!.bytes;

const CASES: Case[] = [
  { label: 'TLS ClientHello', bytes: tlsHello, protocol: 'tls', decidedAt: 3 },
  { label: 'TLS record version 0x0300', bytes: Buffer.from([0x16, 3, 0, 0, 1]), protocol: 'tls', decidedAt: 3 },
  { label: 'TLS record version 0x0305', bytes: Buffer.from([0x16, 3, 5, 0, 1]), protocol: 'no', decidedAt: 3 },
  { label: 'TLS major 2', bytes: Buffer.from([0x16, 2, 1]), protocol: 'no', decidedAt: 2 },
  { label: 'TLS alert record', bytes: Buffer.from([0x15, 3, 3, 0, 2, 2, 40]), protocol: 'no', decidedAt: 1 },
  { label: 'SSH banner', bytes: b('SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n'), protocol: 'ssh', decidedAt: 4 },
  { label: 'SSH-1.99', bytes: b('SSH-1.99-x\r\n'), protocol: 'ssh', decidedAt: 4 },
  { label: 'lower-case ssh', bytes: b('ssh-2.0-x\r\n'), protocol: 'no', decidedAt: 1 },
  { label: 'SSH_ (RFC 4253 §4.2 wants a dash)', bytes: b('SSH_2.0\r\n'), protocol: 'no', decidedAt: 4 },
  { label: 'banner line before SSH- (only servers may)', bytes: b('hello\r\nSSH-2.0-x\r\n'), protocol: 'no', decidedAt: 1 },
  ...HTTP1_METHODS.map(
    (m): Case => ({ label: `HTTP ${m}`, bytes: b(`${m} / HTTP/1.1\r\nHost: a\r\n\r\n`), protocol: 'http1', decidedAt: m.length + 1 }),
  ),
  { label: 'CONNECT authority form', bytes: b('CONNECT gate.test:443 HTTP/1.1\r\n\r\n'), protocol: 'http1', decidedAt: 8 },
  { label: 'lower-case method', bytes: b('get / HTTP/1.1\r\n'), protocol: 'no', decidedAt: 1 },
  { label: 'method without space', bytes: b('GET/ HTTP/1.1\r\n'), protocol: 'no', decidedAt: 4 },
  { label: 'unknown method', bytes: b('BREW /pot HTCPCP/1.0\r\n'), protocol: 'no', decidedAt: 1 },
  { label: 'GETS is not GET', bytes: b('GETS / HTTP/1.1\r\n'), protocol: 'no', decidedAt: 4 },
  {
    label: 'HTTP/2 preface',
    bytes: Buffer.concat([HTTP2_PREFACE, Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])]),
    protocol: 'h2',
    decidedAt: 24,
    length: 24,
  },
  { label: 'PRI with HTTP/1.1 is neither', bytes: b('PRI * HTTP/1.1\r\n\r\n'), protocol: 'no', decidedAt: 12 },
  { label: 'preface with a wrong last byte', bytes: Buffer.concat([HTTP2_PREFACE.subarray(0, 23), b('X')]), protocol: 'no', decidedAt: 24 },
  { label: 'SSLRequest', bytes: sslRequest, protocol: 'postgres-ssl', decidedAt: 8, length: 8 },
  { label: 'GSSENCRequest', bytes: gssencRequest, protocol: 'postgres-gssenc', decidedAt: 8, length: 8 },
  { label: 'CancelRequest', bytes: cancelRequest, protocol: 'postgres-cancel', decidedAt: 8, length: 16 },
  {
    label: 'CancelRequest with a 3.2 key of 32 bytes',
    bytes: Buffer.concat([int32(44, 80877102, 1), Buffer.alloc(32, 7)]),
    protocol: 'postgres-cancel',
    decidedAt: 8,
    length: 44,
  },
  { label: 'psql StartupMessage', bytes: psqlStartup, protocol: 'postgres-startup', decidedAt: 8, length: psqlStartup.length },
  { label: 'StartupMessage 3.2', bytes: startup({ user: 'u' }, 196610), protocol: 'postgres-startup', decidedAt: 8, length: 16 },
  { label: 'StartupMessage at the size bound', bytes: int32(10004, 196608), protocol: 'postgres-startup', decidedAt: 8, length: 10004 },
  { label: 'StartupMessage over the bound', bytes: int32(10005, 196608), protocol: 'no', decidedAt: 4 },
  { label: 'StartupMessage too short', bytes: int32(8, 196608), protocol: 'no', decidedAt: 5 },
  { label: 'protocol 2.0 startup', bytes: int32(296, 131072), protocol: 'no', decidedAt: 6 },
  { label: 'SSLRequest with length 16', bytes: int32(16, 80877103), protocol: 'no', decidedAt: 8 },
  { label: 'CancelRequest with length 8', bytes: int32(8, 80877102), protocol: 'no', decidedAt: 8 },
  { label: 'CancelRequest with length 15', bytes: int32(15, 80877102), protocol: 'no', decidedAt: 5 },
  { label: 'huge length', bytes: int32(0x01000000, 196608), protocol: 'no', decidedAt: 1 },
  { label: 'PROXY v1', bytes: b('PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n'), protocol: 'proxy-v1', decidedAt: 6 },
  { label: 'PROXY with a tab', bytes: b('PROXY\tTCP4'), protocol: 'no', decidedAt: 6 },
  { label: 'PROPFIND is not PROXY', bytes: b('PROPFIND / HTTP/1.1\r\n'), protocol: 'http1', decidedAt: 9 },
  { label: 'PROXY v2', bytes: Buffer.concat([PROXY_V2_SIGNATURE, Buffer.from([0x21, 0x11, 0, 12])]), protocol: 'proxy-v2', decidedAt: 12 },
  {
    label: 'v2 signature with a wrong byte',
    bytes: Buffer.concat([PROXY_V2_SIGNATURE.subarray(0, 11), b('X')]),
    protocol: 'no',
    decidedAt: 12,
  },
  { label: 'bare CRLF', bytes: b('\r\n\r\nhello'), protocol: 'no', decidedAt: 5 },
  { label: 'MySQL-style server greeting bytes', bytes: Buffer.from([0x4a, 0, 0, 0, 0x0a]), protocol: 'no', decidedAt: 1 },
  { label: 'byte 0xff', bytes: Buffer.from([0xff, 0xff]), protocol: 'no', decidedAt: 1 },
];

function verdictAt(r: GreetingResult): string {
  return r.verdict === 'match' ? r.protocol : r.verdict;
}

t.test('byte-at-a-time feeding decides at the right byte, and need is an honest lower bound', async (t) => {
  for (const c of CASES) {
    const seen: GreetingResult[] = [];
    for (let i = 0; i <= c.bytes.length; i++) seen.push(sniffGreeting(c.bytes.subarray(0, i)));
    const first = seen.findIndex((r) => r.verdict !== 'need');
    t.equal(first, c.decidedAt, `${c.label}: decided after ${c.decidedAt} bytes`);
    const final = seen[seen.length - 1]!;
    t.equal(verdictAt(final), c.protocol, `${c.label}: verdict`);
    if (c.length !== undefined) t.equal(final.verdict === 'match' ? final.length : -1, c.length, `${c.label}: length`);
    // once decided, more bytes never change the answer
    t.ok(
      seen.slice(first).every((r) => verdictAt(r) === verdictAt(final)),
      `${c.label}: stable`,
    );
    // a need of n at i means no match is possible before i + n bytes ('no' may come sooner)
    const bound = final.verdict === 'match' ? first : Infinity;
    t.ok(
      seen.slice(0, first).every((r, i) => r.verdict === 'need' && r.bytes >= 1 && i + r.bytes <= bound),
      `${c.label}: need bounds`,
    );
  }
});

t.test('each sniffer alone', async (t) => {
  const table: Array<[string, (buf: Uint8Array) => unknown, Buffer, unknown]> = [
    ['tls empty', sniffTls, b(''), { verdict: 'need', bytes: 3 }],
    ['tls 0x16', sniffTls, Buffer.from([0x16]), { verdict: 'need', bytes: 2 }],
    ['tls 0x16 0x03', sniffTls, Buffer.from([0x16, 3]), { verdict: 'need', bytes: 1 }],
    ['tls match', sniffTls, Buffer.from([0x16, 3, 1]), { verdict: 'match' }],
    ['tls minor 4', sniffTls, Buffer.from([0x16, 3, 4]), { verdict: 'match' }],
    ['tls no', sniffTls, b('G'), { verdict: 'no' }],
    ['ssh need', sniffSsh, b('SS'), { verdict: 'need', bytes: 2 }],
    ['ssh match', sniffSsh, b('SSH-'), { verdict: 'match' }],
    ['ssh no', sniffSsh, b('SSL'), { verdict: 'no' }],
    ['http1 empty needs the shortest method', sniffHttp1, b(''), { verdict: 'need', bytes: 4 }],
    ['http1 P could be PUT', sniffHttp1, b('P'), { verdict: 'need', bytes: 3 }],
    ['http1 OPT', sniffHttp1, b('OPT'), { verdict: 'need', bytes: 5 }],
    ['http1 PRI', sniffHttp1, b('PRI'), { verdict: 'no' }],
    ['http1 match', sniffHttp1, b('DELETE '), { verdict: 'match' }],
    ['h2 need', sniffHttp2, b('PRI * '), { verdict: 'need', bytes: 18 }],
    ['h2 match', sniffHttp2, Buffer.from(HTTP2_PREFACE), { verdict: 'match', length: 24 }],
    ['h2 no', sniffHttp2, b('GET '), { verdict: 'no' }],
    ['proxy v1 need', sniffProxyV1, b('PROX'), { verdict: 'need', bytes: 2 }],
    ['proxy v1 match', sniffProxyV1, b('PROXY UNKNOWN\r\n'), { verdict: 'match' }],
    ['proxy v1 no', sniffProxyV1, b('PROXYX'), { verdict: 'no' }],
    ['proxy v2 need', sniffProxyV2, b('\r\n\r\n'), { verdict: 'need', bytes: 8 }],
    ['proxy v2 match', sniffProxyV2, Buffer.from(PROXY_V2_SIGNATURE), { verdict: 'match' }],
    ['proxy v2 no', sniffProxyV2, b('\r\n\r\r'), { verdict: 'no' }],
    ['postgres empty', sniffPostgres, b(''), { verdict: 'need', bytes: 8 }],
    ['postgres first byte 0', sniffPostgres, Buffer.from([0]), { verdict: 'need', bytes: 7 }],
    ['postgres first byte 1', sniffPostgres, Buffer.from([1]), { verdict: 'no' }],
    ['postgres ssl', sniffPostgres, sslRequest, { verdict: 'match', protocol: 'postgres-ssl', length: 8 }],
    ['postgres length 8 then 0x00: startup, not ssl', sniffPostgres, Buffer.from([0, 0, 0, 8, 0]), { verdict: 'no' }],
    ['postgres length 9 then 0x00 0x03', sniffPostgres, Buffer.from([0, 0, 0, 9, 0, 3]), { verdict: 'need', bytes: 2 }],
  ];
  for (const [label, fn, input, expected] of table) t.same(fn(input), expected, label);
});

t.test('every captured TLS hello is TLS at three bytes', async (t) => {
  for (const f of loadHelloFixtures()) {
    t.same(sniffGreeting(f.bytes.subarray(0, 3)), { verdict: 'match', protocol: 'tls' }, f.name);
  }
});

t.test('seeded random bytes: a verdict is always one of the three, need always positive', async (t) => {
  const rand = prng(7);
  const prefixes = [
    b(''),
    b('P'),
    b('PR'),
    b('SSH'),
    Buffer.from([0x16, 3]),
    Buffer.from([0, 0, 0]),
    Buffer.from(PROXY_V2_SIGNATURE.subarray(0, 5)),
  ];
  let bad = 0;
  const counts: Record<string, number> = {};
  for (let i = 0; i < 5000; i++) {
    const input = Buffer.concat([rand.pick(prefixes), rand.bytes(rand.int(12))]);
    const r = sniffGreeting(input);
    counts[verdictAt(r)] = (counts[verdictAt(r)] ?? 0) + 1;
    if (r.verdict === 'need' && !(r.bytes >= 1 && r.bytes <= 24)) bad++;
    // the combined answer agrees with the single sniffer it names
    if (r.verdict === 'match' && r.protocol === 'tls' && sniffTls(input).verdict !== 'match') bad++;
  }
  t.equal(bad, 0);
  t.ok((counts.no ?? 0) > 0 && (counts.need ?? 0) > 0 && (counts.tls ?? 0) > 0, JSON.stringify(counts));
});
