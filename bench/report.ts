// The report of a bench run: the markdown tables (each workload's medians side by side, with the
// aims the tunnel and the upgrade are held to), an SVG chart per workload (bench/charts.ts), and
// the files under bench/results/ (<stamp> and latest: .json, .md, -<workload>.svg).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { chartSvg, type ChartPanel } from './charts.js';
import type { Workload } from './options.js';
import type { Peer } from './peers.js';
import type { BenchSession, Measurement, ParserRow } from './session.js';
import { fmt, markdownTable, median, ratio } from './stats.js';
import { runsIdle } from './workloads/idle.js';
import { TERMINATE_PEER, TUNNEL_PEER, UPGRADED_PEER } from './workloads/tunnel.js';
import { workerVariants } from './workloads/workers.js';

/** Live heap per idle connection may grow this much over the reference before the report says so. */
const IDLE_HEAP_TOLERANCE = 1.1;

interface IdleReference {
  commit: string;
  date: string;
  command: string;
  what: string;
  routers: Record<string, { rssKiBPerConnection?: number; heapKiBPerConnection?: number; baseRssMiB?: number }>;
}

/** The idle figures recorded at a known commit (bench/reference.json), or undefined without one. */
function idleReference(s: BenchSession): IdleReference | undefined {
  try {
    return (JSON.parse(readFileSync(join(s.repoDir, 'bench', 'reference.json'), 'utf8')) as { idle?: IdleReference }).idle;
  } catch {
    return undefined;
  }
}

function medianOf(
  s: BenchSession,
  workload: Workload,
  peer: string,
  key: string,
  filter: (m: Measurement) => boolean = () => true,
): number | undefined {
  const values = s.measurements
    .filter((m) => m.workload === workload && m.peer === peer && !m.error && filter(m))
    .map((m) => m.derived[key]);
  const defined = values.filter((v): v is number => v !== undefined);
  return defined.length ? median(defined) : undefined;
}

function rowsFor(
  s: BenchSession,
  workload: Workload,
  cells: (peer: Peer) => string[],
  include: (p: Peer) => boolean = () => true,
): string[][] {
  const kind = (p: Peer): boolean => (workload === 'tunnel') === (p.upstreams === 'cleartext');
  return s.peers
    .filter((p) => kind(p) && include(p))
    .map((p) => {
      if (p.missing)
        return [
          p.name,
          `not run: ${p.missing}`,
          ...cells(p)
            .slice(1)
            .map(() => ''),
        ];
      const failed = s.measurements.filter((m) => m.workload === workload && m.peer === p.name && m.error);
      const ok = s.measurements.some((m) => m.workload === workload && m.peer === p.name && !m.error);
      if (!ok && failed.length)
        return [
          p.name,
          `failed: ${failed[0]!.error}`,
          ...cells(p)
            .slice(1)
            .map(() => ''),
        ];
      return [p.name, ...cells(p)];
    });
}

function tunnelReport(s: BenchSession, out: string[]): void {
  out.push(
    '',
    `## Tunnelled path: the client's TLS ends at the proxy, upstream sends ${fmt(s.config.tunnelBytes / 2 ** 20)} MiB in cleartext`,
    '',
  );
  const bulkOnly = (m: Measurement): boolean => m.variant !== 'setup';
  const pick = (peer: string, key: string): number | undefined => medianOf(s, 'tunnel', peer, key, bulkOnly);
  const base = { mb: pick(TERMINATE_PEER, 'mbPerSecond'), cpu: pick(TERMINATE_PEER, 'proxyCpuSecondsPerGB') };
  out.push(
    markdownTable(
      ['route', 'MB/s', '× forward', 'proxy CPU s/GB', '× forward', 'proxy sys s/GB', 'agent CPU s/GB'],
      rowsFor(s, 'tunnel', (p) => {
        const mb = pick(p.name, 'mbPerSecond');
        const cpu = pick(p.name, 'proxyCpuSecondsPerGB');
        const agent = p.name.startsWith(TUNNEL_PEER)
          ? `${fmt(pick(p.name, 'agentCpuSecondsPerGB'), 2)} (sys ${fmt(pick(p.name, 'agentSystemSecondsPerGB'), 2)})`
          : '—';
        return [fmt(mb), ratio(mb, base.mb), fmt(cpu, 2), ratio(cpu, base.cpu), fmt(pick(p.name, 'proxySystemSecondsPerGB'), 2), agent];
      }),
    ),
  );
  out.push(
    '',
    '`gate-mux-terminate`: terminate + forward to the upstream. `gate-mux-tunnel`: terminate, then one stream in the reverse tunnel an agent process holds (mutual TLS; the tunnel framing, or HTTP/2 for an older build); the agent runs on the client core, the proxy alone on the router core.',
  );
  const setup = (key: string): number | undefined => medianOf(s, 'tunnel', TUNNEL_PEER, key, (m) => m.variant === 'setup');
  const p50 = setup('setupP50Ms');
  if (p50 !== undefined) {
    out.push(
      '',
      `Stream setup over the established tunnel (CONNECT -> 200, ${s.config.tunnelSetupCount} new streams one after another on a quiet tunnel, after ${s.config.tunnelSetupWarmup} unmeasured; median of rounds): p50 ${fmt(p50, 2)} ms, p99 ${fmt(setup('setupP99Ms'), 2)} ms.`,
    );
  }
  const mb = pick(TUNNEL_PEER, 'mbPerSecond');
  const cpu = pick(TUNNEL_PEER, 'proxyCpuSecondsPerGB');
  if (mb !== undefined && cpu !== undefined && base.mb !== undefined && base.cpu !== undefined) {
    const verdict = (ok: boolean): string => (ok ? 'met' : 'not met');
    out.push(
      '',
      `Aims: proxy CPU per GB within 1.5× of forward: ${ratio(cpu, base.cpu)}, ${verdict(cpu <= 1.5 * base.cpu)}; MB/s at least 0.8× forward: ${ratio(mb, base.mb)}, ${verdict(mb >= 0.8 * base.mb)}.`,
    );
  }
  upgradeReport(s, out, pick);
}

