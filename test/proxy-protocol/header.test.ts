import t, { type Test } from 'tap';
import { ErrorCodes } from '../../lib/errors.js';
import {
  encodeProxyHeaderV1,
  encodeProxyHeaderV1Unknown,
  encodeProxyHeaderV2,
  encodeProxyHeaderV2Local,
  parseProxyHeader,
  PP2_TYPE,
  PROXY_V2_SIGNATURE,
  ProxyHeaderError,
  type ProxyAddress,
  type ProxyHeader,
  type ProxyHeaderResult,
} from '../../lib/proxy-protocol/header.js';
import { prng } from '../helpers/prng.js';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');
const v4 = (address: string, port: number): ProxyAddress => ({ address, port, family: 'IPv4' });
const v6 = (address: string, port: number): ProxyAddress => ({ address, port, family: 'IPv6' });

function done(r: ProxyHeaderResult): ProxyHeader {
  if (r.status !== 'done') throw new Error(`expected done, got need ${r.bytes}`);
  return r.header;
}

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ProxyHeaderError) return err.code;
    return `not a ProxyHeaderError: ${String(err)}`;
  }
  return undefined;
}

const MALFORMED = ErrorCodes.PROXY_HEADER_MALFORMED;
const MISSING = ErrorCodes.PROXY_HEADER_MISSING;

/** Every proper prefix answers need with an honest lower bound. */
function checkPrefixes(t: Test, bytes: Buffer, length: number, label: string): void {
  let bad = 0;
  for (let i = 0; i < length; i++) {
    const r = parseProxyHeader(bytes.subarray(0, i));
    if (r.status !== 'need' || r.bytes < 1 || i + r.bytes > length) bad++;
  }
  t.equal(bad, 0, `${label}: prefixes need`);
}

