/**
 * `npm run fuzz [-- --inputs N --seed S]`: a long seeded fuzz run (default one million inputs)
 * over the ClientHello parser, the greeting sniffers, the PROXY header parser and the detection
 * state machine, mutating real captures. Prints throughput, max RSS and the verdict mix; exits 1
 * on any throw that is not a GateError, any broken invariant, any input over 100 ms, or an RSS
 * over 1 GiB (memory that grows with the inputs).
 */
import { fuzz } from './engine.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const value = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} needs a number`);
  return value;
}

const inputs = arg('inputs', 1_000_000);
const seed = arg('seed', 0x6a7e);
const started = Date.now();
console.log(`fuzz: ${inputs} inputs, seed ${seed}`);
const report = await fuzz({
  inputs,
  seed,
  progressEvery: 100_000,
  onProgress: (n) =>
    console.log(
      `  ${n} inputs, ${Math.round(n / ((Date.now() - started) / 1000))}/s, rss ${Math.round(process.memoryUsage().rss / 1048576)} MiB`,
    ),
});
console.log(JSON.stringify({ ...report, failures: report.failures.length }, null, 2));
for (const f of report.failures) console.log(`FAIL ${f.target} #${f.index}: ${f.error}\n  input ${f.input}`);
const tooBig = report.maxRssMiB > 1024;
if (tooBig) console.log(`FAIL max RSS ${report.maxRssMiB} MiB`);
console.log(
  `fuzz: ${report.inputs} inputs in ${report.seconds.toFixed(1)} s = ${report.inputsPerSecond}/s, max RSS ${report.maxRssMiB} MiB, slowest ${report.slowestMs} ms, ${report.failures.length} failures`,
);
process.exitCode = report.failures.length > 0 || tooBig || report.inputs !== inputs ? 1 : 0;