/** The connection upgrade against the direct tunnel (its aims), and new-connection setup both ways. */
function upgradeReport(s: BenchSession, out: string[], pick: (peer: string, key: string) => number | undefined): void {
  const [mb, mbUp] = [pick(TUNNEL_PEER, 'mbPerSecond'), pick(UPGRADED_PEER, 'mbPerSecond')];
  const both = (peer: string): number | undefined => {
    const [proxy, agent] = [pick(peer, 'proxyCpuSecondsPerGB'), pick(peer, 'agentCpuSecondsPerGB')];
    return proxy === undefined || agent === undefined ? undefined : proxy + agent;
  };
  const [cpu, cpuUp] = [both(TUNNEL_PEER), both(UPGRADED_PEER)];
  if (mb !== undefined && mbUp !== undefined && cpu !== undefined && cpuUp !== undefined) {
    const verdict = (ok: boolean): string => (ok ? 'met' : 'not met');
    out.push(
      '',
      `\`${UPGRADED_PEER}\`: the same tunnel with the agent behind the connection upgrade (TLS to the listener, WebSocket binary messages, the tunnel's TLS inside). ` +
        `Aims against \`${TUNNEL_PEER}\`: MB/s at least 0.7×: ${ratio(mbUp, mb)}, ${verdict(mbUp >= 0.7 * mb)}; proxy + agent CPU per GB (${fmt(cpuUp, 2)} against ${fmt(cpu, 2)} s/GB) within 1.5×: ${ratio(cpuUp, cpu)}, ${verdict(cpuUp <= 1.5 * cpu)}.`,
    );
  }
  const setup = (key: string): number | undefined => medianOf(s, 'tunnel', UPGRADED_PEER, key, (m) => m.variant === 'setup');
  const [direct, upgraded] = [setup('directSetupP50Ms'), setup('upgradedSetupP50Ms')];
  if (direct !== undefined && upgraded !== undefined) {
    out.push(
      '',
      `New-connection setup (dialTls with a client certificate, then one echoed byte; client and proxy in one process; ${s.config.tunnelSetupCount} one after another; median of rounds): ` +
        `direct p50 ${fmt(direct, 2)} ms, p99 ${fmt(setup('directSetupP99Ms'), 2)} ms, ${fmt(setup('directSetupCpuMs'), 2)} CPU ms; ` +
        `through the upgrade p50 ${fmt(upgraded, 2)} ms, p99 ${fmt(setup('upgradedSetupP99Ms'), 2)} ms, ${fmt(setup('upgradedSetupCpuMs'), 2)} CPU ms.`,
    );
  }
}