t.test('v1 valid headers', async (t) => {
  const cases: Array<[string, Partial<ProxyHeader>]> = [
    [
      'PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n',
      { transport: 'tcp4', source: v4('192.168.0.1', 56324), destination: v4('192.168.0.11', 443) },
    ],
    ['PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n', { source: v4('0.0.0.0', 0), destination: v4('255.255.255.255', 65535) }],
    [
      'PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n',
      { transport: 'tcp6', source: v6('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 65535) },
    ],
    ['PROXY TCP6 2001:DB8::1 ::1 1 2\r\n', { source: v6('2001:db8::1', 1), destination: v6('::1', 2) }],
    [
      'PROXY TCP6 ::ffff:10.0.0.1 0:0:0:0:0:ffff:a00:2 1 2\r\n',
      { source: v6('::ffff:10.0.0.1', 1), destination: v6('::ffff:10.0.0.2', 2) },
    ],
    ['PROXY UNKNOWN\r\n', { command: 'local', transport: 'unknown', source: undefined }],
    ['PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n', { command: 'local', transport: 'unknown' }],
  ];
  for (const [text, expected] of cases) {
    const bytes = Buffer.concat([b(text), b('GET / HTTP/1.1\r\n\r\n')]);
    const h = done(parseProxyHeader(bytes));
    t.match(h, { version: 1, command: 'proxy', tlvs: [], length: text.length, ...expected }, JSON.stringify(text));
    checkPrefixes(t, bytes, text.length, JSON.stringify(text));
  }
  const longest = 'PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n';
  t.equal(longest.length, 104, "the spec's worst case fits");
  const unknown107 = `PROXY UNKNOWN ${'x'.repeat(107 - 16)}\r\n`;
  t.equal(unknown107.length, 107);
  t.equal(done(parseProxyHeader(b(unknown107))).length, 107, '107 bytes is the limit');
});

t.test('v1 invalid headers', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['double space', 'PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n', MALFORMED],
    ['trailing space', 'PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n', MALFORMED],
    ['tab', 'PROXY TCP4\t1.2.3.4 5.6.7.8 1 2\r\n', MALFORMED],
    ['port with a leading zero', 'PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n', MALFORMED],
    ['port 65536', 'PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n', MALFORMED],
    ['port 6 digits', 'PROXY TCP4 1.2.3.4 5.6.7.8 100000 2\r\n', MALFORMED],
    ['negative port', 'PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n', MALFORMED],
    ['plus port', 'PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n', MALFORMED],
    ['hex port', 'PROXY TCP4 1.2.3.4 5.6.7.8 0x10 2\r\n', MALFORMED],
    ['missing port', 'PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n', MALFORMED],
    ['extra field', 'PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n', MALFORMED],
    ['IPv4 leading zero', 'PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n', MALFORMED],
    ['IPv4 octet 256', 'PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n', MALFORMED],
    ['IPv6 in TCP4', 'PROXY TCP4 ::1 5.6.7.8 1 2\r\n', MALFORMED],
    ['IPv4 in TCP6', 'PROXY TCP6 1.2.3.4 ::1 1 2\r\n', MALFORMED],
    ['IPv6 zone id', 'PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n', MALFORMED],
    ['bracketed IPv6', 'PROXY TCP6 [::1] ::1 1 2\r\n', MALFORMED],
    ['host name', 'PROXY TCP4 gate.test 5.6.7.8 1 2\r\n', MALFORMED],
    ['TCP5', 'PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n', MALFORMED],
    ['UDP4', 'PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n', MALFORMED],
    ['lower-case tcp4', 'PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n', MALFORMED],
    ['UNKNOWNX', 'PROXY UNKNOWNX\r\n', MALFORMED],
    ['LF only', 'PROXY TCP4 1.2.3.4 5.6.7.8 1 2\nGET', MALFORMED],
    ['CR not followed by LF', 'PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rGET', MALFORMED],
    ['NUL byte', 'PROXY TCP4 1.2.3.4\x005.6.7.8 1 2\r\n', MALFORMED],
    ['high byte', 'PROXY UNKNOWN \xff\r\n', MALFORMED],
    ['no CRLF in 107 bytes', `PROXY UNKNOWN ${'x'.repeat(100)}`, MALFORMED],
    ['108 bytes', `PROXY UNKNOWN ${'x'.repeat(108 - 16)}\r\n`, MALFORMED],
    ['PROXY without space', 'PROXY\r\n', MISSING],
    ['an HTTP request', 'POST / HTTP/1.1\r\n', MISSING],
    ['lower-case proxy', 'proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n', MISSING],
    ['leading space', ' PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n', MISSING],
    ['TLS', '\x16\x03\x01\x02\x00', MISSING],
  ];
  for (const [label, text, expected] of cases)
    t.equal(
      code(() => parseProxyHeader(b(text))),
      expected,
      label,
    );
  // refused early, before any CRLF
  t.equal(
    code(() => parseProxyHeader(b('PROXY TCPX'))),
    MALFORMED,
    'unknown protocol refused before the CRLF',
  );
  t.equal(
    code(() => parseProxyHeader(b('PROXY TCP4 1.2.3.4\x00'))),
    MALFORMED,
    'control byte refused at once',
  );
  t.same(parseProxyHeader(b('PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r')), { status: 'need', bytes: 1 }, 'CR waits for LF');
  t.same(parseProxyHeader(b('PROXY TCP4 1.2')), { status: 'need', bytes: 2 });
  t.same(parseProxyHeader(b('PRO')), { status: 'need', bytes: 12 });
  t.same(parseProxyHeader(b('')), { status: 'need', bytes: 15 });
});

const haproxyV2 = Buffer.from('0d0a0d0a000d0a515549540a211100' + '0cac130001ac130003a6520050', 'hex');

