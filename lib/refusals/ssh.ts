import { answer, type RefusalAnswer } from './step.js';
import type { FailureKind, RouteFailure } from './failure.js';

/**
 * SSH: the server's identification string (RFC 4253 §4.2), then SSH_MSG_DISCONNECT in the
 * unencrypted binary packet form used before key exchange (§6: no MAC, padding to a multiple of 8,
 * at least 4 bytes of it). §11.1 allows a disconnect at any time; OpenSSH prints
 * `Received disconnect from <host> port <port>:<reason>: <description>`.
 */

export const SSH_IDENTIFICATION = 'SSH-2.0-gate-mux';

const SSH_MSG_DISCONNECT = 1;

/** RFC 4253 §11.1 reason codes. */
const REASON: Record<FailureKind, number> = {
  unavailable: 7, // SSH_DISCONNECT_SERVICE_NOT_AVAILABLE
  timeout: 7,
  failed: 7,
  denied: 1, // SSH_DISCONNECT_HOST_NOT_ALLOWED_TO_CONNECT
  busy: 12, // SSH_DISCONNECT_TOO_MANY_CONNECTIONS
};

export function sshRefusal(_received: Buffer, failure: RouteFailure): RefusalAnswer {
  return answer(Buffer.concat([Buffer.from(`${SSH_IDENTIFICATION}\r\n`, 'latin1'), disconnectPacket(REASON[failure.kind], failure.text)]));
}

/** SSH_MSG_DISCONNECT (uint32 reason, string description, string language tag) as a binary packet. */
export function disconnectPacket(reason: number, description: string): Buffer {
  const text = Buffer.from(description, 'utf8');
  const payload = Buffer.alloc(1 + 4 + 4 + text.length + 4);
  let at = payload.writeUInt8(SSH_MSG_DISCONNECT, 0);
  at = payload.writeUInt32BE(reason, at);
  at = payload.writeUInt32BE(text.length, at);
  at += text.copy(payload, at);
  payload.writeUInt32BE(0, at); // language tag: empty
  // packet_length (4) + padding_length (1) + payload + padding is a multiple of 8, padding >= 4.
  let padding = 8 - ((5 + payload.length) % 8);
  if (padding < 4) padding += 8;
  const packet = Buffer.alloc(5 + payload.length + padding);
  packet.writeUInt32BE(1 + payload.length + padding, 0);
  packet[4] = padding;
  payload.copy(packet, 5);
  return packet;
}
