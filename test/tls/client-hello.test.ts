import t from 'tap';
import { ErrorCodes } from '../../lib/errors.js';
import {
  ClientHelloError,
  DEFAULT_MAX_HANDSHAKE_BYTES,
  isGrease,
  parseClientHello,
  type ClientHello,
  type ClientHelloResult,
} from '../../lib/tls/client-hello.js';
import { loadHelloFixtures } from '../fixtures/hello-fixtures.js';
import { prng } from '../helpers/prng.js';
import { clientHello, ext, extensionsBlock, frame, handshake, helloBody, record, u16, u8, unframe, vec16, vec8 } from './hello-builder.js';

const fixtures = loadHelloFixtures();

function done(result: ClientHelloResult): ClientHello {
  if (result.status !== 'done') throw new Error(`expected done, got need ${result.bytes}`);
  return result.hello;
}

/** The parts of a hello that do not depend on record framing. */
function content(h: ClientHello): Omit<ClientHello, 'recordBytes' | 'recordCount'> {
  const { recordBytes: _b, recordCount: _c, ...rest } = h;
  return rest;
}

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ClientHelloError) return err.code;
    return `not a ClientHelloError: ${String(err)}`;
  }
  return undefined;
}

t.test('fixtures are present and cover the clients the brief names', async (t) => {
  const names = fixtures.map((f) => f.name);
  for (const n of ['chromium', 'curl', 'node-tls-h2', 'openssl-tls12-h2', 'openssl-tls13-postgres', 'openssl-tls13-kube']) {
    t.ok(names.includes(n), n);
  }
  const chromium = fixtures.find((f) => f.name === 'chromium');
  // The post-quantum hello is the one that crosses TCP segment sizes in real networks.
  t.ok(chromium && chromium.bytes.length > 1500, 'chromium hello is post-quantum sized');
});

t.test('every fixture parses whole to its expected values', async (t) => {
  for (const f of fixtures) {
    const h = done(parseClientHello(f.bytes));
    t.equal(h.sni, f.expected.sni, `${f.name} sni`);
    t.equal(h.sniIsIpLiteral, f.expected.sniIsIpLiteral, `${f.name} sniIsIpLiteral`);
    t.same(h.alpn, f.expected.alpn, `${f.name} alpn`);
    t.equal(h.legacyVersion, f.expected.legacyVersion, `${f.name} legacy version`);
    t.same(h.supportedVersions, f.expected.supportedVersions, `${f.name} supported versions`);
    t.equal(h.echOffered, f.expected.echOffered, `${f.name} ech`);
    t.equal(h.recordBytes, f.bytes.length, `${f.name} record bytes`);
    t.equal(h.recordCount, f.recordCount, `${f.name} record count`);
    t.equal(h.handshakeLength, f.handshakeLength, `${f.name} handshake length`);
    t.equal(h.extensionTypes.includes(0), f.expected.sni !== undefined || f.expected.sniIsIpLiteral, `${f.name} SNI extension listed`);
  }
});

t.test('chromium: GREASE is tolerated, listed in extension types and removed from versions', async (t) => {
  const f = fixtures.find((x) => x.name === 'chromium');
  if (!f) return t.fail('no chromium fixture');
  const h = done(parseClientHello(f.bytes));
  t.ok(h.extensionTypes.some(isGrease), 'a GREASE extension type is listed');
  t.notOk(h.supportedVersions.some(isGrease), 'no GREASE version left');
  t.ok(h.extensionTypes.includes(0xfe0d), 'encrypted_client_hello listed');
});

t.test('each fixture split at every byte boundary: need, then the same result', async (t) => {
  for (const f of fixtures) {
    const whole = done(parseClientHello(f.bytes));
    let bad = 0;
    for (let i = 0; i < f.bytes.length; i++) {
      const first = parseClientHello(Buffer.from(f.bytes.subarray(0, i)));
      // 'need' is a lower bound on what is missing, and exact once the record header is in.
      if (first.status !== 'need' || first.bytes < 1 || first.bytes > f.bytes.length - i) bad++;
      else if (i >= 5 && f.recordCount === 1 && first.bytes !== f.bytes.length - i) bad++;
      const joined = Buffer.concat([f.bytes.subarray(0, i), f.bytes.subarray(i)]);
      const second = parseClientHello(joined);
      if (second.status !== 'done' || JSON.stringify(second.hello) !== JSON.stringify(whole)) bad++;
    }
    t.equal(bad, 0, `${f.name}: ${f.bytes.length} splits`);
  }
});

