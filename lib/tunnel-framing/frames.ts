// The tunnel framing's frames: what each one is on the wire, written and read by pure functions
// (no socket here; framed-session.ts does the I/O). docs/tunnel-framing.md describes the protocol.
//
// Every frame is HTTP/2's 9-byte header (RFC 9113 §4.1: payload length u24, type u8, flags u8,
// stream id u32 with its top bit reserved) and a payload. The error codes are HTTP/2's numbers
// (RFC 9113 §7), so that logs read alike whichever framing a tunnel speaks. What HTTP/2 needs and
// a tunnel does not is left out: no HPACK (an open names its target as text), no priorities, and
// instead of SETTINGS one HELLO each way that says what the sender takes (its windows, its limit).
// Integers are big-endian (network byte order) throughout.
import { ErrorCodes, GateError } from '../errors.js';

export const FRAME_HEADER_BYTES = 9;

/** The longest payload a frame may carry: one socket read's worth of DATA in one frame. */
export const MAX_FRAME_PAYLOAD = 64 * 1024;

/** A reason (RESET, GOAWAY, a refusing ANSWER) longer than this is cut, and refused when read. */
export const MAX_REASON_BYTES = 1024;

export const FrameType = {
  /** Opens a stream: its kind, its target, the client's address. */
  OPEN: 1,
  /** The answer to an OPEN: a status (200: open) and, for a refusal, a code and a reason. */
  ANSWER: 2,
  /** A stream's bytes; FLAG_END is the sender's FIN (half-close). */
  DATA: 3,
  /** Credit returned, to one stream or (stream 0) to the connection. */
  WINDOW: 4,
  /** Ends a stream both ways at once, with an error code and a reason. */
  RESET: 5,
  /** No new streams: the last stream the sender took, a code, a reason. Stream 0. */
  GOAWAY: 6,
  /** Eight bytes echoed back with FLAG_ACK: the heartbeat. Stream 0. */
  PING: 7,
  /** Each side's first frame: the windows it gives the other side and its stream limit. Stream 0. */
  HELLO: 8,
} as const;

/** DATA: the sender's FIN. */
export const FLAG_END = 0x1;
/** PING: an answer. */
export const FLAG_ACK = 0x1;

/** The wire's error codes: HTTP/2's numbers (RFC 9113 §7). */
export const WireError = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  /** The TCP connection behind a stream failed (reset, or an error): RFC 9113 §8.5. */
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
} as const;

const WIRE_ERROR_NAMES: Record<number, string> = Object.fromEntries(Object.entries(WireError).map(([name, code]) => [code, name]));

/** `PROTOCOL_ERROR`, or `error 42` for a code this version does not name. */
export function wireErrorName(code: number): string {
  return WIRE_ERROR_NAMES[code] ?? `error ${code}`;
}

/**
 * A frame the other side should not have sent: the session ends with a GOAWAY carrying `wireCode`
 * and the message, and reports GATE_ERR_TUNNEL_PROTOCOL.
 */
export class FrameError extends GateError {
  constructor(
    readonly wireCode: number,
    message: string,
    /** GATE_ERR_TUNNEL_FLOOD for a peer that broke no rule of the framing but one of its limits. */
    code: typeof ErrorCodes.TUNNEL_PROTOCOL | typeof ErrorCodes.TUNNEL_FLOOD = ErrorCodes.TUNNEL_PROTOCOL,
  ) {
    super(code, `${message} (${wireErrorName(wireCode)})`);
  }
}

/**
 * A frame whose framing is sound (its lengths add up) but whose content is bad for its one stream:
 * a stream error (RESET with `wireCode`), not a session error, as RFC 9113 §5.4.2 and §8.1.1 treat
 * a malformed message. The session's other streams go on.
 */
export class StreamFrameError extends FrameError {}

/** `decode(payload)`, its stream error returned rather than thrown; a session error is thrown. */
export function decodeForStream<T>(decode: (payload: Buffer) => T, payload: Buffer): T | StreamFrameError {
  try {
    return decode(payload);
  } catch (err) {
    if (err instanceof StreamFrameError) return err;
    throw err;
  }
}

