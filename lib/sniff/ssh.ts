import { ascii, sniffLiterals } from './prefix.js';
import type { Sniff } from './types.js';

/**
 * RFC 4253 §4.2: the client's first bytes are its identification string "SSH-protoversion-...".
 * Only the server may send other lines before it, so a client greeting is "SSH-" or not SSH.
 * (Server-speaks-first clients send nothing: that is the silence route, not this sniffer.)
 */
const SSH = [ascii('SSH-')];

export function sniffSsh(buf: Uint8Array): Sniff {
  return sniffLiterals(buf, SSH);
}
