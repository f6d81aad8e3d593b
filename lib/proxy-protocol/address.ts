/**
 * Strict textual IP addresses for the PROXY protocol, both ways. proxy-protocol.txt §2.1: IPv4 is
 * exactly four decimal numbers 0..255 without leading zeroes (no octal confusion); IPv6 is groups
 * of hex digits with at most one "::", 128 bits in total. No zone ids, no brackets.
 */

/** Four bytes of a dotted-quad IPv4 address, or undefined when it is not one (strictly). */
export function parseIPv4(text: string): Uint8Array | undefined {
  const out = new Uint8Array(4);
  let part = 0;
  let value = -1; // -1: no digit yet in this part
  let leadingZero = false;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 0x2e; // a virtual '.' ends the last part
    if (c >= 0x30 && c <= 0x39) {
      if (leadingZero) return undefined;
      if (value === -1) {
        value = c - 0x30;
        leadingZero = value === 0;
      } else {
        value = value * 10 + (c - 0x30);
        if (value > 255) return undefined;
      }
    } else if (c === 0x2e) {
      if (value === -1 || part > 3) return undefined;
      out[part++] = value;
      value = -1;
      leadingZero = false;
    } else {
      return undefined;
    }
  }
  return part === 4 ? out : undefined;
}

/** Sixteen bytes of an IPv6 address (an IPv4 dotted tail allowed, as inet_pton), or undefined. */
export function parseIPv6(text: string): Uint8Array | undefined {
  if (text.length < 2 || text.length > 45) return undefined;
  const words: number[] = [];
  let gap = -1; // index in words where "::" stands
  let i = 0;
  if (text.startsWith('::')) {
    gap = 0;
    i = 2;
    if (i === text.length) return new Uint8Array(16);
  } else if (text.charCodeAt(0) === 0x3a) {
    return undefined;
  }
  for (;;) {
    // one group: up to 4 hex digits, or a dotted IPv4 tail
    let j = i;
    while (j < text.length && text.charCodeAt(j) !== 0x3a) j++;
    const group = text.slice(i, j);
    if (group.includes('.')) {
      if (j !== text.length) return undefined;
      const v4 = parseIPv4(group);
      if (!v4) return undefined;
      words.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      break;
    }
    if (group.length === 0 || group.length > 4 || !/^[0-9a-fA-F]+$/.test(group)) return undefined;
    words.push(Number.parseInt(group, 16));
    if (j === text.length) break;
    // j is at ':'
    if (text.charCodeAt(j + 1) === 0x3a) {
      if (gap !== -1) return undefined; // a second "::"
      gap = words.length;
      i = j + 2;
      if (i === text.length) break;
    } else {
      i = j + 1;
      if (i === text.length) return undefined; // trailing single ':'
    }
  }
  if (gap === -1 ? words.length !== 8 : words.length > 7) return undefined;
  const out = new Uint8Array(16);
  const tail = gap === -1 ? 0 : words.length - gap;
  const head = gap === -1 ? words.length : gap;
  for (let k = 0; k < head; k++) {
    out[2 * k] = words[k]! >> 8;
    out[2 * k + 1] = words[k]! & 0xff;
  }
  for (let k = 0; k < tail; k++) {
    const w = words[gap + k]!;
    const at = 8 - tail + k;
    out[2 * at] = w >> 8;
    out[2 * at + 1] = w & 0xff;
  }
  return out;
}

export function formatIPv4(bytes: Uint8Array, offset = 0): string {
  return `${bytes[offset]}.${bytes[offset + 1]}.${bytes[offset + 2]}.${bytes[offset + 3]}`;
}

/**
 * IPv6 text the way Node reports socket addresses (libuv's inet_ntop6, RFC 5952): lower case, the
 * longest run of two or more zero words as "::" (the first on a tie), and a dotted tail for
 * IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses.
 */
export function formatIPv6(bytes: Uint8Array, offset = 0): string {
  const words: number[] = [];
  for (let k = 0; k < 8; k++) words.push((bytes[offset + 2 * k]! << 8) | bytes[offset + 2 * k + 1]!);
  let bestBase = -1;
  let bestLen = 0;
  for (let k = 0; k < 8; ) {
    if (words[k] !== 0) {
      k++;
      continue;
    }
    let e = k;
    while (e < 8 && words[e] === 0) e++;
    if (e - k > bestLen) {
      bestBase = k;
      bestLen = e - k;
    }
    k = e;
  }
  if (bestLen < 2) bestBase = -1;
  let out = '';
  for (let k = 0; k < 8; k++) {
    if (bestBase !== -1 && k >= bestBase && k < bestBase + bestLen) {
      if (k === bestBase) out += ':';
      continue;
    }
    if (k !== 0) out += ':';
    if (k === 6 && bestBase === 0 && (bestLen === 6 || (bestLen === 5 && words[5] === 0xffff))) {
      out += formatIPv4(bytes, offset + 12);
      break;
    }
    out += words[k]!.toString(16);
  }
  if (bestBase !== -1 && bestBase + bestLen === 8) out += ':';
  return out;
}