t.test('v2 valid headers', async (t) => {
  // Bytes HAProxy sent with send-proxy-v2 (from a public capture): 172.19.0.1:42578 -> 172.19.0.3:80.
  const h = done(parseProxyHeader(Buffer.concat([haproxyV2, b('GET / HTTP/1.1\r\n')])));
  t.match(h, {
    version: 2,
    command: 'proxy',
    transport: 'tcp4',
    source: v4('172.19.0.1', 42578),
    destination: v4('172.19.0.3', 80),
    tlvs: [],
    length: 28,
  });
  checkPrefixes(t, haproxyV2, 28, 'haproxy v2');

  const local = encodeProxyHeaderV2Local();
  t.equal(local.length, 16);
  t.match(done(parseProxyHeader(local)), { version: 2, command: 'local', transport: 'unknown', length: 16, source: undefined });

  // LOCAL ignores the family and the block (§2.2), even UNIX/DGRAM with TLV-looking bytes.
  const localUnix = Buffer.concat([PROXY_V2_SIGNATURE, Buffer.from([0x20, 0x32, 0, 3, 0xff, 0xff, 0xff])]);
  t.match(done(parseProxyHeader(localUnix)), { command: 'local', transport: 'unknown', tlvs: [], length: 19 });

  const unspec = Buffer.concat([PROXY_V2_SIGNATURE, Buffer.from([0x21, 0x00, 0, 4, 1, 2, 3, 4])]);
  t.match(done(parseProxyHeader(unspec)), { command: 'proxy', transport: 'unknown', length: 20, source: undefined });

  const tlvs = [
    { type: PP2_TYPE.ALPN, value: b('h2') },
    { type: PP2_TYPE.AUTHORITY, value: b('gate.test') },
    { type: PP2_TYPE.NOOP, value: Buffer.alloc(0) },
    { type: 0xe0, value: Buffer.alloc(300, 7) },
  ];
  const six = encodeProxyHeaderV2(v6('2001:db8::1', 5000), v6('::1', 443), tlvs, { crc32c: true });
  const parsed = done(parseProxyHeader(Buffer.concat([six, b('payload')])));
  t.match(parsed, { transport: 'tcp6', source: v6('2001:db8::1', 5000), destination: v6('::1', 443), length: six.length });
  t.same(parsed.tlvs.slice(0, 4), tlvs, 'TLVs in order');
  t.equal(parsed.tlvs[4]?.type, PP2_TYPE.CRC32C, 'CRC32C TLV last');
  checkPrefixes(t, six, six.length, 'IPv6 with TLVs');
});