/** A peer past one of the framing's limits on work (docs/tunnel-framing.md, "Limits"). */
export function floodError(message: string): FrameError {
  return new FrameError(WireError.ENHANCE_YOUR_CALM, message, ErrorCodes.TUNNEL_FLOOD);
}

/** Stream kinds an OPEN may name. Kinds this version does not know are refused, not fatal. */
export const StreamKind = {
  /** A byte stream to `target` (`host:port`), dialled by the side that takes it. */
  CONNECT: 0,
  /**
   * The proxy asks the agent to describe itself: the agent answers 200 and writes its description
   * as JSON lines, the stream open for later ones; the proxy's FIN is its verdict (admitted).
   */
  DESCRIBE: 1,
  /**
   * The proxy tells the agent which proxy it is (the OPEN's target) and which proxies are live (the
   * DATA, ids separated by commas, then the FIN). The agent answers 200, or 400 when it is malformed.
   */
  CLUSTER_VIEW: 2,
} as const;

/** Writes a frame's 9-byte header into `into` at `at`. */
function writeHeader(into: Buffer, at: number, type: number, flags: number, streamId: number, length: number): void {
  into[at] = length >>> 16;
  into[at + 1] = (length >>> 8) & 0xff;
  into[at + 2] = length & 0xff;
  into[at + 3] = type;
  into[at + 4] = flags;
  into.writeUInt32BE(streamId, at + 5);
}

/** The 9-byte header of a frame whose payload is `length` bytes long (DATA: the payload goes apart, uncopied). */
export function frameHeader(type: number, flags: number, streamId: number, length: number): Buffer {
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  writeHeader(header, 0, type, flags, streamId, length);
  return header;
}

/** A whole frame, header and payload in one buffer (control frames: they are small). */
export function controlFrame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  writeHeader(frame, 0, type, flags, streamId, payload.length);
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

export interface OpenPayload {
  kind: number;
  /** `host:port`, at most 255 bytes of ASCII. */
  target: string;
  /** The client's address (`ip:port`), or '' when there is none to tell. */
  client: string;
  /**
   * On peering only: the agent whose tunnel the stream goes through (the holder dials it there).
   * Absent on an agent's tunnel.
   */
  agent?: string;
}

/** OPEN: kind u8, target length u8, target, client length u8, client, and optionally agent length u8, agent. */
export function encodeOpen(open: OpenPayload): Buffer {
  const target = Buffer.from(open.target, 'latin1');
  const client = Buffer.from(open.client, 'latin1');
  const agent = open.agent ? Buffer.from(open.agent, 'latin1') : undefined;
  if (
    target.length > 255 ||
    client.length > 255 ||
    (agent?.length ?? 0) > 255 ||
    !isPrintableAscii(open.target) ||
    !isPrintableAscii(open.client) ||
    !isPrintableAscii(open.agent ?? '')
  )
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `an open's target, client and agent are at most 255 printable ASCII bytes each`);
  const payload = Buffer.allocUnsafe(3 + target.length + client.length + (agent ? 1 + agent.length : 0));
  payload[0] = open.kind;
  payload[1] = target.length;
  target.copy(payload, 2);
  const clientAt = 2 + target.length;
  payload[clientAt] = client.length;
  client.copy(payload, clientAt + 1);
  if (agent) {
    const agentAt = clientAt + 1 + client.length;
    payload[agentAt] = agent.length;
    agent.copy(payload, agentAt + 1);
  }
  return payload;
}

