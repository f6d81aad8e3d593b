// An agent's tunnel in gate-mux's framing (docs/tunnel-framing.md), the proxy being the side that
// accepted the connection (agent-link.ts says why a link). Each stream has a kind: a client
// connection, the describe request, the cluster view.
import { EventEmitter } from 'node:events';
import type { TLSSocket } from 'node:tls';
import type { GateError } from '../errors.js';
import { type AdmissionLimits, FramedSession } from '../tunnel-framing/framed-session.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import { type AnswerPayload, type GoAwayPayload, StreamKind, WireError, wireErrorName } from '../tunnel-framing/frames.js';
import { refusalDebugData } from './admission.js';
import type { AgentLink, ConnectRequest, DescribeReader, DescribeRequest, LinkAnswerOptions } from './agent-link.js';
import type { TunnelStream } from './tunnel-stream.js';
import type { ClusterView } from './cluster-view.js';
import { readLines } from './read-lines.js';
import { awaitFramedAnswer } from './framed-answer.js';
import { refuseFramed } from './goaway-refusal.js';

/**
 * What an agent may do before it is admitted (it answers the describe request, the proxy's
 * verdict comes): its first PING and its heartbeat's, its answers and its description (at most
 * 16 KiB a line), nothing else. Its certificate proves only that it was enrolled, and one
 * certificate may open many sessions that never describe themselves (issue 37), so each costs
 * little until then; the registry's deadline for the description ends it.
 */
export const AGENT_ADMISSION_LIMITS: AdmissionLimits = { pings: 8, bytes: 256 * 1024, idleFrames: 16 };

/** True when `stream` ended in a reset, either way (not a refusal: that is an answer). */
function endedInReset(stream: FramedStream): boolean {
  if (stream.closeCode === undefined || stream.closeCode === WireError.NO_ERROR) return false;
  return !(stream.answer && stream.answer.status !== 200);
}

export class FramedAgentLink extends EventEmitter implements AgentLink {
  readonly session: FramedSession;

  constructor(
    private readonly socket: TLSSocket,
    /** The agent's name, for messages. */
    private readonly agent: string,
  ) {
    super();
    // The agent dialled: it is the dialer (odd ids), the proxy opens even ones. An agent has
    // nothing to open on the proxy: the session's default refuses its opens with 501 (before
    // admission, an open ends the session).
    const session = new FramedSession(socket, { side: 'listener', untilAdmitted: AGENT_ADMISSION_LIMITS });
    this.session = session;
    session.on('goaway', (goAway: GoAwayPayload) => this.emit('goaway', `agent sent GOAWAY (${wireErrorName(goAway.code)})`));
    session.once('close', (error: GateError | undefined) => {
      if (error) this.emit('error', error);
      this.emit('close');
    });
  }

  get peer(): FramedSession {
    return this.session;
  }

  get streamLimit(): number {
    return this.session.streamLimit;
  }

  get usable(): boolean {
    return !this.session.closing;
  }

  connect(request: ConnectRequest, answer: LinkAnswerOptions, counted: (reset: boolean) => void): Promise<TunnelStream> {
    const stream = this.session.open({ kind: StreamKind.CONNECT, target: request.target, client: request.client ?? '' });
    if (request.firstBytes) stream.write(request.firstBytes);
    stream.once('close', () => counted(endedInReset(stream)));
    return awaitFramedAnswer(stream, { ...answer, lost: () => answer.lost(this.lossReason(stream)) });
  }

  /** Why `stream` ended before it was answered, in words. */
  private lossReason(stream: TunnelStream): string {
    if (this.session.closed) return `agent ${this.agent} disconnected`;
    const { closeCode, closeReason, closedByPeer } = stream as FramedStream;
    // By the proxy: the agent's answer was malformed (a stream error, docs/tunnel-framing.md).
    const by = closedByPeer ? 'by the agent' : 'by the proxy';
    return `stream reset ${by} (${wireErrorName(closeCode ?? WireError.NO_ERROR)}${closeReason ? `: ${closeReason}` : ''})`;
  }

  sendView(view: ClusterView, unsupported: (status: number) => void): void {
    const stream = this.session.open({ kind: StreamKind.CLUSTER_VIEW, target: view.proxyId, client: '' });
    stream.write(Buffer.from(view.proxyIds.join(','), 'latin1'));
    stream.end();
    stream.once('response', (answer: AnswerPayload) => {
      if (answer.status < 200 || answer.status >= 300) unsupported(answer.status);
    });
    stream.on('data', ignore);
    stream.resume();
  }

  describe(maxLineBytes: number, reader: DescribeReader): DescribeRequest | undefined {
    if (!this.usable) return undefined;
    const stream = this.session.open({ kind: StreamKind.DESCRIBE, target: '', client: '' });
    stream.once('response', (answer: AnswerPayload) => {
      reader.answer(answer.status);
      if (answer.status !== 200) return;
      readLines(stream, maxLineBytes, reader.line, reader.overflow);
      stream.resume();
    });
    return {
      admit: () => {
        this.session.admit();
        stream.end();
      },
      refuse: () => stream.reset(WireError.REFUSED_STREAM, 'the description is refused'),
    };
  }

  goAway(): void {
    this.session.goAway(WireError.NO_ERROR, 'the proxy is going away');
  }

  refuse(error: GateError): void {
    refuseFramed(this.socket, error, this.session);
  }

  tell(error: GateError): void {
    this.session.goAway(WireError.REFUSED_STREAM, refusalDebugData(error).toString('latin1'));
  }

  destroy(error?: GateError): void {
    this.session.destroy(error);
  }
}

function ignore(): void {}