function report(s: BenchSession, startedAt: Date, seconds: number): string {
  const out: string[] = [];
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  out.push(`# gate-mux benchmark`);
  out.push('');
  out.push(`- Date: ${startedAt.toISOString()}, ${fmt(seconds)} s`);
  out.push(`- Machine: ${cpus().length} × ${cpu}, ${fmt(totalmem() / 2 ** 30, 1)} GiB RAM, Linux ${release()}, Node ${process.version}`);
  out.push(
    `- Peers: ${s.peers.map((p) => `${p.name}${p.version ? ` (${p.version})` : ''}${p.missing ? ` — ${p.missing}` : ''}`).join(', ')}`,
  );
  out.push(`- Command: \`npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}\``);
  out.push(
    `- Layout: ${s.twoCores ? 'router pinned to CPU 1 (`taskset -c 1`), clients and upstreams to CPU 0' : 'one core: nothing pinned'}; ` +
      `every router runs one worker; peers interleaved round by round; medians of ${s.config.rounds} rounds (idle: ${s.config.idleRounds}).`,
  );
  out.push(`- Router CPU = utime+stime of the router's process tree from /proc/<pid>/stat; RSS = VmRSS; fds = /proc/<pid>/fd.`);
  const direct = (key: string, w: Workload): number | undefined => medianOf(s, w, 'direct', key);
  const nginx = (key: string, w: Workload): number | undefined => medianOf(s, w, 'nginx', key);
  if (s.checks.size) {
    out.push('');
    out.push(
      `**Routing check failures** (same rule for every peer; measured anyway): ${[...s.checks].map(([p, why]) => `${p}: ${why}`).join('; ')}`,
    );
  }

  if (s.options.only.has('bulk')) {
    out.push('', `## Bulk: one TLS connection through the router, upstream sends ${fmt(s.config.bulkBytes / 2 ** 20)} MiB`, '');
    out.push(
      markdownTable(
        ['router', 'MB/s', '× direct', 'router CPU s/GB', 'CPU × nginx', 'router RSS MiB'],
        rowsFor(s, 'bulk', (p) => {
          const mb = medianOf(s, 'bulk', p.name, 'mbPerSecond');
          const cpuGb = medianOf(s, 'bulk', p.name, 'cpuSecondsPerGB');
          return [
            fmt(mb),
            ratio(mb, direct('mbPerSecond', 'bulk')),
            fmt(cpuGb, 2),
            ratio(cpuGb, nginx('cpuSecondsPerGB', 'bulk')),
            fmt(medianOf(s, 'bulk', p.name, 'rssMiB'), 1),
          ];
        }),
      ),
    );
  }
  if (s.options.only.has('rate')) {
    out.push(
      '',
      `## Connection rate: ${s.config.rateConcurrency} concurrent clients, full TLS 1.3 handshake (ECDSA P-256), 1 KiB response, close; ${fmt(s.config.rateMs / 1000, 1)} s per round${s.config.rateWarmupMs > 0 ? ` after ${fmt(s.config.rateWarmupMs / 1000, 1)} s unmeasured warm-up` : ', no warm-up'}`,
      '',
    );
    out.push(
      markdownTable(
        ['router', 'conn/s', '× direct', 'TTFB p50 ms', 'TTFB p99 ms', 'router CPU µs/conn', 'CPU × nginx'],
        rowsFor(s, 'rate', (p) => {
          const cps = medianOf(s, 'rate', p.name, 'perSecond');
          const us = medianOf(s, 'rate', p.name, 'cpuMicrosPerConnection');
          return [
            fmt(cps),
            ratio(cps, direct('perSecond', 'rate')),
            fmt(medianOf(s, 'rate', p.name, 'ttfbP50Ms'), 2),
            fmt(medianOf(s, 'rate', p.name, 'ttfbP99Ms'), 2),
            fmt(us),
            ratio(us, nginx('cpuMicrosPerConnection', 'rate')),
          ];
        }),
      ),
    );
    if (s.peers.some((p) => p.name === 'gate-mux-peered')) {
      out.push(
        '',
        "`gate-mux-local-tunnel` and `gate-mux-peered`: upstream A behind an agent's tunnel, the client's TLS passed through; the tunnel is held by the router itself, or by another proxy: per connection a route-store lookup (in memory), a stream in the peering session, and one in the tunnel; the CPU is every process of the path. `gate-mux-peered` minus `gate-mux-local-tunnel` is the peering hop.",
      );
    }
  }
  if (s.options.only.has('idle')) {
    out.push('', `## Idle: ${fmt(s.config.idleCount)} established TLS connections held open, then closed`, '');
    const ref = idleReference(s);
    const refCell = (p: Peer, key: 'rssKiBPerConnection' | 'heapKiBPerConnection', digits: number): string => {
      const value = ref?.routers[p.name]?.[key];
      return value === undefined ? '—' : fmt(value, digits);
    };
    out.push(
      markdownTable(
        [
          'router',
          'RSS KiB/conn',
          `at ${ref ? ref.commit : 'the reference'}`,
          'live heap KiB/conn',
          `at ${ref ? ref.commit : 'the reference'}`,
          'base RSS MiB',
          'fds/conn',
          'RSS returned after close',
          'within s',
          'fds left after close',
        ],
        rowsFor(
          s,
          'idle',
          (p) => [
            fmt(medianOf(s, 'idle', p.name, 'rssKiBPerConnection'), 1),
            refCell(p, 'rssKiBPerConnection', 1),
            fmt(medianOf(s, 'idle', p.name, 'heapKiBPerConnection'), 2),
            refCell(p, 'heapKiBPerConnection', 2),
            fmt(medianOf(s, 'idle', p.name, 'baseRssMiB'), 1),
            fmt(medianOf(s, 'idle', p.name, 'fdsPerConnection'), 2),
            `${fmt(medianOf(s, 'idle', p.name, 'rssReturnedPct'))} %`,
            fmt(medianOf(s, 'idle', p.name, 'returnSeconds'), 1),
            fmt(medianOf(s, 'idle', p.name, 'fdsLeftAfterClose')),
          ],
          runsIdle,
        ),
      ),
    );
    if (ref) {
      out.push(
        '',
        `Reference: ${ref.what}, measured on ${ref.commit} (${ref.date}): \`${ref.command}\`. Live heap = the V8 heap after a full GC (bench/heap-probe.ts), the figure that repeats between runs; RSS moves with when V8 last collected.`,
      );
      for (const p of s.peers) {
        const now = medianOf(s, 'idle', p.name, 'heapKiBPerConnection');
        const then = ref.routers[p.name]?.heapKiBPerConnection;
        if (now !== undefined && then !== undefined && now > then * IDLE_HEAP_TOLERANCE + 0.05) {
          const line = `**${p.name} holds more per idle connection than at ${ref.commit}: ${fmt(now, 2)} against ${fmt(then, 2)} KiB of live heap.**`;
          out.push('', line);
          s.log(line.replace(/\*/g, ''));
        }
      }
    }
  }
  if (s.options.only.has('parser')) {
    out.push('', `## Parser: ClientHellos per second on one core (median of ${s.parser.runs.length} rounds)`, '');
    if (s.parser.error) out.push(`failed: ${s.parser.error}`);
    else {
      const names = s.parser.runs[0]?.map((r) => r.name) ?? [];
      const rows = names.map((name) => {
        const pick = (key: keyof ParserRow): number => median(s.parser.runs.map((run) => Number(run.find((r) => r.name === name)?.[key])));
        const first = s.parser.runs[0]!.find((r) => r.name === name)!;
        return [
          name,
          fmt(first.bytes),
          fmt(first.records),
          fmt(pick('parsesPerSecond')),
          fmt(pick('detectsPerSecond')),
          fmt(pick('detectsTwoSegmentsPerSecond')),
        ];
      });
      out.push(
        markdownTable(['hello', 'bytes', 'records', 'parseClientHello/s', 'Detector/s (one read)', 'Detector/s (two TCP segments)'], rows),
      );
    }
  }
  if (s.options.only.has('workers')) {
    out.push('', `## Workers: gate-mux on all cores (node:cluster), router and clients unpinned`, '');
    const variants = workerVariants(s);
    const pick = (variant: string, kind: number, key: string): number | undefined =>
      medianOf(s, 'workers', 'gate-mux', key, (m) => m.variant === variant && m.derived.kind === kind);
    out.push(
      markdownTable(
        [
          'workers',
          `bulk MB/s (2 connections × ${fmt(s.config.workersBulkBytes / 2 ** 20)} MiB)`,
          'router CPU s/GB',
          'conn/s (64 clients)',
          'router CPU µs/conn',
        ],
        variants.map((v) => [
          v.variant,
          fmt(pick(v.variant, 0, 'mbPerSecond')),
          fmt(pick(v.variant, 0, 'cpuSecondsPerGB'), 2),
          fmt(pick(v.variant, 1, 'perSecond')),
          fmt(pick(v.variant, 1, 'cpuMicrosPerConnection')),
        ]),
      ),
    );
    out.push(
      '',
      'On a 2-core machine the clients and upstreams compete with the workers for the same cores, so this shows the scaling trend, not a limit.',
    );
  }
  if (s.options.only.has('tunnel') && s.peers.some((p) => p.upstreams === 'cleartext')) tunnelReport(s, out);
  const errors = s.measurements.filter((m) => m.error);
  if (errors.length) {
    out.push(
      '',
      `## Errors`,
      '',
      ...errors.map((m) => `- ${m.workload} r${m.round} ${m.peer}${m.variant ? ` ${m.variant}` : ''}: ${m.error}`),
    );
  }
  return `${out.join('\n')}\n`;
}

