// Prints every failed assertion of a TAP log, with the chain of subtests it sits in and its YAML
// diagnostics, so that a failure deep in a long run is readable in the last lines CI shows.
// Usage: node .ci/tap-failures.mjs LOG
import { readFileSync } from 'node:fs';

const lines = readFileSync(process.argv[2], 'utf8').split('\n');
const subtests = []; // subtests[depth] = name of the open subtest at that indentation
let failures = 0;
for (let i = 0; i < lines.length; i++) {
  const line = lines[i];
  const indent = line.length - line.trimStart().length;
  const depth = indent / 4;
  const subtest = /^\s*# Subtest: (.*)$/.exec(line);
  if (subtest) {
    subtests[depth] = subtest[1];
    subtests.length = depth + 1;
    continue;
  }
  if (!/^\s*not ok \d+/.test(line)) continue;
  // A failed subtest repeats as "not ok" at each level up to its file; all are printed, since a
  // file that crashed or timed out has no failed assertion of its own to show.
  failures++;
  console.log(`\n${subtests.slice(0, depth).join(' > ')}\n${line.trim()}`);
  if (lines[i + 1]?.trim() === '---') {
    for (let j = i + 1, shown = 0; j < lines.length && shown < 40; j++, shown++) {
      console.log(lines[j]);
      if (lines[j].trim() === '...') break;
    }
  }
}
console.log(`\ntap-failures: ${failures} failed (assertions, subtests and files)`);