t.test('each fixture re-framed into several records parses to the same result', async (t) => {
  const rand = prng(0x5eed1);
  for (const f of fixtures) {
    const whole = done(parseClientHello(f.bytes));
    const message = unframe(f.bytes);
    const framings: Array<[string, number[]]> = [
      ['1-byte records', [1]],
      ['2-byte records', [2]],
      ['header split 3+1', [3, 1, 5000]],
      ['header then body', [4, 16384]],
    ];
    for (let k = 0; k < 5; k++) {
      framings.push([`random sizes #${k}`, Array.from({ length: 64 }, () => rand.range(1, 120))]);
    }
    for (const [label, sizes] of framings) {
      const framed = frame(message, sizes);
      const h = done(parseClientHello(framed));
      t.same(content(h), content(whole), `${f.name} ${label}`);
      t.equal(h.recordBytes, framed.length, `${f.name} ${label} record bytes`);
      t.ok(h.recordCount > 1, `${f.name} ${label} several records`);
    }
  }
});

t.test('1-byte records: every prefix answers need with an honest lower bound', async (t) => {
  for (const name of ['openssl-tls13-postgres', 'chromium']) {
    const f = fixtures.find((x) => x.name === name);
    if (!f) return t.fail(`no ${name} fixture`);
    const framed = frame(unframe(f.bytes), [1]);
    const step = name === 'chromium' ? 7 : 1; // chromium: 11.5 KB framed, sample every 7th cut
    let bad = 0;
    for (let i = 0; i < framed.length; i += step) {
      const r = parseClientHello(framed.subarray(0, i));
      if (r.status !== 'need' || r.bytes < 1 || r.bytes > framed.length - i) bad++;
    }
    t.equal(bad, 0, `${name}: ${framed.length} bytes in 1-byte records`);
    t.equal(done(parseClientHello(framed)).recordCount, unframe(f.bytes).length);
  }
});

t.test('bytes after the hello records are not part of it', async (t) => {
  const f = fixtures[0]!;
  const extra = Buffer.concat([f.bytes, record(Buffer.from('early data'), 23, 0x0303)]);
  const h = done(parseClientHello(extra));
  t.equal(h.recordBytes, f.bytes.length);
});

t.test('not TLS', async (t) => {
  for (const [label, bytes] of [
    ['HTTP', Buffer.from('GET / HTTP/1.1\r\n')],
    ['application data record', Buffer.from([23, 3, 3, 0, 5])],
    ['alert record', Buffer.from([21, 3, 1, 0, 2, 2, 40])],
    ['SSLv2 hello', Buffer.from([0x80, 0x2e, 0x01, 0x03, 0x01])],
    ['major version 2', Buffer.from([22, 2, 0])],
    ['minor version 5', Buffer.from([22, 3, 5])],
    ['first byte only', Buffer.from([0x17])],
  ] as const) {
    t.equal(
      code(() => parseClientHello(bytes)),
      ErrorCodes.NOT_TLS,
      label,
    );
  }
  t.same(parseClientHello(Buffer.alloc(0)), { status: 'need', bytes: 9 }, 'empty input needs a record and a handshake header');
  t.same(parseClientHello(Buffer.from([22, 3])), { status: 'need', bytes: 7 });
});

