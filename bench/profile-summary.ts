// Summarises a V8 .cpuprofile (node --cpu-prof): self time by function and by source file, so
// a change to the hot path can be argued from where the router's time goes.
//   node dist/bench/profile-summary.js /tmp/prof/CPU.*.cpuprofile [top]
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

interface ProfileNode {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: profile-summary <file.cpuprofile> [top]\n');
  process.exit(2);
}
const top = Number(topArg ?? 30);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);

function add(map: Map<string, number>, key: string, us: number): void {
  map.set(key, (map.get(key) ?? 0) + us);
}
const byFunction = new Map<string, number>();
const byFile = new Map<string, number>();
for (const [id, us] of selfUs) {
  const node = byId.get(id);
  if (!node) continue;
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url ? `${basename(url)}:${lineNumber + 1}` : '(native)';
  add(byFunction, `${functionName || '(anonymous)'} ${where}`, us);
  add(byFile, url ? url.replace(/^.*\/(dist|node:)/, '$1') : functionName || '(native)', us);
}
process.stdout.on('error', () => process.exit(0)); // piped into head
const show = (title: string, map: Map<string, number>): void => {
  process.stdout.write(`\n${title}\n`);
  for (const [key, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    process.stdout.write(`${((100 * us) / total).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms  ${key}\n`);
  }
};
// Inclusive time: a function's own samples plus everything it called (once per stack).
const inclusive = new Map<string, number>();
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const label = (n: ProfileNode): string =>
  `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url ? `${basename(n.callFrame.url)}:${n.callFrame.lineNumber + 1}` : '(native)'}`;
for (const [id, us] of selfUs) {
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const node = byId.get(cur);
    if (!node) break;
    const key = label(node);
    if (seen.has(key)) continue;
    seen.add(key);
    add(inclusive, key, us);
  }
}
process.stdout.write(`total sampled ${(total / 1000).toFixed(0)} ms\n`);
show('self time by function', byFunction);
show('self time by file', byFile);
inclusive.delete('(root) (native)');
inclusive.delete('(idle) (native)');
show('inclusive time by function', inclusive);