export function decodeOpen(payload: Buffer): OpenPayload {
  if (payload.length < 3) throw new FrameError(WireError.FRAME_SIZE_ERROR, `an OPEN of ${payload.length} bytes`);
  const targetLength = payload[1]!;
  const clientAt = 2 + targetLength;
  const agentAt = clientAt >= payload.length ? payload.length + 1 : clientAt + 1 + payload[clientAt]!;
  const fits = agentAt === payload.length || (agentAt < payload.length && agentAt + 1 + payload[agentAt]! === payload.length);
  if (!fits) throw new FrameError(WireError.FRAME_SIZE_ERROR, `an OPEN whose lengths do not add up to its ${payload.length} bytes`);
  const target = payload.toString('latin1', 2, clientAt);
  const client = payload.toString('latin1', clientAt + 1, agentAt);
  const agent = agentAt < payload.length ? payload.toString('latin1', agentAt + 1) : undefined;
  // Sound as framing (the lengths add up), so bad only for its stream: a stream error.
  if (!isPrintableAscii(target) || !isPrintableAscii(client) || !isPrintableAscii(agent ?? ''))
    throw new StreamFrameError(WireError.PROTOCOL_ERROR, 'an OPEN whose target, client or agent is not printable ASCII');
  return agent === undefined ? { kind: payload[0]!, target, client } : { kind: payload[0]!, target, client, agent };
}

export interface AnswerPayload {
  /** 200: the stream is open. Anything else refuses it, with `code` and `reason`. */
  status: number;
  /** A GATE_ERR_* code saying why, or '' (at most 64 bytes). */
  code: string;
  reason: string;
}

/** ANSWER: status u16, code length u8, code, reason (UTF-8, the rest). */
export function encodeAnswer(answer: AnswerPayload): Buffer {
  const code = Buffer.from(answer.code.slice(0, 64), 'latin1');
  const reason = utf8Cut(answer.reason, MAX_REASON_BYTES);
  const payload = Buffer.allocUnsafe(3 + code.length + reason.length);
  payload.writeUInt16BE(answer.status, 0);
  payload[2] = code.length;
  code.copy(payload, 3);
  reason.copy(payload, 3 + code.length);
  return payload;
}

export function decodeAnswer(payload: Buffer): AnswerPayload {
  if (payload.length < 3 || 3 + payload[2]! > payload.length)
    throw new FrameError(WireError.FRAME_SIZE_ERROR, `an ANSWER whose lengths do not add up to its ${payload.length} bytes`);
  const codeEnd = 3 + payload[2]!;
  const code = payload.toString('latin1', 3, codeEnd);
  // Sound as framing (the lengths add up), so bad only for its stream: a stream error.
  if (payload.length - codeEnd > MAX_REASON_BYTES)
    throw new StreamFrameError(WireError.PROTOCOL_ERROR, 'an ANSWER with a reason over 1 KiB');
  if (!/^[A-Z0-9_]*$/.test(code)) throw new StreamFrameError(WireError.PROTOCOL_ERROR, 'an ANSWER with a code not [A-Z0-9_]*');
  return { status: payload.readUInt16BE(0), code, reason: payload.toString('utf8', codeEnd) };
}

/** What one side tells the other in its HELLO: what it takes, so the other side may send that much. */
export interface HelloPayload {
  /** Bytes the other side may send on each stream before this side returns credit (1 to 2^31-1). */
  streamWindow: number;
  /** Bytes the other side may send on all streams together before this side returns credit (1 to 2^31-1). */
  connectionWindow: number;
  /** Streams of the other side this side holds open at once; opens past it are refused (0 to 2^31-1). */
  maxStreams: number;
}

/** The bytes of a HELLO this version writes; a later version may append fields, which this one skips. */
export const HELLO_BYTES = 12;
/** A HELLO longer than this is refused: room for later fields, not for a payload's worth of them. */
export const MAX_HELLO_BYTES = 256;

/** HELLO: stream window u32, connection window u32, stream limit u32. */
export function encodeHello(hello: HelloPayload): Buffer {
  if (
    !inWindowRange(hello.streamWindow) ||
    !inWindowRange(hello.connectionWindow) ||
    !(hello.maxStreams >= 0 && hello.maxStreams <= 0x7fffffff)
  )
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, "a HELLO's windows are 1 to 2^31-1 bytes and its stream limit 0 to 2^31-1");
  const payload = Buffer.allocUnsafe(HELLO_BYTES);
  payload.writeUInt32BE(hello.streamWindow, 0);
  payload.writeUInt32BE(hello.connectionWindow, 4);
  payload.writeUInt32BE(hello.maxStreams, 8);
  return payload;
}