t.test('record-layer errors', async (t) => {
  const message = handshake(helloBody({ extensions: [ext.sni('a.test')] }));
  const good = frame(message, [10]);
  t.ok(done(parseClientHello(good)));

  const interleaved = Buffer.concat([record(message.subarray(0, 10)), record(Buffer.from([1]), 23), record(message.subarray(10))]);
  t.equal(
    code(() => parseClientHello(interleaved)),
    ErrorCodes.HELLO_MALFORMED,
    'another content type inside the hello',
  );
  t.equal(
    code(() => parseClientHello(interleaved.subarray(0, 16))),
    ErrorCodes.HELLO_MALFORMED,
    'detected from its first byte',
  );

  const zero = Buffer.concat([record(message.subarray(0, 10)), record(Buffer.alloc(0)), record(message.subarray(10))]);
  t.equal(
    code(() => parseClientHello(zero)),
    ErrorCodes.HELLO_MALFORMED,
    'zero-length record (RFC 8446 §5.1)',
  );
  t.equal(
    code(() => parseClientHello(record(Buffer.alloc(0)))),
    ErrorCodes.HELLO_MALFORMED,
    'zero-length first record',
  );

  const badVersion = Buffer.concat([record(message.subarray(0, 10)), record(message.subarray(10), 22, 0x0203)]);
  t.equal(
    code(() => parseClientHello(badVersion)),
    ErrorCodes.HELLO_MALFORMED,
    'second record with a non-TLS version',
  );

  const overflow = Buffer.from([22, 3, 1, 0x40, 0x01, 1, 0, 0x40, 0]);
  t.equal(
    code(() => parseClientHello(overflow)),
    ErrorCodes.HELLO_MALFORMED,
    'record over 2^14',
  );

  const trailing = record(Buffer.concat([message, Buffer.from([0])]));
  t.equal(
    code(() => parseClientHello(trailing)),
    ErrorCodes.HELLO_MALFORMED,
    'bytes after the hello in its record',
  );
  t.equal(
    code(() => parseClientHello(trailing.subarray(0, 9))),
    ErrorCodes.HELLO_MALFORMED,
    'detected from the headers',
  );

  const serverHello = record(handshake(helloBody(), 2));
  t.equal(
    code(() => parseClientHello(serverHello)),
    ErrorCodes.HELLO_MALFORMED,
    'handshake type 2',
  );
  t.equal(
    code(() => parseClientHello(serverHello.subarray(0, 6))),
    ErrorCodes.HELLO_MALFORMED,
    'handshake type known from one byte',
  );

  for (const version of [0x0300, 0x0301, 0x0302, 0x0303, 0x0304]) {
    t.ok(done(parseClientHello(frame(message, [message.length], version))), `record version 0x0${version.toString(16)}`);
  }
});

t.test('size cap', async (t) => {
  // Header alone announces 16381 body bytes: 16385 > 16384 → refused before the body arrives.
  const announce = Buffer.from([22, 3, 1, 0x40, 0x00, 1, 0x00, 0x3f, 0xfd]);
  t.equal(
    code(() => parseClientHello(announce)),
    ErrorCodes.HELLO_TOO_LARGE,
    'default cap from the header alone',
  );
  const atCap = Buffer.from([22, 3, 1, 0x40, 0x00, 1, 0x00, 0x3f, 0xfc]);
  t.equal(parseClientHello(atCap).status, 'need', 'exactly the default cap is accepted');
  t.equal(DEFAULT_MAX_HANDSHAKE_BYTES, 16384);

  const chromium = fixtures.find((f) => f.name === 'chromium')!;
  const size = chromium.handshakeLength;
  t.equal(
    code(() => parseClientHello(chromium.bytes, { maxHandshakeBytes: 1000 })),
    ErrorCodes.HELLO_TOO_LARGE,
    'configurable cap',
  );
  t.equal(
    code(() => parseClientHello(chromium.bytes.subarray(0, 9), { maxHandshakeBytes: size - 1 })),
    ErrorCodes.HELLO_TOO_LARGE,
    'one byte over',
  );
  t.ok(done(parseClientHello(chromium.bytes, { maxHandshakeBytes: size })), 'exactly at the cap');

  // A hello larger than one record (2^14) is legal and reassembled when the cap allows it.
  const big = handshake(helloBody({ extensions: [ext.sni('big.test'), ext.raw(0xffce, Buffer.alloc(20000))] }));
  const framed = frame(big, [16384]);
  t.equal(
    code(() => parseClientHello(framed)),
    ErrorCodes.HELLO_TOO_LARGE,
    'over the default cap',
  );
  const h = done(parseClientHello(framed, { maxHandshakeBytes: 65536 }));
  t.equal(h.sni, 'big.test');
  t.equal(h.recordCount, 2);
});