t.test('v2 invalid headers', async (t) => {
  const header = (verCmd: number, fam: number, block: Buffer): Buffer => {
    const len = Buffer.alloc(2);
    len.writeUInt16BE(block.length);
    return Buffer.concat([PROXY_V2_SIGNATURE, Buffer.from([verCmd, fam]), len, block]);
  };
  const inet = Buffer.alloc(12, 1);
  const unsupported = (label: string, bytes: Buffer): void => {
    try {
      parseProxyHeader(bytes);
      t.fail(`${label}: accepted`);
    } catch (err) {
      t.ok(err instanceof ProxyHeaderError && err.code === MALFORMED && /unsupported/.test(err.message), `${label}: unsupported`);
    }
  };
  unsupported('UDP over IPv4', header(0x21, 0x12, inet));
  unsupported('UDP over IPv6', header(0x21, 0x22, Buffer.alloc(36)));
  unsupported('UNIX stream', header(0x21, 0x31, Buffer.alloc(216)));
  unsupported('UNIX datagram', header(0x21, 0x32, Buffer.alloc(216)));
  const cases: Array<[string, Buffer]> = [
    ['version 1', header(0x11, 0x11, inet)],
    ['version 3', header(0x31, 0x11, inet)],
    ['command 2', header(0x22, 0x11, inet)],
    ['family 4', header(0x21, 0x41, inet)],
    ['transport 3', header(0x21, 0x13, inet)],
    ['INET with UNSPEC transport', header(0x21, 0x10, inet)],
    ['UNSPEC family with STREAM', header(0x21, 0x01, inet)],
    ['INET block of 11', header(0x21, 0x11, Buffer.alloc(11))],
    ['INET6 block of 35', header(0x21, 0x21, Buffer.alloc(35))],
    ['two stray bytes after the addresses', header(0x21, 0x11, Buffer.concat([inet, Buffer.from([4, 0])]))],
    ['TLV overruns', header(0x21, 0x11, Buffer.concat([inet, Buffer.from([4, 0, 2, 0])]))],
    ['CRC32C TLV of 3 bytes', header(0x21, 0x11, Buffer.concat([inet, Buffer.from([3, 0, 3, 0, 0, 0])]))],
    ['CRC32C wrong', header(0x21, 0x11, Buffer.concat([inet, Buffer.from([3, 0, 4, 1, 2, 3, 4])]))],
  ];
  for (const [label, bytes] of cases)
    t.equal(
      code(() => parseProxyHeader(bytes)),
      MALFORMED,
      label,
    );
  // refused from the fixed 16 bytes, before the block arrives
  t.equal(
    code(() => parseProxyHeader(header(0x21, 0x12, inet).subarray(0, 16))),
    MALFORMED,
    'UDP refused at 16 bytes',
  );
  t.equal(
    code(() => parseProxyHeader(header(0x11, 0x11, inet).subarray(0, 13))),
    MALFORMED,
    'version refused at 13 bytes',
  );
  t.equal(
    code(() => parseProxyHeader(Buffer.from('\r\n\r\n\0\r\nQUIX'))),
    MISSING,
    'wrong signature',
  );

  // Flipping any byte of a CRC-protected block is caught, except the CRC TLV's own type byte
  // (it then becomes another TLV and nothing claims a checksum: inherent in §2.2.5).
  const signed = encodeProxyHeaderV2(v4('10.1.2.3', 1234), v4('10.3.2.1', 443), [{ type: PP2_TYPE.UNIQUE_ID, value: b('abc') }], {
    crc32c: true,
  });
  let caught = 0;
  for (let i = 16; i < signed.length; i++) {
    if (i === signed.length - 7) continue;
    const c = Buffer.from(signed);
    c[i]! ^= 0x01;
    if (code(() => parseProxyHeader(c)) === MALFORMED) caught++;
  }
  t.equal(caught, signed.length - 17, 'every flipped byte of the block is refused');
});

t.test('encoders round-trip through the parser', async (t) => {
  const pairs: Array<[ProxyAddress, ProxyAddress, ProxyAddress, ProxyAddress]> = [
    [v4('127.0.0.1', 50000), v4('127.0.0.2', 443), v4('127.0.0.1', 50000), v4('127.0.0.2', 443)],
    [v6('2001:DB8:0:0::1', 1), v6('::', 0), v6('2001:db8::1', 1), v6('::', 0)],
    [v6('::ffff:127.0.0.1', 5), v6('::ffff:127.0.0.1', 6), v6('::ffff:127.0.0.1', 5), v6('::ffff:127.0.0.1', 6)],
    // mixed families are sent as IPv6 with the IPv4 side mapped, as HAProxy does
    [v4('10.0.0.1', 7), v6('fd00::2', 8), v6('::ffff:10.0.0.1', 7), v6('fd00::2', 8)],
  ];
  for (const [src, dst, wantSrc, wantDst] of pairs) {
    for (const bytes of [encodeProxyHeaderV1(src, dst), encodeProxyHeaderV2(src, dst)]) {
      const h = done(parseProxyHeader(bytes));
      t.same(
        [h.source, h.destination, h.length, h.command],
        [wantSrc, wantDst, bytes.length, 'proxy'],
        `${src.address} -> ${dst.address} v${h.version}`,
      );
    }
  }
  t.equal(encodeProxyHeaderV1(v4('1.2.3.4', 5), v4('6.7.8.9', 10)).toString('latin1'), 'PROXY TCP4 1.2.3.4 6.7.8.9 5 10\r\n');
  t.equal(encodeProxyHeaderV1Unknown().toString('latin1'), 'PROXY UNKNOWN\r\n');
  t.same(encodeProxyHeaderV2(v4('172.19.0.1', 42578), v4('172.19.0.3', 80)), haproxyV2, 'byte-identical to HAProxy');

  for (const [label, fn] of [
    ['bad IPv4', () => encodeProxyHeaderV1(v4('1.2.3', 1), v4('1.2.3.4', 1))],
    ['IPv6 text declared IPv4', () => encodeProxyHeaderV2(v4('::1', 1), v4('1.2.3.4', 1))],
    ['port 65536', () => encodeProxyHeaderV1(v4('1.2.3.4', 65536), v4('1.2.3.4', 1))],
    ['port 1.5', () => encodeProxyHeaderV2(v4('1.2.3.4', 1.5), v4('1.2.3.4', 1))],
    ['TLV type 256', () => encodeProxyHeaderV2(v4('1.2.3.4', 1), v4('1.2.3.4', 1), [{ type: 256, value: Buffer.alloc(0) }])],
    ['too many TLV bytes', () => encodeProxyHeaderV2(v4('1.2.3.4', 1), v4('1.2.3.4', 1), [{ type: 0xe0, value: Buffer.alloc(65530) }])],
  ] as const) {
    t.equal(code(fn), MALFORMED, label);
  }
});

