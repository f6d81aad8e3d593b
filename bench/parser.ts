// Parser workload, run pinned to the router core: ClientHellos per second through the pure parser
// (parseClientHello) and through the whole detection step a connection takes (Detector: greeting
// sniff + parse). Each loop is bounded by DURATION_MS. Prints one JSON line.
import { performance } from 'node:perf_hooks';
import { parseClientHello } from 'gate-mux';
import { Detector } from '../lib/mux/detector.js';
import { benchHellos } from './hellos.js';

const durationMs = Number(process.env.DURATION_MS ?? 1000);

function perSecond(fn: () => void): number {
  // Warm up so the JIT has compiled the path being measured.
  for (let i = 0; i < 2000; i++) fn();
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < durationMs) {
    for (let i = 0; i < 500; i++) fn();
    n += 500;
    now = performance.now();
  }
  return n / ((now - start) / 1000);
}

const results = [];
for (const hello of benchHellos()) {
  const parsed = parseClientHello(hello.bytes);
  if (parsed.status !== 'done' || parsed.hello.sni !== 'bench.local') throw new Error(`bench hello ${hello.name} did not parse`);
  const detected = new Detector({ maxHelloBytes: 16384, proxyHeader: 'refused' }).feed(hello.bytes);
  if (detected.status !== 'done') throw new Error(`bench hello ${hello.name} was not detected`);
  const bytes = hello.bytes;
  const parses = perSecond(() => {
    parseClientHello(bytes);
  });
  const detects = perSecond(() => {
    new Detector({ maxHelloBytes: 16384, proxyHeader: 'refused' }).feed(bytes);
  });
  // A post-quantum hello often arrives in two TCP segments: the detector holds and joins them.
  const half = bytes.length >> 1;
  const first = bytes.subarray(0, half);
  const second = bytes.subarray(half);
  const detectsSplit = perSecond(() => {
    const d = new Detector({ maxHelloBytes: 16384, proxyHeader: 'refused' });
    d.feed(first);
    d.feed(second);
  });
  results.push({
    name: hello.name,
    bytes: bytes.length,
    records: hello.records,
    parsesPerSecond: parses,
    detectsPerSecond: detects,
    detectsTwoSegmentsPerSecond: detectsSplit,
  });
}
process.stdout.write(`${JSON.stringify(results)}\n`);