t.test('body fields', async (t) => {
  const parse = (body: Buffer): ClientHello => done(parseClientHello(record(handshake(body))));
  const fail = (body: Buffer): string | undefined => code(() => parseClientHello(record(handshake(body))));
  const M = ErrorCodes.HELLO_MALFORMED;
  const head = (sid = vec8(Buffer.alloc(0)), suites = vec16(u16(0x1301)), comp = vec8(u8(0))): Buffer =>
    Buffer.concat([u16(0x0303), Buffer.alloc(32), sid, suites, comp]);

  const plain = parse(head());
  t.same([plain.sni, plain.alpn, plain.supportedVersions, plain.extensionTypes], [undefined, [], [], []], 'no extensions block (TLS 1.2)');
  t.equal(fail(Buffer.concat([u16(0x0303), Buffer.alloc(31)])), M, 'truncated random');
  t.equal(
    fail(Buffer.concat([u16(0x0203), Buffer.alloc(32), vec8(Buffer.alloc(0)), vec16(u16(1)), vec8(u8(0))])),
    M,
    'legacy_version 0x0203',
  );
  t.equal(fail(head(vec8(Buffer.alloc(33)))), M, 'session id over 32');
  t.ok(parse(head(vec8(Buffer.alloc(32)))), 'session id of 32');
  t.equal(fail(head(undefined, vec16(Buffer.alloc(0)))), M, 'no cipher suites');
  t.equal(fail(head(undefined, vec16(Buffer.alloc(3)))), M, 'odd cipher suites');
  t.equal(fail(head(undefined, Buffer.concat([u16(4), u16(0x1301)]))), M, 'cipher suites overrun');
  t.equal(fail(head(undefined, undefined, vec8(Buffer.alloc(0)))), M, 'no compression method');
  t.equal(fail(head(undefined, undefined, Buffer.from([2, 0]))), M, 'compression overrun');
  t.equal(fail(Buffer.concat([head(), u8(0)])), M, 'one stray byte after compression');
  t.equal(fail(Buffer.concat([head(), u16(0)])), undefined, 'empty extensions block is accepted');
  const block = extensionsBlock([ext.sni('x.test')]);
  t.equal(fail(Buffer.concat([head(), block, u8(0)])), M, 'byte after the extensions block');
  const shortBlock = Buffer.from(block);
  shortBlock.writeUInt16BE(block.length - 3, 0);
  t.equal(fail(Buffer.concat([head(), shortBlock])), M, 'extensions length one short');
  const longBlock = Buffer.from(block);
  longBlock.writeUInt16BE(block.length - 1, 0);
  t.equal(fail(Buffer.concat([head(), longBlock])), M, 'extensions length one long');
  t.equal(fail(Buffer.concat([head(), vec16(Buffer.concat([u16(5), u16(3), u8(0)]))])), M, 'extension overruns the block');
  t.equal(fail(Buffer.concat([head(), vec16(Buffer.concat([u16(5), u8(0)]))])), M, 'extension header truncated');
});