/** An SVG chart per workload that ran (bench/charts.ts): the figures of its table, one bar per router. */
function charts(s: BenchSession, startedAt: Date): Array<[Workload, string]> {
  const subtitle = `${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, Node ${process.version}; medians (npm run bench)`;
  const panel = (
    workload: Workload,
    title: string,
    key: string,
    better: ChartPanel['better'],
    digits: number,
    filter?: (m: Measurement) => boolean,
  ): ChartPanel => ({
    title,
    better,
    digits,
    bars: s.peers
      .filter((p) => !p.missing && (workload === 'tunnel') === (p.upstreams === 'cleartext'))
      .map((p): [string, number | undefined] => [p.name, medianOf(s, workload, p.name, key, filter)]),
  });
  const out: Array<[Workload, string]> = [];
  const add = (workload: Workload, title: string, panels: ChartPanel[], note = ''): void => {
    if (s.options.only.has(workload) && s.measurements.some((m) => m.workload === workload && !m.error))
      out.push([workload, chartSvg(title, `${subtitle}${note}`, panels)]);
  };
  add('bulk', 'Bulk: one TLS connection, upstream to client', [
    panel('bulk', 'MB/s', 'mbPerSecond', 'higher', 0),
    panel('bulk', 'router CPU s per GB', 'cpuSecondsPerGB', 'lower', 2),
  ]);
  add(
    'rate',
    `Connection rate: ${s.config.rateConcurrency} clients, full TLS handshakes`,
    [
      panel('rate', 'router CPU µs per connection', 'cpuMicrosPerConnection', 'lower', 0),
      panel('rate', 'connections per second', 'perSecond', 'higher', 0),
      panel('rate', 'time to first byte p50, ms', 'ttfbP50Ms', 'lower', 1),
    ],
    '; tunnelled routes: CPU of every process of the path',
  );
  add('idle', `Idle: ${fmt(s.config.idleCount)} TLS connections held open`, [
    panel('idle', 'RSS KiB per connection', 'rssKiBPerConnection', 'lower', 1),
    panel('idle', 'live heap KiB per connection (after a full GC)', 'heapKiBPerConnection', 'lower', 2),
  ]);
  const bulkOnly = (m: Measurement): boolean => m.variant !== 'setup';
  add('tunnel', "Tunnelled path: the client's TLS ends at the proxy", [
    panel('tunnel', 'MB/s', 'mbPerSecond', 'higher', 0, bulkOnly),
    panel('tunnel', 'proxy CPU s per GB', 'proxyCpuSecondsPerGB', 'lower', 2, bulkOnly),
  ]);
  return out;
}

