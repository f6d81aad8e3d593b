// ClientHello bytes for the parser workload, built by hand so their sizes are known and stable:
// a typical small TLS 1.3 hello, a post-quantum-sized one (an X25519MLKEM768 key share makes it
// ~1.8 KB, over one TCP segment), and that same hello fragmented over several TLS records (RFC 8446 §5.1).

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

function vec16(...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  return Buffer.concat([u16(body.length), body]);
}

function vec8(...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([body.length]), body]);
}

function extension(type: number, body: Buffer): Buffer {
  return Buffer.concat([u16(type), vec16(body)]);
}

/** Deterministic filler so repeated runs parse identical bytes. */
function filler(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

export interface HelloOptions {
  sni: string;
  alpn: string[];
  /** Extra key share of this many bytes for group X25519MLKEM768 (0x11ec); 0 for none. */
  pqKeyShareBytes: number;
  /** Pad the handshake message to this size with the padding extension (RFC 7685), as browsers do. */
  padTo?: number;
}

/** The handshake message (type 1 + uint24 length + body) of a TLS 1.3 ClientHello. */
export function clientHelloHandshake(options: HelloOptions): Buffer {
  const extensions: Buffer[] = [
    extension(0x0000, vec16(Buffer.from([0]), vec16(Buffer.from(options.sni)))),
    extension(0x000b, vec8(Buffer.from([0]))),
    extension(0x000a, vec16(...(options.pqKeyShareBytes > 0 ? [u16(0x11ec)] : []), u16(0x001d), u16(0x0017), u16(0x0018))),
    extension(0x0010, vec16(...options.alpn.map((p) => vec8(Buffer.from(p))))),
    extension(0x0016, Buffer.alloc(0)),
    extension(0x0017, Buffer.alloc(0)),
    extension(0x000d, vec16(...[0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601].map(u16))),
    extension(
      0x0033,
      vec16(
        ...(options.pqKeyShareBytes > 0 ? [u16(0x11ec), vec16(filler(options.pqKeyShareBytes, 7))] : []),
        u16(0x001d),
        vec16(filler(32, 11)),
      ),
    ),
    extension(0x002d, vec8(Buffer.from([1]))),
    extension(0x002b, vec8(u16(0x0304), u16(0x0303))),
  ];
  const fixed = 4 + 2 + 32 + 33 + 2 + 18 + 2 + 2;
  const used = fixed + extensions.reduce((n, e) => n + e.length, 0);
  if (options.padTo !== undefined && options.padTo - used >= 4) extensions.push(extension(0x0015, Buffer.alloc(options.padTo - used - 4)));
  const body = Buffer.concat([
    u16(0x0303),
    filler(32, 3), // random
    vec8(filler(32, 5)), // legacy_session_id (middlebox compatibility mode)
    vec16(...[0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8].map(u16)),
    vec8(Buffer.from([0])),
    vec16(...extensions),
  ]);
  const header = Buffer.from([1, (body.length >> 16) & 0xff, (body.length >> 8) & 0xff, body.length & 0xff]);
  return Buffer.concat([header, body]);
}

/** Wraps a handshake message in TLS handshake records of at most `fragment` bytes each. */
export function records(handshake: Buffer, fragment = 16384): Buffer {
  const out: Buffer[] = [];
  for (let off = 0; off < handshake.length; off += fragment) {
    const piece = handshake.subarray(off, Math.min(off + fragment, handshake.length));
    out.push(Buffer.from([0x16, 0x03, 0x01]), u16(piece.length), piece);
  }
  return Buffer.concat(out);
}

export interface NamedHello {
  name: string;
  bytes: Buffer;
  records: number;
}

/** The three hellos of the parser workload. */
export function benchHellos(): NamedHello[] {
  const small = clientHelloHandshake({ sni: 'bench.local', alpn: ['h2', 'gate-bench'], pqKeyShareBytes: 0 });
  // X25519MLKEM768 client share: 1184-byte ML-KEM-768 encapsulation key + 32-byte X25519 key;
  // padded to the ~1.8 KB a browser sends (GREASE, ECH and friends fill the rest).
  const pq = clientHelloHandshake({ sni: 'bench.local', alpn: ['h2', 'gate-bench'], pqKeyShareBytes: 1216, padTo: 1800 });
  const fragment = 256;
  return [
    { name: 'small', bytes: records(small), records: 1 },
    { name: 'post-quantum', bytes: records(pq), records: 1 },
    { name: `multi-record (${fragment} B records)`, bytes: records(pq, fragment), records: Math.ceil(pq.length / fragment) },
  ];
}