/** A whole HELLO frame (stream 0, no flags): what a side writes first. */
export function helloFrame(hello: HelloPayload): Buffer {
  return controlFrame(FrameType.HELLO, 0, 0, encodeHello(hello));
}

export function decodeHello(payload: Buffer): HelloPayload {
  if (payload.length < HELLO_BYTES || payload.length > MAX_HELLO_BYTES)
    throw new FrameError(WireError.FRAME_SIZE_ERROR, `a HELLO of ${payload.length} bytes`);
  const hello = { streamWindow: payload.readUInt32BE(0), connectionWindow: payload.readUInt32BE(4), maxStreams: payload.readUInt32BE(8) };
  if (!inWindowRange(hello.streamWindow) || !inWindowRange(hello.connectionWindow) || hello.maxStreams > 0x7fffffff)
    throw new FrameError(WireError.PROTOCOL_ERROR, 'a HELLO with a window of 0 or past 2^31-1, or a stream limit past 2^31-1');
  return hello;
}

function inWindowRange(bytes: number): boolean {
  return Number.isInteger(bytes) && bytes >= 1 && bytes <= 0x7fffffff;
}

export interface ResetPayload {
  code: number;
  reason: string;
}

/** RESET: error code u32, reason (UTF-8, the rest). */
export function encodeReset(reset: ResetPayload): Buffer {
  const reason = utf8Cut(reset.reason, MAX_REASON_BYTES);
  const payload = Buffer.allocUnsafe(4 + reason.length);
  payload.writeUInt32BE(reset.code >>> 0, 0);
  reason.copy(payload, 4);
  return payload;
}

export function decodeReset(payload: Buffer): ResetPayload {
  if (payload.length < 4 || payload.length > 4 + MAX_REASON_BYTES)
    throw new FrameError(WireError.FRAME_SIZE_ERROR, `a RESET of ${payload.length} bytes`);
  return { code: payload.readUInt32BE(0), reason: payload.toString('utf8', 4) };
}

export interface GoAwayPayload {
  /** The highest stream id the sender took from the other side: later ones were not seen. */
  lastStreamId: number;
  code: number;
  reason: string;
}

/** GOAWAY: last stream id u32, error code u32, reason (UTF-8, the rest). */
export function encodeGoAway(goAway: GoAwayPayload): Buffer {
  const reason = utf8Cut(goAway.reason, MAX_REASON_BYTES);
  const payload = Buffer.allocUnsafe(8 + reason.length);
  payload.writeUInt32BE(goAway.lastStreamId, 0);
  payload.writeUInt32BE(goAway.code >>> 0, 4);
  reason.copy(payload, 8);
  return payload;
}

export function decodeGoAway(payload: Buffer): GoAwayPayload {
  if (payload.length < 8 || payload.length > 8 + MAX_REASON_BYTES)
    throw new FrameError(WireError.FRAME_SIZE_ERROR, `a GOAWAY of ${payload.length} bytes`);
  return { lastStreamId: payload.readUInt32BE(0) & 0x7fffffff, code: payload.readUInt32BE(4), reason: payload.toString('utf8', 8) };
}

/** WINDOW: the credit returned, 1 to 2^31-1 bytes. */
export function encodeWindow(increment: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32BE(increment, 0);
  return payload;
}

export function decodeWindow(payload: Buffer): number {
  if (payload.length !== 4) throw new FrameError(WireError.FRAME_SIZE_ERROR, `a WINDOW of ${payload.length} bytes`);
  const increment = payload.readUInt32BE(0);
  if (increment === 0 || increment > 0x7fffffff) throw new FrameError(WireError.PROTOCOL_ERROR, `a WINDOW of ${increment} bytes`);
  return increment;
}

function isPrintableAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

/** `text` as UTF-8, cut to at most `max` bytes on a character boundary. */
function utf8Cut(text: string, max: number): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= max) return bytes;
  let end = max;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}
