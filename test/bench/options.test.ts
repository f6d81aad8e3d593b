// `npm run bench`'s command line: the names BENCHMARKS.md's commands use keep working (including
// a node flag given as the value of --node-args), and a mistake is an error that names it.
import t from 'tap';
import { resolve } from 'node:path';
import { benchConfig, parseBenchOptions, WORKLOADS, type BenchOptions } from '../../bench/options.js';
import { comparePeers } from '../../bench/peers.js';

function parse(...argv: string[]): BenchOptions {
  const options = parseBenchOptions(argv);
  if (options === 'help') throw new Error('unexpected help');
  return options;
}

t.test('no options: every workload, full sizes, warm-up on', async (t) => {
  const options = parse();
  t.same([...options.only], [...WORKLOADS]);
  t.same(options, { ...options, quick: false, keep: false, warmup: true, rounds: undefined, peers: undefined, compare: [], nodeArgs: [] });
  t.equal(benchConfig(options).rounds, 3);
  t.equal(benchConfig(options).bulkBytes, 2 ** 30);
});

t.test("BENCHMARKS.md's commands", async (t) => {
  const quick = parse('--quick', '--only', 'bulk,rate', '--peers', 'gate-mux,nginx', '--rounds', '5');
  t.same([...quick.only], ['bulk', 'rate']);
  t.same(quick.peers, ['gate-mux', 'nginx']);
  t.equal(quick.rounds, 5);
  t.equal(benchConfig(quick).rounds, 5, '--rounds overrides the quick default');
  t.equal(benchConfig(quick).idleCount, 500, '--quick: the smoke sizes');
  t.same(parse('--compare', '/tmp/a/dist/bench/router.js,/tmp/b/dist/bench/router.js').compare, [
    '/tmp/a/dist/bench/router.js',
    '/tmp/b/dist/bench/router.js',
  ]);
  t.same(parse('--compare', 'dist/bench/router.js').compare, [resolve('dist/bench/router.js')], 'a relative build is resolved');
  t.same(parse('--ref-node-args', '--max-semi-space-size=1').refNodeArgs, ['--max-semi-space-size=1'], 'a flag as the value');
  t.same(parse('--node-args', '--max-semi-space-size=2 --trace-gc', '--node-args=--expose-gc').nodeArgs, [
    '--max-semi-space-size=2',
    '--trace-gc',
    '--expose-gc',
  ]);
  t.equal(parse('--profile', 'prof').profile, resolve('prof'));
  t.equal(parse('--no-warmup').warmup, false);
  t.equal(benchConfig(parse('--no-warmup')).rateWarmupMs, 0);
  t.equal(parse('--rounds', '99').rounds, 20, 'rounds are capped');
  t.equal(parse('--rounds=0').rounds, 1, 'and at least one');
  t.equal(parseBenchOptions(['--help']), 'help');
  t.equal(parseBenchOptions(['-h']), 'help');
});

t.test('a mistake names what is wrong', async (t) => {
  t.throws(() => parse('--bogus'), { code: 'ERR_PARSE_ARGS_UNKNOWN_OPTION', message: /'--bogus'/ });
  t.throws(() => parse('--only', 'bulk,nope'), { message: 'unknown workload nope (bulk, rate, idle, parser, workers, tunnel)' });
  t.throws(() => parse('--rounds'), { code: 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE', message: /--rounds/ });
  t.throws(() => parse('--quick', '--node-args'), { code: 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE', message: /--node-args/ });
  t.throws(() => parse('stray'), { code: 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL' });
});

t.test('--compare: the peers a saved build adds, named after what it is', async (t) => {
  const names = comparePeers([
    '/tmp/a/dist/bench/router.js',
    '/tmp/b/dist/bench/tunnel-router.js',
    '/tmp/c/dist/bench/peered-router.js',
  ]).map((p) => p.name);
  t.same(names, ['gate-mux-ref', 'gate-mux-tunnel-ref2', 'gate-mux-local-tunnel-ref3', 'gate-mux-peered-ref3']);
});
