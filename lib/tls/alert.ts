/**
 * A fatal TLS alert record (RFC 8446 §6, RFC 5246 §7.2): what a TLS client gets instead of a bare
 * reset when gate-mux refuses it, so the client reports a reason (unrecognized_name, ...).
 */
export function tlsAlertRecord(description: number): Buffer {
  // content type alert (21), legacy record version TLS 1.2, length 2, level fatal (2), description
  return Buffer.from([21, 0x03, 0x03, 0x00, 0x02, 0x02, description & 0xff]);
}