t.test('seeded fuzz: only ProxyHeaderError, and what parses re-encodes to the same endpoints', async (t) => {
  const seed = 1207;
  const rand = prng(seed);
  const seeds = [
    b('PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n'),
    b('PROXY TCP6 2001:db8::1 ::ffff:1.2.3.4 65535 0\r\n'),
    b('PROXY UNKNOWN\r\n'),
    haproxyV2,
    encodeProxyHeaderV2(v6('fd00::1', 1), v6('fd00::2', 2), [{ type: 1, value: b('h2') }]),
    encodeProxyHeaderV2(v4('10.0.0.1', 1), v4('10.0.0.2', 2), [], { crc32c: true }),
    encodeProxyHeaderV2Local(),
  ];
  const alphabet = b('PROXY TCP46UNKNOW0123456789abcdef.:\r\n ');
  let unexpected = 0;
  let firstUnexpected = '';
  const counts = { need: 0, done: 0, error: 0 };
  for (let i = 0; i < 10000; i++) {
    const input = Buffer.from(rand.pick(seeds));
    const kind = rand.int(4);
    for (let m = rand.range(1, 3); m > 0; m--) {
      const at = rand.int(input.length);
      if (kind === 0) input[at] = rand.int(256);
      else if (kind === 1) input[at] = alphabet[rand.int(alphabet.length)]!;
      else if (kind === 2) input[at]! ^= 1 << rand.int(8);
    }
    const fed = kind === 3 ? input.subarray(0, rand.int(input.length)) : input;
    try {
      const r = parseProxyHeader(fed);
      if (r.status === 'need') {
        counts.need++;
        if (!(r.bytes >= 1)) throw new Error(`need ${r.bytes}`);
        continue;
      }
      counts.done++;
      const h = r.header;
      if (h.length > fed.length) throw new Error('length past the input');
      if (h.source && h.destination) {
        const again = done(
          parseProxyHeader(
            h.version === 1
              ? encodeProxyHeaderV1(h.source, h.destination)
              : encodeProxyHeaderV2(
                  h.source,
                  h.destination,
                  h.tlvs.filter((x) => x.type !== PP2_TYPE.CRC32C),
                ),
          ),
        );
        if (JSON.stringify([again.source, again.destination]) !== JSON.stringify([h.source, h.destination])) throw new Error('round trip');
      }
    } catch (err) {
      if (err instanceof ProxyHeaderError) counts.error++;
      else {
        unexpected++;
        firstUnexpected ||= `${String(err)} on ${fed.toString('hex')}`;
      }
    }
  }
  t.equal(unexpected, 0, firstUnexpected || `seed ${seed}`);
  t.ok(counts.need > 0 && counts.done > 0 && counts.error > 0, JSON.stringify(counts));
});
