// bench/lean-mux.ts, the framing the floors weigh against HTTP/2: its figures mean something only
// if it carries what a tunnel must. Over a loopback TCP connection: bytes past a stream's credit
// wait for the credit to come back and arrive whole and in order, a stream closes once both ways
// ended, streams do not mix, and what arrives before a stream is read (its FIN too) is held.
import t, { type Test } from 'tap';
import { createServer, connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { LeanMux, type LeanStream } from '../../bench/lean-mux.js';
import { listening } from '../helpers/net.js';

async function pair(t: Test, onOpen: (mux: LeanMux, stream: LeanStream, target: string) => void): Promise<LeanMux> {
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect(port, '127.0.0.1');
  const [socket] = await accepted;
  const answerer: LeanMux = new LeanMux(socket, (stream, target) => onOpen(answerer, stream, target));
  t.teardown(() => {
    client.destroy();
    socket.destroy();
    server.close();
  });
  return new LeanMux(client);
}

function collect(stream: LeanStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(Buffer.from(chunk)));
  return once(stream, 'end').then(() => Buffer.concat(chunks));
}

t.test('past its credit a stream queues, and every byte arrives in order, both ways', async (t) => {
  const big = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7) % 251;
  const targets: string[] = [];
  const opener = await pair(t, (mux, stream, target) => {
    targets.push(target);
    mux.answer(stream, true);
    // An echo: what comes in goes back, and the FIN after it.
    stream.on('data', (chunk: Buffer) => stream.write(Buffer.from(chunk)));
    stream.once('end', () => stream.end());
  });
  const stream = opener.open('db.internal:5432');
  const [status] = (await once(stream, 'response')) as [number];
  const echoed = collect(stream);
  const closed = once(stream, 'close');
  t.equal(stream.write(big), false, 'a write past the credit is queued');
  stream.end();
  t.same(await echoed, big, '1 MiB echoed whole and in order');
  await closed;
  t.equal(status, 200);
  t.same(targets, ['db.internal:5432']);
});

t.test('streams are apart: one half-closed, the other still carrying bytes', async (t) => {
  const opener = await pair(t, (mux, stream) => {
    mux.answer(stream, true);
    let got = '';
    stream.on('data', (chunk: Buffer) => (got += chunk.toString()));
    // Answers each stream with what it got once its FIN came, then its own FIN.
    stream.once('end', () => {
      stream.write(Buffer.from(`got ${got}`));
      stream.end();
    });
  });
  const a = opener.open('a:1');
  const b = opener.open('b:2');
  const fromA = collect(a);
  const fromB = collect(b);
  a.write(Buffer.from('alpha'));
  a.end();
  t.equal((await fromA).toString(), 'got alpha', 'the first stream ended on its own');
  b.write(Buffer.from('beta'));
  b.write(Buffer.from('!'));
  b.end();
  t.equal((await fromB).toString(), 'got beta!', 'the second stream carried on after it');
});

t.test('what arrives before the stream is read, its FIN included, is held until it is', async (t) => {
  const opener = await pair(t, (mux, stream) => {
    // As an agent: nothing is read until the target is dialled.
    setTimeout(() => {
      mux.answer(stream, true);
      collect(stream).then((got) => {
        stream.write(Buffer.from(`got ${got.toString()}`));
        stream.end();
      });
    }, 30);
  });
  const stream = opener.open('db.internal:5432');
  const answer = collect(stream);
  stream.write(Buffer.from('hello '));
  stream.write(Buffer.from('early'));
  stream.end();
  t.equal((await answer).toString(), 'got hello early');
});
