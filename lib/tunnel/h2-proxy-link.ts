// The agent's end of a tunnel as HTTP/2: the agent is the session's server, since the proxy opens
// the streams (RFC 9113 §5.1.1: clients open them). proxy-link.ts says why a link.
import type { Http2Server, ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { ErrorCodes, GateError } from '../errors.js';
import { readRefusalDebugData } from './admission.js';
import { type AgentStreamOptions, serveAgentStream } from './agent-stream.js';
import { isClusterViewRequest, readClusterView } from './cluster-view.js';
import { h2ErrorName } from './connect-request.js';
import { DESCRIBE_RESPONSE_HEADERS, isDescribeRequest } from './describe-stream.js';
import type { LinkEvents, ProxyLink } from './proxy-link.js';
import { TUNNEL_WINDOW_BYTES } from './settings.js';

/**
 * Starts the HTTP/2 session on `socket` (through `h2`, the agent's server object, which only
 * builds sessions) and tells `events` what the proxy says.
 */
export function startHttp2Link(socket: TLSSocket, h2: Http2Server, streams: AgentStreamOptions, events: LinkEvents): ProxyLink {
  let session: ServerHttp2Session | undefined;
  const onSession = (s: ServerHttp2Session): void => {
    session = s;
  };
  // 'session' is emitted synchronously from the 'connection' handler.
  h2.once('session', onSession);
  h2.emit('connection', socket);
  h2.removeListener('session', onSession);
  if (!session) throw new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'HTTP/2 session could not start on the tunnel');
  const current = session;
  current.on('error', (err) => events.error(err));
  current.on('stream', (stream, headers) => {
    if (isClusterViewRequest(headers)) {
      stream.on('error', (err) => events.error(err));
      const view = readClusterView(headers);
      if (!stream.destroyed && !stream.headersSent) stream.respond({ ':status': view ? 204 : 400 }, { endStream: true });
      stream.resume();
      return events.view(view);
    }
    if (isDescribeRequest(headers)) return answerDescribe(stream, events);
    events.served();
    serveAgentStream(stream, headers, streams);
  });
  // A proxy that refuses the agent says why in a GOAWAY's debug data, right after the SETTINGS
  // every HTTP/2 session starts with.
  current.on('goaway', (code: number, _last: number, data?: Buffer) => {
    events.goaway(`proxy sent GOAWAY (${h2ErrorName(code)})`, readRefusalDebugData(data));
  });
  current.once('remoteSettings', () => {
    if (current.destroyed) return;
    current.setLocalWindowSize(TUNNEL_WINDOW_BYTES);
    events.ready();
  });
  return current;
}

/** The describe request: 200 and the description's lines, the stream kept open for changes. */
function answerDescribe(stream: ServerHttp2Stream, events: LinkEvents): void {
  stream.on('error', (err) => events.error(err));
  if (stream.destroyed || stream.headersSent) return;
  const respond = (): void => {
    if (!stream.headersSent && !stream.destroyed) stream.respond(DESCRIBE_RESPONSE_HEADERS, { endStream: false });
  };
  const taken = events.describe({
    write: (line) => {
      respond(); // the 200 before the first line
      if (!stream.destroyed && stream.writable) stream.write(line);
    },
    end: () => stream.end(),
  });
  if (!taken) {
    stream.close();
    return;
  }
  stream.once('close', taken.closed);
  respond();
  stream.once('end', taken.verdict);
  stream.resume();
}
