// The agent's end of a tunnel in gate-mux's framing (docs/tunnel-framing.md): the agent dialled,
// so it is the session's dialer; the proxy opens the streams. proxy-link.ts says why a link.
import type { TLSSocket } from 'node:tls';
import { FramedSession } from '../tunnel-framing/framed-session.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import { type GoAwayPayload, type OpenPayload, StreamKind, wireErrorName } from '../tunnel-framing/frames.js';
import { readRefusalDebugData } from './admission.js';
import { type AgentStreamOptions, serveAgentStream } from './agent-stream.js';
import { normalizeClusterView } from './cluster-view.js';
import type { LinkEvents, ProxyLink } from './proxy-link.js';

/** A cluster view's ids, as its DATA carries them: at most 1024 ids of 128 bytes and their commas. */
const MAX_VIEW_BYTES = 1024 * 129;

/**
 * Starts the framed session on `socket` and tells `events` what the proxy says. `maxStreams`: the
 * streams the proxy may hold open at once (settings.ts).
 */
export function startFramedLink(socket: TLSSocket, streams: AgentStreamOptions, events: LinkEvents, maxStreams?: number): ProxyLink {
  const session = new FramedSession(socket, {
    side: 'dialer',
    // The reset budget follows the limit as the defaults relate (1000 streams; a burst of 1000,
    // back at 33 a second, nghttp2's): a burst of the limit, back in 30 s.
    ...(maxStreams === undefined ? {} : { maxConcurrentStreams: maxStreams, resetBurst: maxStreams, resetsPerSecond: maxStreams / 30 }),
    onOpen: (stream, open) => {
      if (open.kind === StreamKind.CLUSTER_VIEW) return takeView(stream, open, events);
      if (open.kind === StreamKind.DESCRIBE) return answerDescribe(stream, events);
      events.served();
      serveAgentStream(stream, open, streams);
    },
  });
  session.on('goaway', (goAway: GoAwayPayload) => {
    events.goaway(`proxy sent GOAWAY (${wireErrorName(goAway.code)})`, readRefusalDebugData(Buffer.from(goAway.reason, 'latin1')));
  });
  session.once('close', (error) => {
    if (error) events.error(error);
  });
  // No SETTINGS to wait for: the framing's parameters are fixed, so the proxy may be asked now.
  queueMicrotask(() => events.ready());
  return session;
}

/** The cluster view: the proxy's id in the OPEN, the live ids as DATA up to its FIN. */
function takeView(stream: FramedStream, open: OpenPayload, events: LinkEvents): void {
  const chunks: Buffer[] = [];
  let bytes = 0;
  stream.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > MAX_VIEW_BYTES) {
      stream.respond({ status: 400, code: '', reason: 'a cluster view past its bound' });
      return events.view(undefined);
    }
    chunks.push(Buffer.from(chunk));
  });
  stream.once('end', () => {
    const ids = Buffer.concat(chunks).toString('latin1');
    const view = normalizeClusterView({ proxyId: open.target, proxyIds: ids === '' ? [] : ids.split(',') });
    stream.respond({ status: view ? 200 : 400, code: '', reason: view ? '' : 'a malformed cluster view' });
    stream.end();
    events.view(view);
  });
  stream.resume();
}

/** The describe request: 200 and the description's lines, the stream kept open for changes. */
function answerDescribe(stream: FramedStream, events: LinkEvents): void {
  const taken = events.describe({ write: (line) => stream.write(Buffer.from(line)), end: () => stream.end() });
  if (!taken) return stream.respond({ status: 409, code: '', reason: 'a description is being given already' });
  stream.once('close', taken.closed);
  stream.respond({ status: 200, code: '', reason: '' });
  stream.on('data', ignore);
  stream.once('end', taken.verdict);
  stream.resume();
}

function ignore(): void {}
