import t from 'tap';
import { connect as http2Connect, createServer as createH2Server, type ServerHttp2Session } from 'node:http2';
import { once } from 'node:events';
import type { TLSSocket } from 'node:tls';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom, terminate } from '../../lib/handlers/builders.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';

// The TLSSocket `terminate` builds by hand around the peeked client must be usable by
// http2 directly. tls.Server clears `secureConnecting` after the handshake; a hand-built socket
// kept it true, and an Http2Session given such a socket waits for 'secureConnect' (a client-side
// event) for ever: it never read. The tunnel worked around it with a JS stream per byte.
const { ca, server } = devCertificates();
const h2 = createH2Server();
h2.on('stream', (stream, headers) => {
  stream.respond({ ':status': 200 });
  stream.end(`hello ${String(headers[':path'])}`);
});
const seen: Array<{ secureConnecting: boolean }> = [];
const sessions = new Set<ServerHttp2Session>();
h2.on('session', (session) => {
  sessions.add(session);
  session.once('close', () => sessions.delete(session));
});
const mux = new Multiplexer({
  routes: [
    {
      name: 'h2',
      match: { alpn: 'h2' },
      handler: terminate(
        { ...server, alpnProtocols: ['h2'] },
        custom((socket) => {
          seen.push({ secureConnecting: (socket as TLSSocket & { secureConnecting: boolean }).secureConnecting });
          h2.emit('connection', socket);
        }),
      ),
    },
  ],
});
const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });
t.teardown(async () => {
  for (const session of sessions) session.destroy();
  await mux.close({ graceMs: 0 });
});

t.test('an HTTP/2 session runs on the terminated socket itself', async (t) => {
  const client = http2Connect(`https://localhost:${port}`, { ca: ca.cert });
  t.teardown(() => client.close());
  for (const path of ['/one', '/two']) {
    const request = client.request({ ':path': path });
    request.setEncoding('utf8');
    let body = '';
    request.on('data', (chunk: string) => (body += chunk));
    const timer = setTimeout(() => request.destroy(new Error('no answer within 5 s')), 5000);
    await once(request, 'end');
    clearTimeout(timer);
    t.equal(body, `hello ${path}`, `answered ${path} through the session on the handed-over socket`);
  }
  t.same(seen, [{ secureConnecting: false }], 'the handler got a socket whose handshake is marked done');
});
