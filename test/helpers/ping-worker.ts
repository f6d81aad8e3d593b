// The ping-guard's measuring client (test/helpers/ping-guard.ts), in a worker thread of its own so
// that whatever the test's main thread does to drive an attack never delays a measurement: one
// `GET /webapi/ping` at a time, each on a fresh TCP + TLS connection, timed from connect to the
// end of the response. Posts 'sample' after each ping; on the message 'stop' posts {samples, failures}.
import { connect } from 'node:tls';
import { parentPort, workerData } from 'node:worker_threads';

export interface PingWorkerData {
  host: string;
  port: number;
  ca: string;
  servername: string;
  /** Pause between two pings (one is in flight at a time). */
  gapMs: number;
  /** A ping not answered within this is a failure (and its time counts as this). */
  giveUpMs: number;
}

export interface PingWorkerResult {
  samples: number[];
  failures: string[];
}

function ping(d: PingWorkerData): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const socket = connect({ host: d.host, port: d.port, servername: d.servername, ca: d.ca, ALPNProtocols: ['http/1.1'] });
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${d.giveUpMs} ms`));
    }, d.giveUpMs);
    socket.setEncoding('utf8');
    socket.once('secureConnect', () => socket.write(`GET /webapi/ping HTTP/1.1\r\nHost: ${d.servername}\r\nConnection: close\r\n\r\n`));
    socket.on('data', (chunk: string) => (text += chunk));
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.once('end', () => {
      clearTimeout(timer);
      socket.destroy();
      if (text.startsWith('HTTP/1.1 200') && text.includes('"server_version"')) resolve(performance.now() - started);
      else reject(new Error(`unexpected answer: ${JSON.stringify(text.slice(0, 80))}`));
    });
  });
}

const data = workerData as PingWorkerData;
const result: PingWorkerResult = { samples: [], failures: [] };
let stopping = false;
parentPort!.on('message', (message) => {
  if (message === 'stop') stopping = true;
});
while (!stopping) {
  try {
    result.samples.push(await ping(data));
  } catch (err) {
    result.failures.push((err as Error).message);
    result.samples.push(data.giveUpMs);
  }
  // Each sample is announced, so the guard knows when measuring is live and how many followed the attack.
  parentPort!.postMessage('sample');
  await new Promise((resolve) => setTimeout(resolve, data.gapMs));
}
parentPort!.postMessage(result);
