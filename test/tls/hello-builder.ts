/** Builds synthetic ClientHellos (and record framings) for tests, field by field. */

export const u8 = (n: number): Buffer => Buffer.from([n & 0xff]);
export const u16 = (n: number): Buffer => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
export const u24 = (n: number): Buffer => Buffer.from([(n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
export const vec8 = (b: Buffer): Buffer => Buffer.concat([u8(b.length), b]);
export const vec16 = (b: Buffer): Buffer => Buffer.concat([u16(b.length), b]);

export interface Extension {
  type: number;
  data: Buffer;
}

export interface HelloSpec {
  legacyVersion?: number;
  sessionId?: Buffer;
  cipherSuites?: Buffer;
  compression?: Buffer;
  /** undefined: a TLS 1.2 hello without an extensions block. */
  extensions?: Extension[];
}

export const ext = {
  sni: (name: string | Buffer): Extension => ({
    type: 0,
    data: vec16(Buffer.concat([u8(0), vec16(Buffer.isBuffer(name) ? name : Buffer.from(name, 'latin1'))])),
  }),
  alpn: (names: string[]): Extension => ({
    type: 16,
    data: vec16(Buffer.concat(names.map((n) => vec8(Buffer.from(n, 'latin1'))))),
  }),
  supportedVersions: (versions: number[]): Extension => ({ type: 43, data: vec8(Buffer.concat(versions.map(u16))) }),
  raw: (type: number, data: Buffer = Buffer.alloc(0)): Extension => ({ type, data }),
};

export function extensionsBlock(extensions: Extension[]): Buffer {
  return vec16(Buffer.concat(extensions.map((e) => Buffer.concat([u16(e.type), vec16(e.data)]))));
}

export function helloBody(spec: HelloSpec = {}): Buffer {
  const parts = [
    u16(spec.legacyVersion ?? 0x0303),
    Buffer.alloc(32, 0x42),
    vec8(spec.sessionId ?? Buffer.alloc(32, 0x11)),
    vec16(spec.cipherSuites ?? Buffer.from([0x13, 0x01, 0x13, 0x02, 0xc0, 0x2f])),
    vec8(spec.compression ?? Buffer.from([0])),
  ];
  if (spec.extensions) parts.push(extensionsBlock(spec.extensions));
  return Buffer.concat(parts);
}

/** A handshake message: type (1 = client_hello), 24-bit length, body. */
export function handshake(body: Buffer, type = 1): Buffer {
  return Buffer.concat([u8(type), u24(body.length), body]);
}

export function record(fragment: Buffer, type = 22, version = 0x0301): Buffer {
  return Buffer.concat([u8(type), u16(version), u16(fragment.length), fragment]);
}

/** Frames a handshake message into records of the given fragment sizes (the last one repeats). */
export function frame(message: Buffer, sizes: number[], version = 0x0301): Buffer {
  const out: Buffer[] = [];
  let i = 0;
  for (let p = 0; p < message.length; i++) {
    const size = Math.min(sizes[Math.min(i, sizes.length - 1)]!, message.length - p);
    out.push(record(message.subarray(p, p + size), 22, version));
    p += size;
  }
  return Buffer.concat(out);
}

/** The handshake message carried by single- or multi-record input (records of type 22 only). */
export function unframe(records: Buffer): Buffer {
  const out: Buffer[] = [];
  for (let p = 0; p + 5 <= records.length; ) {
    const n = records.readUInt16BE(p + 3);
    out.push(records.subarray(p + 5, p + 5 + n));
    p += 5 + n;
  }
  return Buffer.concat(out);
}

export function clientHello(spec: HelloSpec = {}): Buffer {
  return record(handshake(helloBody(spec)));
}