t.test('extensions', async (t) => {
  const M = ErrorCodes.HELLO_MALFORMED;
  const parse = (extensions: Parameters<typeof extensionsBlock>[0]): ClientHello => done(parseClientHello(clientHello({ extensions })));
  const fail = (extensions: Parameters<typeof extensionsBlock>[0]): string | undefined =>
    code(() => parseClientHello(clientHello({ extensions })));
  const raw = ext.raw;

  t.equal(parse([ext.sni('Gate.TEST')]).sni, 'gate.test', 'SNI lower-cased');
  t.equal(parse([ext.sni('my_host-1.gate.test')]).sni, 'my_host-1.gate.test', 'underscore and digits allowed');
  for (const ip of ['127.0.0.1', '::1', '2001:db8::1']) {
    const h = parse([ext.sni(ip)]);
    t.same([h.sni, h.sniIsIpLiteral], [undefined, true], `IP literal ${ip}`);
  }
  t.same(parse([ext.sni('1.2.3.4.example')]).sni, '1.2.3.4.example', 'digits-and-dots name that is not an IP');
  for (const [label, name] of [
    ['space', 'a b.test'],
    ['NUL', 'a\0.test'],
    ['high byte', 'caf\xe9.test'],
    ['slash', 'a/b'],
    ['trailing dot (RFC 6066 §3)', 'gate.test.'],
    ['leading dot', '.gate.test'],
    ['empty label', 'gate..test'],
    ['colon that is not IPv6', 'gate.test:443'],
    ['over 255 bytes', `${'a'.repeat(63)}.`.repeat(4) + 'e'],
  ] as const) {
    t.equal(fail([ext.sni(name)]), M, `SNI ${label}`);
  }
  t.equal(fail([ext.sni('')]), M, 'empty SNI');
  t.equal(fail([raw(0, Buffer.alloc(0))]), M, 'empty server_name extension');
  t.equal(fail([raw(0, vec16(Buffer.alloc(0)))]), M, 'empty server_name list');
  t.equal(fail([raw(0, vec16(Buffer.concat([u8(1), vec16(Buffer.from('a.test'))])))]), M, 'name type 1');
  t.equal(
    fail([raw(0, vec16(Buffer.concat([u8(0), vec16(Buffer.from('a.test')), u8(0), vec16(Buffer.from('b.test'))])))]),
    M,
    'two host names',
  );
  t.equal(fail([raw(0, Buffer.concat([u16(12), u8(0), vec16(Buffer.from('a.test'))]))]), M, 'list length long');
  t.equal(fail([raw(0, Buffer.concat([u16(8), u8(0), vec16(Buffer.from('a.test'))]))]), M, 'list length short');
  t.equal(fail([raw(0, vec16(Buffer.concat([u8(0), u16(7), Buffer.from('a.test')])))]), M, 'name length long');
  t.equal(fail([raw(0, vec16(Buffer.concat([u8(0), u16(5), Buffer.from('a.test')])))]), M, 'name length short');

  t.same(parse([ext.alpn(['gate-postgres', 'postgresql', 'h2'])]).alpn, ['gate-postgres', 'postgresql', 'h2'], 'ALPN in client order');
  t.equal(fail([raw(16, Buffer.alloc(0))]), M, 'empty ALPN extension');
  t.equal(fail([raw(16, vec16(Buffer.alloc(0)))]), M, 'empty ALPN list');
  t.equal(fail([raw(16, vec16(Buffer.concat([vec8(Buffer.from('h2')), u8(0)])))]), M, 'empty ALPN name');
  t.equal(fail([raw(16, vec16(Buffer.concat([u8(3), Buffer.from('h2')])))]), M, 'ALPN name overruns');
  t.equal(fail([raw(16, Buffer.concat([u16(4), vec8(Buffer.from('h2'))]))]), M, 'ALPN list length long');
  t.equal(fail([raw(16, Buffer.concat([u16(2), vec8(Buffer.from('h2'))]))]), M, 'ALPN list length short');

  t.same(parse([ext.supportedVersions([0x3a3a, 0x0304, 0x0303, 0xfafa])]).supportedVersions, [0x0304, 0x0303], 'GREASE versions removed');
  t.equal(fail([raw(43, Buffer.alloc(0))]), M, 'empty supported_versions extension');
  t.equal(fail([raw(43, Buffer.from([0]))]), M, 'empty versions list');
  t.equal(fail([raw(43, Buffer.from([3, 3, 4, 3]))]), M, 'odd versions list');
  t.equal(fail([raw(43, Buffer.from([4, 3, 4]))]), M, 'versions list length long');

  t.equal(parse([raw(0xfe0d, Buffer.from([0]))]).echOffered, true, 'ECH offered');
  t.equal(parse([raw(0xfe0c)]).echOffered, false, 'draft ECH code point is not 0xfe0d');
  const tolerant = parse([raw(0x0a0a), ext.sni('a.test'), raw(0x1234, Buffer.alloc(7)), raw(0xfafa, Buffer.from([0]))]);
  t.same(tolerant.extensionTypes, [0x0a0a, 0, 0x1234, 0xfafa], 'GREASE and unknown extensions tolerated and listed');
  t.equal(fail([ext.sni('a.test'), ext.sni('a.test')]), M, 'duplicate server_name (RFC 8446 §4.2)');
  t.equal(fail([raw(0x1234), raw(0x1234)]), M, 'duplicate unknown extension');
  t.equal(fail([raw(0x0a0a), raw(0x0a0a)]), M, 'duplicate GREASE extension');
  t.ok(parse([ext.sni('a.test'), raw(41, Buffer.alloc(4))]), 'pre_shared_key last');
  t.equal(fail([raw(41, Buffer.alloc(4)), ext.sni('a.test')]), M, 'pre_shared_key not last (RFC 8446 §4.2.11)');
});

