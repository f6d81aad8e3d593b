/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the PROXY v2
 * PP2_TYPE_CRC32C TLV (proxy-protocol.txt §2.2.5). zlib's crc32 is the other polynomial.
 */
const TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** Continues a CRC-32C over `data`: pass the previous result to checksum in pieces. */
export function crc32c(data: Uint8Array, previous = 0): number {
  let crc = ~previous >>> 0;
  for (let i = 0; i < data.length; i++) crc = TABLE[(crc ^ data[i]!) & 0xff]! ^ (crc >>> 8);
  return ~crc >>> 0;
}