/** Writes the run's JSON, markdown and charts under bench/results/ as <stamp>.* and latest.*, and the markdown to stdout. */
export function writeResults(s: BenchSession, startedAt: Date, seconds: number): void {
  const markdown = report(s, startedAt, seconds);
  const resultsDir = join(s.repoDir, 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
  const json = JSON.stringify(
    {
      startedAt: startedAt.toISOString(),
      seconds,
      argv: process.argv.slice(2),
      config: s.config,
      machine: { cpus: cpus().length, model: cpus()[0]?.model, totalMemBytes: totalmem(), kernel: release(), node: process.version },
      peers: s.peers.map((p) => ({ name: p.name, version: p.version, missing: p.missing })),
      routingCheckFailures: Object.fromEntries(s.checks),
      parser: { runs: s.parser.runs, error: s.parser.error },
      measurements: s.measurements,
    },
    null,
    2,
  );
  const svgs = charts(s, startedAt);
  for (const name of [stamp, 'latest']) {
    writeFileSync(join(resultsDir, `${name}.json`), json);
    writeFileSync(join(resultsDir, `${name}.md`), markdown);
    for (const [workload, svg] of svgs) writeFileSync(join(resultsDir, `${name}-${workload}.svg`), svg);
  }
  process.stdout.write(markdown);
  s.log(
    `wrote ${join(resultsDir, `${stamp}.{json,md}`)}${svgs.length ? ` and ${svgs.map(([w]) => `${stamp}-${w}.svg`).join(', ')}` : ''} in ${fmt(seconds)} s`,
  );
}