t.test('corrupted length fields of the real fixtures', async (t) => {
  for (const f of fixtures) {
    // handshake length one short: the record then carries a byte past the hello
    const short = Buffer.from(f.bytes);
    short.writeUIntBE(f.handshakeLength - 5, 6, 3);
    t.equal(
      code(() => parseClientHello(short)),
      ErrorCodes.HELLO_MALFORMED,
      `${f.name} handshake length -1`,
    );
    // one long: the record ends before the hello, so another record would be needed
    const long = Buffer.from(f.bytes);
    long.writeUIntBE(f.handshakeLength - 3, 6, 3);
    t.same(parseClientHello(long), { status: 'need', bytes: 6 }, `${f.name} handshake length +1 waits for a record`);
    // record length +1 runs past the hello; -1 leaves its last byte for another record
    const rec = Buffer.from(f.bytes);
    rec.writeUInt16BE(f.bytes.length - 4, 3);
    t.equal(
      code(() => parseClientHello(rec)),
      ErrorCodes.HELLO_MALFORMED,
      `${f.name} record length +1`,
    );
    const cut = Buffer.from(f.bytes.subarray(0, -1));
    cut.writeUInt16BE(f.bytes.length - 6, 3);
    t.same(parseClientHello(cut), { status: 'need', bytes: 6 }, `${f.name} record length -1`);
    // the extensions length: walk to it
    const b = Buffer.from(f.bytes);
    let p = 9 + 2 + 32;
    p += 1 + b[p]!;
    p += 2 + b.readUInt16BE(p);
    p += 1 + b[p]!;
    for (const delta of [-1, 1]) {
      const c = Buffer.from(b);
      c.writeUInt16BE(b.readUInt16BE(p) + delta, p);
      t.equal(
        code(() => parseClientHello(c)),
        ErrorCodes.HELLO_MALFORMED,
        `${f.name} extensions length ${delta}`,
      );
    }
  }
});

t.test('seeded fuzz: only ClientHelloError, never a bogus answer', async (t) => {
  const seed = 20260421;
  const rand = prng(seed);
  const messages = fixtures.map((f) => unframe(f.bytes));
  let unexpected = 0;
  let firstUnexpected = '';
  const counts = { need: 0, done: 0, error: 0 };
  const N = 20000;
  for (let i = 0; i < N; i++) {
    let input: Buffer;
    const kind = rand.int(5);
    if (kind === 0) {
      input = Buffer.concat([Buffer.from([22, 3, rand.int(5)]), rand.bytes(rand.int(600))]);
    } else {
      const message = Buffer.from(rand.pick(messages));
      const mutations = rand.range(1, 4);
      for (let m = 0; m < mutations; m++) {
        const at = rand.int(message.length);
        if (rand.chance(0.5)) message[at] = rand.int(256);
        else message[at]! ^= 1 << rand.int(8);
      }
      input = kind === 1 ? frame(message, [rand.range(1, 64), rand.range(1, 2000)]) : record(message);
      if (kind === 3) input = input.subarray(0, rand.int(input.length + 1));
      if (kind === 4) {
        // mutate the record layer too
        input = Buffer.from(input);
        input[rand.int(Math.min(input.length, 12))] = rand.int(256);
      }
    }
    try {
      const r = parseClientHello(input);
      if (r.status === 'need') {
        counts.need++;
        if (!(r.bytes >= 1)) throw new Error(`need ${r.bytes}`);
      } else {
        counts.done++;
        if (r.hello.recordBytes > input.length || r.hello.handshakeLength > DEFAULT_MAX_HANDSHAKE_BYTES) throw new Error('bad done');
      }
    } catch (err) {
      if (err instanceof ClientHelloError) counts.error++;
      else {
        unexpected++;
        firstUnexpected ||= `${String(err)} on ${input.toString('hex')}`;
      }
    }
  }
  t.equal(unexpected, 0, firstUnexpected || `seed ${seed}`);
  t.equal(counts.need + counts.done + counts.error, N);
  t.ok(counts.error > 0 && counts.done > 0 && counts.need > 0, `mix of answers ${JSON.stringify(counts)}`);
});

t.test('ClientHelloError is a GateError with a stable code', async (t) => {
  try {
    parseClientHello(Buffer.from('SSH-2.0-x\r\n'));
    t.fail('should throw');
  } catch (err) {
    t.type(err, ClientHelloError);
    t.equal((err as ClientHelloError).code, 'GATE_ERR_NOT_TLS');
    t.equal((err as Error).name, 'ClientHelloError');
  }
});
