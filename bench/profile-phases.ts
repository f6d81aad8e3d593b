// `node dist/bench/profile-phases.js <dir>`: splits the V8 CPU profiles of a tunnelled route
// (`npm run bench -- --only rate --peers gate-mux-local-tunnel,gate-mux-peered --profile <dir>`:
// every process of the path writes one, the holder and agent inherit --cpu-prof) into the phases
// of a tunnelled connection, per process: accept and detection, the route-store lookup, opening
// the HTTP/2 stream (request, answer), the agent's policy check and dial, relaying the bytes,
// teardown, and V8's garbage collector, with the rest as "other".
//
// Why profiles: callgrind counts instructions exactly (bench/instructions.ts counts each process
// of the path), but JavaScript compiled by V8 has no symbols, so it cannot tell a stream's
// opening from its relay. A V8 profile names every JavaScript frame; each sample goes to the
// phase of the innermost frame of its stack that a rule below claims (a buffer copy inside the
// relay is relay, the same copy inside the CONNECT answer is stream opening). Shares of sampled
// time, not instructions: multiply by the process's instruction count for an estimate.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const PHASES = ['accept+detection', 'route lookup', 'stream open', 'policy+dial', 'relay', 'teardown', 'gc', 'other'] as const;
type Phase = (typeof PHASES)[number];

interface ProfileNode {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string };
}
interface Profile {
  startTime: number;
  endTime: number;
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Rules on `function file` (file: the url's last part), first match wins, innermost frame first. */
const RULES: Array<[RegExp, Phase]> = [
  [/^\(garbage collector\)/, 'gc'],
  // Ending a connection: closes, destroys, the end bookkeeping (stats, the log line).
  [
    /^(destroy|_destroy|close|onStreamClose|closeStream|finishCloseStream|emitCloseNT|releaseStream|finished|closed|finish|onClose\w*|relayClosed|onSessionClose) /,
    'teardown',
  ],
  [/ (tunnel-stream|stats)\.js$/, 'teardown'],
  // The route store and the cluster dialer choosing the holder (peered route only).
  [/ (cluster-dialer|memory-route-store|redis-route-store|peer-pool)\.js$/, 'route lookup'],
  // The agent: the stream's target checked against its policy, the dial of the target.
  [/ (agent-stream|stream-target|dial|target|address-order)\.js$/, 'policy+dial'],
  [/^(internalConnect|lookupAndConnect|connect|afterConnect\w*) (net)$/, 'policy+dial'],
  // Opening a stream on a hop and answering it: the OPEN, the answer.
  [/ (registry|framed-answer|refusal-status|via-tunnel|peer-server|agent-tunnel)\.js$/, 'stream open'],
  [
    /^(request|respond|onSessionHeaders|submitRequest|onStreamTrailers|ClientHttp2Stream|ServerHttp2Stream|Http2Stream|processHeaders|mapToHeaders|prepareRequestHeadersObject|toHeaderObject) /,
    'stream open',
  ],
  // Moving bytes: the splice, the read buffers, the streams' read and write paths.
  [/ (splice|read-buffer|handle-relay|uv)\.js$/, 'relay'],
  [
    /^(onStreamRead|writeGeneric|writevGeneric|_write|_writev|write|Writable\.write|push|addChunk|readableAddChunk|Readable\.push|Readable\.read|onread|emit\w*|resume|flow|pipe) /,
    'relay',
  ],
  // Accepting the client and reading its ClientHello to route it.
  [
    / (multiplexer|detector|client-hello|greeting|client-end|route-table|connection|connection-budget|source-limit)\.js$/,
    'accept+detection',
  ],
];

function fileOf(url: string): string {
  return url.split('/').pop()?.replace(/\?.*$/, '') ?? '';
}

/** Which process of the path a profile came from, by the bench script it ran. */
function roleOf(profile: Profile): string {
  const urls = new Set(profile.nodes.map((n) => fileOf(n.callFrame.url)));
  if (urls.has('tunnel-agent.js')) return 'agent';
  if (urls.has('peer-holder.js')) return 'holder';
  if (urls.has('peered-router.js')) return 'proxy (peered-router)';
  if (urls.has('tunnel-router.js')) return 'proxy (tunnel-router)';
  if (urls.has('router.js')) return 'proxy (router)';
  return 'unknown';
}

/**
 * Shares of the samples of the last `windowMs` of the profile (the measured round: a process's
 * start, its module loading and certificate signing, are not a connection's cost), `explain`
 * printing the commonest innermost frames of one phase.
 */
export function phaseShares(profile: Profile, windowMs: number, explain?: Phase): Record<Phase, number> & { sampledMs: number } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const phaseOfNode = new Map<number, Phase>();
  const classify = (id: number): Phase => {
    const known = phaseOfNode.get(id);
    if (known) return known;
    let phase: Phase = 'other';
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const { functionName, url } = byId.get(cur)!.callFrame;
      const key = `${functionName || '(anonymous)'} ${
        url.startsWith('node:')
          ? url
              .slice(5)
              .replace(/^internal\//, '')
              .replace(/\//g, '.')
          : fileOf(url)
      }`;
      const rule = RULES.find(([re]) => re.test(key));
      if (rule) {
        phase = rule[1];
        break;
      }
    }
    phaseOfNode.set(id, phase);
    return phase;
  };
  const out = Object.fromEntries(PHASES.map((p) => [p, 0])) as Record<Phase, number>;
  let total = 0;
  const from = profile.endTime - windowMs * 1000;
  const leaves = new Map<string, number>();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    at += us;
    if (at < from) return;
    const { functionName, url } = byId.get(id)!.callFrame;
    if (functionName === '(idle)') return; // waiting in epoll: not the process's work
    const phase = classify(id);
    out[phase] += us;
    total += us;
    if (phase === explain) leaves.set(`${functionName} ${fileOf(url)}`, (leaves.get(`${functionName} ${fileOf(url)}`) ?? 0) + us);
  });
  if (explain)
    for (const [k, us] of [...leaves].sort((a, b) => b[1] - a[1]).slice(0, 25))
      process.stderr.write(`${(us / 1000).toFixed(0).padStart(6)} ms  ${k}\n`);
  for (const p of PHASES) out[p] = total > 0 ? out[p] / total : 0;
  return { ...out, sampledMs: total / 1000 };
}

function main(argv: string[]): void {
  let windowMs = 4000;
  let explain: Phase | undefined;
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--window-ms') windowMs = Number(argv[++i]);
    else if (argv[i] === '--explain') explain = argv[++i] as Phase;
    else positional.push(argv[i]!);
  }
  const [dir] = positional;
  if (!dir) {
    process.stderr.write('usage: node dist/bench/profile-phases.js <dir with .cpuprofile files> [--window-ms 4000] [--explain <phase>]\n');
    process.exit(2);
  }
  process.stdout.write(`| process | sampled ms | ${PHASES.join(' | ')} |\n|---|${' ---: |'.repeat(PHASES.length + 1)}\n`);
  for (const name of readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort()) {
    const profile = JSON.parse(readFileSync(join(dir, name), 'utf8')) as Profile;
    const shares = phaseShares(profile, windowMs, explain);
    const cells = PHASES.map((p) => `${(100 * shares[p]).toFixed(0)} %`);
    process.stdout.write(`| ${roleOf(profile)} (${name}) | ${shares.sampledMs.toFixed(0)} | ${cells.join(' | ')} |\n`);
  }
}

if (process.argv[1]?.endsWith('profile-phases.js')) main(process.argv.slice(2));
