// The tunnel against the direct route: both routers end the client's TLS; the upstream sends
// `tunnelBytes` in cleartext, to the proxy directly (terminate + forward) or through the agent's
// tunnel (also behind the connection upgrade). The proxy process and the agent process (the
// router's child, pinned to the client core as the far side of a network would be) are measured
// apart. Then, per round, the stream setup on a quiet tunnel and the new-connection setup direct
// and through the upgrade.
import { join } from 'node:path';
import { GATE_MUX_NODE_FLAGS } from '../peers.js';
import { sample, sampleProcess } from '../proc.js';
import { type BenchSession, type Measurement, peerContext, rotate, runLoad, startUpstreams, withPeer } from '../session.js';
import { JsonLines, spawnPinned, stopChild } from '../spawn.js';
import { fmt } from '../stats.js';

export const TUNNEL_PEER = 'gate-mux-tunnel';
export const TERMINATE_PEER = 'gate-mux-terminate';
export const UPGRADED_PEER = 'gate-mux-tunnel-upgraded';

export async function tunnel(s: BenchSession): Promise<void> {
  const { config } = s;
  const routers = s.runnable.filter((p) => p.upstreams === 'cleartext');
  if (routers.length === 0) return;
  const up = await startUpstreams(s, 'bulk', { BULK_BYTES: String(config.tunnelBytes), PLAIN: '1' });
  const env = { TLS_KEY: s.cert.key, TLS_CERT: s.cert.cert, ...(s.clientCpus ? { AGENT_CPUS: s.clientCpus } : {}) };
  try {
    for (let round = 1; round <= config.rounds; round++) {
      for (const peer of rotate(routers, round - 1)) {
        await withPeer(s, 'tunnel', round, peer, peerContext(s, up, { env }), async (running, m) => {
          const pid = running.pid!;
          const [before, proxyBefore] = [sample(pid), sampleProcess(pid)];
          const load = await runLoad<{ bytes: number; mbPerSecond: number; complete: boolean; misrouted: number }>(
            s,
            'bulk',
            running.port,
            { BULK_BYTES: String(config.tunnelBytes), CONNS: '1' },
            180_000,
          );
          const [after, proxyAfter] = [sample(pid), sampleProcess(pid)];
          m.load = load;
          if (!load.complete) throw new Error(`transfer incomplete (${load.bytes} bytes)`);
          Object.assign(m, { before, after });
          const gb = load.bytes / 1e9;
          const proxyCpu = proxyAfter.cpuSeconds - proxyBefore.cpuSeconds;
          m.cpuSeconds = after.cpuSeconds - before.cpuSeconds;
          m.derived.mbPerSecond = load.mbPerSecond;
          m.derived.proxyCpuSecondsPerGB = proxyCpu / gb;
          m.derived.proxySystemSecondsPerGB = (proxyAfter.systemSeconds - proxyBefore.systemSeconds) / gb;
          m.derived.agentCpuSecondsPerGB = (m.cpuSeconds - proxyCpu) / gb;
          m.derived.agentSystemSecondsPerGB =
            (after.systemSeconds - before.systemSeconds - (proxyAfter.systemSeconds - proxyBefore.systemSeconds)) / gb;
          s.log(
            `tunnel r${round} ${peer.name}: ${fmt(load.mbPerSecond)} MB/s, proxy ${fmt(m.derived.proxyCpuSecondsPerGB, 2)} CPU s/GB` +
              `${peer.name.startsWith(TUNNEL_PEER) ? `, agent ${fmt(m.derived.agentCpuSecondsPerGB, 2)}` : ''}`,
          );
        });
      }
      if (routers.some((p) => p.name === TUNNEL_PEER)) await streamSetup(s, round, up.portA);
      if (routers.some((p) => p.name === UPGRADED_PEER)) await upgradeSetup(s, round);
    }
  } finally {
    await up.stop();
  }
}

/** A setup measurement (bench/tunnel-setup.ts or bench/upgrade-setup.ts): one child on the router core, its JSON answer. */
async function setupRun<T>(
  s: BenchSession,
  m: Measurement,
  script: string,
  env: Record<string, string>,
  timeoutMs: number,
  what: string,
): Promise<T | undefined> {
  s.measurements.push(m);
  const log = join(s.dir, `${script}.log`);
  const child = spawnPinned(
    process.execPath,
    [...GATE_MUX_NODE_FLAGS, ...(s.profiling.nodeArgs ?? []), join(s.distDir, 'bench', `${script}.js`)],
    {
      cpus: s.routerCpus,
      env,
      log,
      stdout: 'pipe',
    },
  );
  try {
    const result = await new JsonLines(child).next<T>(timeoutMs);
    m.load = result as Record<string, unknown>;
    return result;
  } catch (err) {
    m.error = `${what}: ${(err as Error).message} (see ${log})`;
    s.log(m.error);
    return undefined;
  } finally {
    await stopChild(child);
  }
}

async function streamSetup(s: BenchSession, round: number, targetPort: number): Promise<void> {
  const m: Measurement = { workload: 'tunnel', round, peer: TUNNEL_PEER, variant: 'setup', derived: {} };
  const env = {
    TARGET: `127.0.0.1:${targetPort}`,
    COUNT: String(s.config.tunnelSetupCount),
    WARMUP: String(s.config.tunnelSetupWarmup),
    ...(s.clientCpus ? { AGENT_CPUS: s.clientCpus } : {}),
  };
  const result = await setupRun<{ count: number; p50Ms: number; p99Ms: number }>(s, m, 'tunnel-setup', env, 120_000, 'stream setup');
  if (!result) return;
  m.derived.setupP50Ms = result.p50Ms;
  m.derived.setupP99Ms = result.p99Ms;
  s.log(`tunnel r${round} stream setup: p50 ${fmt(result.p50Ms, 2)} ms, p99 ${fmt(result.p99Ms, 2)} ms (${result.count} streams)`);
}

/** New-connection setup (dial, TLS, one echoed byte) direct and through the connection upgrade (bench/upgrade-setup.ts). */
async function upgradeSetup(s: BenchSession, round: number): Promise<void> {
  const m: Measurement = { workload: 'tunnel', round, peer: UPGRADED_PEER, variant: 'setup', derived: {} };
  type Way = { p50Ms: number; p99Ms: number; cpuMsPerConn: number };
  const env = { COUNT: String(s.config.tunnelSetupCount), WARMUP: String(s.config.tunnelSetupWarmup) };
  const result = await setupRun<{ count: number; direct: Way; upgraded: Way }>(s, m, 'upgrade-setup', env, 180_000, 'upgrade setup');
  if (!result) return;
  for (const way of ['direct', 'upgraded'] as const) {
    m.derived[`${way}SetupP50Ms`] = result[way].p50Ms;
    m.derived[`${way}SetupP99Ms`] = result[way].p99Ms;
    m.derived[`${way}SetupCpuMs`] = result[way].cpuMsPerConn;
  }
  s.log(
    `tunnel r${round} connection setup: direct p50 ${fmt(result.direct.p50Ms, 2)} ms (${fmt(result.direct.cpuMsPerConn, 2)} CPU ms), ` +
      `upgraded p50 ${fmt(result.upgraded.p50Ms, 2)} ms (${fmt(result.upgraded.cpuMsPerConn, 2)} CPU ms)`,
  );
}
