// A fleet joining, then renewing, all at once against a real `gate-mux proxy` given one core
// (`taskset -c 1`: its event loop and its thread pool): joins and renewals per second, the
// proxy's CPU per request, and the delay of `GET /webapi/ping` on fresh TLS connections during
// each storm (timed from a worker thread, as the ping guard of the tests does).
//
//   npm run build && taskset -c 0 node dist/bench/join-storm.js [agents=500] [in-flight=50] [rsa|mixed]
//
// GATE_MUX_CLI=/path/to/other/dist/lib/cli/gate-mux.js runs another build's proxy (A/B; an older
// build reads RSA requests only: pass `rsa`).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { sampleProcess } from './proc.js';
import { freePort, spawnPinned, stopChild, waitForPort } from './spawn.js';
import { joinStorm, renewStorm, stormAgents, type StormOutcome } from '../test/helpers/join-storm.js';
import type { PingWorkerData, PingWorkerResult } from '../test/helpers/ping-worker.js';

const agentsCount = Number(process.argv[2] ?? 500);
const inFlight = Number(process.argv[3] ?? 50);
const keyTypes = process.argv[4] === 'rsa' ? 'rsa' : 'mixed';
const distDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cli = process.env.GATE_MUX_CLI ?? join(distDir, 'lib/cli/gate-mux.js');

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function pinged<T>(target: PingWorkerData, run: () => Promise<T>): Promise<{ result: T; pings: PingWorkerResult }> {
  const worker = new Worker(new URL('../test/helpers/ping-worker.js', import.meta.url), { workerData: target });
  let samples = 0;
  const results = new Promise<PingWorkerResult>((resolveResult) =>
    worker.on('message', (m: 'sample' | PingWorkerResult) => (m === 'sample' ? samples++ : resolveResult(m))),
  );
  while (samples === 0) await sleep(5);
  const result = await run();
  worker.postMessage('stop');
  const pings = await results;
  await worker.terminate();
  return { result, pings };
}

const dir = mkdtempSync(join(tmpdir(), 'gate-join-storm-'));
const port = await freePort();
const dataDir = join(dir, 'data');
const configFile = join(dir, 'gate.yaml');
writeFileSync(
  configFile,
  ['version: v3', `data_dir: ${JSON.stringify(dataDir)}`, 'proxy_service:', `  web_listen_addr: 127.0.0.1:${port}`, ''].join('\n'),
);
const proxy = spawnPinned(process.execPath, [cli, 'proxy', '--config', configFile, '--log-level', 'warn'], {
  cpus: '1',
  log: join(dir, 'proxy.log'),
});
try {
  await waitForPort(port, proxy);
  await sleep(500);
  const ca = readFileSync(join(dataDir, 'ca.pem'), 'utf8');
  const token = readFileSync(join(dataDir, 'join-token'), 'utf8').trim();
  const target = { host: '127.0.0.1', port, ca };
  const pingTarget: PingWorkerData = { ...target, servername: 'localhost', gapMs: 10, giveUpMs: 10_000 };
  // Warm-up: the first requests compile the paths (unmeasured).
  await joinStorm(target, token, stormAgents(50, 'warm', keyTypes), 10);
  const agents = stormAgents(agentsCount, 'storm', keyTypes);
  const report = async (label: string, run: () => Promise<StormOutcome[]>): Promise<void> => {
    const cpuBefore = sampleProcess(proxy.pid!).cpuSeconds;
    const started = performance.now();
    const { result, pings } = await pinged(pingTarget, run);
    const seconds = (performance.now() - started) / 1000;
    const cpu = sampleProcess(proxy.pid!).cpuSeconds - cpuBefore;
    const served = result.filter((o) => o.answer.status === 200).length;
    const ms = result.map((o) => o.ms);
    console.log(
      `| ${label} | ${served}/${result.length} | ${(result.length / seconds).toFixed(0)} | ${((cpu * 1000) / result.length).toFixed(2)} | ${(result.length / cpu).toFixed(0)} | ` +
        `${percentile(ms, 50).toFixed(0)} / ${percentile(ms, 99).toFixed(0)} | ${pings.samples.length} | ${percentile(pings.samples, 50).toFixed(0)} / ${percentile(pings.samples, 99).toFixed(0)} / ${Math.max(...pings.samples).toFixed(0)} | ${pings.failures.length} |`,
    );
  };
  console.log(
    `node ${process.version}; proxy ${cli}; ${agentsCount} agents (${keyTypes} keys), ${inFlight} in flight from one source; proxy pinned to CPU 1\n`,
  );
  console.log(
    '| storm | served | per s (wall) | proxy CPU ms each | per CPU-second | request ms p50 / p99 | pings | ping ms p50 / p99 / max | ping failures |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  await report('join', () => joinStorm(target, token, agents, inFlight));
  await report('renew', () => renewStorm(target, agents, inFlight));
} finally {
  await stopChild(proxy);
  rmSync(dir, { recursive: true, force: true });
}
