// The routers the bench compares, each started fresh for a measurement with the same routing rule
// (SNI bench.local + ALPN gate-bench -> A, anything else -> B) and one worker: gate-mux, the plain
// Node peek+pipe baseline, HAProxy and nginx stream (when installed), and "direct" (no router).
import { existsSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { findBinary } from '../test/helpers/peers.js';
import { freePort, spawnPinned, stopChild, waitForPort } from './spawn.js';

export interface PeerContext {
  dir: string;
  distDir: string;
  upstreamA: number;
  upstreamB: number;
  /** taskset list for the router, undefined for unpinned. */
  cpus: string | undefined;
  /** Extra environment for the gate-mux router (WORKERS, CLUSTER_SCHEDULING). */
  env?: Record<string, string>;
  /** Extra node flags for the gate-mux router (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /** A command the router runs under (valgrind and its options), and how long it may take to listen. */
  wrap?: { command: string[]; startTimeoutMs: number };
}

export interface RunningPeer {
  port: number;
  /** Root of the router's process tree; undefined for direct. */
  pid: number | undefined;
  stop(): Promise<void>;
}

export interface Peer {
  name: string;
  /** Why it cannot run here (e.g. "not installed: apt-get install haproxy"), or undefined. */
  missing: string | undefined;
  version: string | undefined;
  /**
   * 'cleartext': the router ends the client's TLS and needs cleartext upstreams, and TLS_KEY /
   * TLS_CERT in `ctx.env`; it runs in the tunnel workload only. Otherwise the client's TLS passes
   * through to TLS upstreams.
   */
  upstreams?: 'cleartext';
  start(ctx: PeerContext): Promise<RunningPeer>;
}

let serial = 0;

/**
 * Node flags of the gate-mux bench routers. V8's young generation grows to 16 MiB semi-spaces
 * under a connection burst and stays there; capped at 2 MiB, 5,000 idle connections cost 8.4
 * instead of 12.2 KiB each, and after they close the memory comes back (94 % within ~15 s,
 * against none within 20 s), with no measurable CPU cost on bulk or rate (BENCHMARKS.md).
 */
export const GATE_MUX_NODE_FLAGS = ['--max-semi-space-size=2'];

async function startProcess(
  name: string,
  ctx: PeerContext,
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<RunningPeer> {
  const port = Number(env.LISTEN_PORT) || (await freePort());
  const [cmd, argv] = ctx.wrap ? [ctx.wrap.command[0]!, [...ctx.wrap.command.slice(1), command, ...args]] : [command, args];
  const child: ChildProcess = spawnPinned(cmd, argv, {
    cpus: ctx.cpus,
    env: { ...env, LISTEN_PORT: String(port) },
    log: join(ctx.dir, `${name}.log`),
  });
  try {
    await waitForPort(port, child, ctx.wrap?.startTimeoutMs);
  } catch (err) {
    await stopChild(child);
    throw new Error(`${name} did not start (see ${join(ctx.dir, `${name}.log`)}): ${(err as Error).message}`);
  }
  return { port, pid: child.pid, stop: () => stopChild(child) };
}

function nodePeer(
  name: string,
  script: string,
  withEnv: boolean,
  scriptPath?: string,
  nodeArgs?: string[],
  extraEnv: Record<string, string> = {},
): Peer {
  return {
    name,
    ...(extraEnv.TERMINATE === '1' ? { upstreams: 'cleartext' as const } : {}),
    missing: undefined,
    version: process.version,
    start: async (ctx) => {
      const port = await freePort();
      const env: Record<string, string> = {
        LISTEN_PORT: String(port),
        UPSTREAM_A_PORT: String(ctx.upstreamA),
        UPSTREAM_B_PORT: String(ctx.upstreamB),
        ...(withEnv ? ctx.env : {}),
        ...extraEnv,
      };
      const args = withEnv ? (nodeArgs ?? [...GATE_MUX_NODE_FLAGS, ...(ctx.nodeArgs ?? [])]) : [];
      return startProcess(name, ctx, process.execPath, [...args, scriptPath ?? join(ctx.distDir, 'bench', script)], env);
    },
  };
}

function firstLine(command: string, args: string[]): string | undefined {
  try {
    const out = execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return out.split('\n')[0]?.trim();
  } catch (err) {
    // nginx -v prints to stderr
    const stderr = (err as { stderr?: string }).stderr;
    return stderr?.split('\n')[0]?.trim();
  }
}

function haproxyPeer(): Peer {
  const binary = findBinary('haproxy');
  return {
    name: 'haproxy',
    missing: binary ? undefined : 'not installed: apt-get install haproxy',
    version: binary ? firstLine(binary, ['-v'])?.replace(/ - https.*/, '') : undefined,
    start: async (ctx) => {
      const port = await freePort();
      const cfg = join(ctx.dir, `haproxy-${++serial}.cfg`);
      writeFileSync(
        cfg,
        `global
  nbthread 1
  maxconn 8000
defaults
  mode tcp
  timeout connect 5s
  timeout client 300s
  timeout server 300s
frontend bench
  bind 127.0.0.1:${port}
  # Wait for the ClientHello, then route on it (ssl_preread's counterpart).
  tcp-request inspect-delay 5s
  tcp-request content accept if { req.ssl_hello_type 1 }
  use_backend a if { req.ssl_sni -i bench.local } { req.ssl_alpn gate-bench }
  default_backend b
backend a
  server a 127.0.0.1:${ctx.upstreamA}
backend b
  server b 127.0.0.1:${ctx.upstreamB}
`,
      );
      return startProcess('haproxy', ctx, binary!, ['-db', '-f', cfg], { LISTEN_PORT: String(port) });
    },
  };
}

const NGINX_STREAM_MODULE = '/usr/lib/nginx/modules/ngx_stream_module.so';

function nginxPeer(): Peer {
  const binary = findBinary('nginx');
  const missing = !binary
    ? 'not installed: apt-get install nginx libnginx-mod-stream'
    : !existsSync(NGINX_STREAM_MODULE)
      ? 'stream module missing: apt-get install libnginx-mod-stream'
      : undefined;
  return {
    name: 'nginx',
    missing,
    version: binary ? firstLine(binary, ['-v'])?.replace(/^nginx version: /, '') : undefined,
    start: async (ctx) => {
      const port = await freePort();
      const id = ++serial;
      const conf = join(ctx.dir, `nginx-${id}.conf`);
      writeFileSync(
        conf,
        `load_module ${NGINX_STREAM_MODULE};
worker_processes 1;
${ctx.wrap ? 'master_process off; # one process under valgrind (bench/instructions.ts)' : ''}
worker_rlimit_nofile 19000;
pid ${join(ctx.dir, `nginx-${id}.pid`)};
error_log ${join(ctx.dir, 'nginx-error.log')} warn;
events { worker_connections 12000; }
stream {
  # ALPN list is comma-separated: gate-bench anywhere in it, with SNI bench.local.
  map "$ssl_preread_server_name|$ssl_preread_alpn_protocols" $bench_upstream {
    "~*^bench\\.local\\|(.*,)?gate-bench(,.*)?$" a;
    default b;
  }
  upstream a { server 127.0.0.1:${ctx.upstreamA}; }
  upstream b { server 127.0.0.1:${ctx.upstreamB}; }
  server {
    listen 127.0.0.1:${port} backlog=4096;
    ssl_preread on;
    proxy_pass $bench_upstream;
    proxy_timeout 300s;
  }
}
`,
      );
      return startProcess('nginx', ctx, binary!, ['-g', 'daemon off;', '-c', conf, '-p', ctx.dir, '-e', join(ctx.dir, 'nginx-error.log')], {
        LISTEN_PORT: String(port),
      });
    },
  };
}

const directPeer: Peer = {
  name: 'direct',
  missing: undefined,
  version: undefined,
  start: async (ctx) => ({ port: ctx.upstreamA, pid: undefined, stop: async () => {} }),
};

/**
 * Every peer in report order. `compare` adds other builds of the bench router (saved
 * dist/bench/router.js files) as peers "gate-mux-ref", "gate-mux-ref2", ..., to A/B changes within
 * one run (a saved dist/bench/tunnel-router.js: "gate-mux-tunnel-ref", in the tunnel workload; a
 * saved dist/bench/peered-router.js: "gate-mux-local-tunnel-ref" and "gate-mux-peered-ref"); `refNodeArgs` (when given) are their node flags instead of the gate-mux peer's
 * (GATE_MUX_NODE_FLAGS plus --node-args).
 */
export function allPeers(compare: string[] = [], refNodeArgs?: string[]): Peer[] {
  const [gateMux, localTunnel, peered] = centralPathPeers();
  return [
    directPeer,
    // The same router, relaying forwarded connections in TypeScript on bare handles, and in the
    // native addon (native/relay.cc) after the routing decision.
    gateMux!,
    nodePeer('gate-mux-native', 'router.js', true, undefined, undefined, { GATE_MUX_NATIVE_RELAY: '1', GATE_MUX_NATIVE_SPLICE: '0' }),
    // The native relay moving bytes with splice(2) through a pipe instead of recv/send.
    nodePeer('gate-mux-native-splice', 'router.js', true, undefined, undefined, {
      GATE_MUX_NATIVE_RELAY: '1',
      GATE_MUX_NATIVE_SPLICE: '1',
    }),
    // The tunnel's cost: the client's TLS ends at the proxy, then the cleartext goes to
    // upstream A directly (terminate + forward) or through an agent's reverse tunnel (proxy + agent).
    nodePeer('gate-mux-terminate', 'router.js', true, undefined, undefined, { TERMINATE: '1', GATE_MUX_NATIVE_RELAY: '0' }),
    nodePeer('gate-mux-tunnel', 'tunnel-router.js', true, undefined, undefined, { TERMINATE: '1' }),
    // The same tunnel through the connection upgrade (the agent behind a load balancer that ends
    // TLS): the tunnel's TLS inside WebSocket binary messages inside TLS to the listener.
    nodePeer('gate-mux-tunnel-upgraded', 'tunnel-router.js', true, undefined, undefined, { TERMINATE: '1', TUNNEL_UPGRADE: '1' }),
    localTunnel!,
    peered!,
    ...comparePeers(compare, refNodeArgs),
    nodePeer('node-baseline', 'baseline-router.js', false),
    haproxyPeer(),
    nginxPeer(),
  ];
}

/**
 * The platform's main path on gate-mux, the client's TLS passed through: forwarded by the router
 * (relaying in TypeScript on bare handles), and with upstream A behind an agent's tunnel held by
 * the router itself (local: router + agent) or by another proxy it reaches over peering (peered:
 * router + holder + agent). The rate workload's central path, and bench:tunnel-floor's gate-mux rows.
 */
export function centralPathPeers(): Peer[] {
  return [
    nodePeer('gate-mux', 'router.js', true, undefined, undefined, { GATE_MUX_NATIVE_RELAY: '0' }),
    nodePeer('gate-mux-local-tunnel', 'peered-router.js', true, undefined, undefined, { LOCAL_TUNNEL: '1' }),
    nodePeer('gate-mux-peered', 'peered-router.js', true),
  ];
}

/**
 * The peers `--compare` adds: a saved dist/bench/router.js is "gate-mux-ref" ("gate-mux-ref2", ...
 * for the next), a tunnel-router.js "gate-mux-tunnel-ref", a peered-router.js both of its
 * tunnelled routes. Building them runs nothing, unlike allPeers (which asks haproxy and nginx
 * their versions).
 */
export function comparePeers(compare: string[], refNodeArgs?: string[]): Peer[] {
  return compare.flatMap((path, i) => {
    const n = i === 0 ? '' : i + 1;
    // A saved tunnel-router.js is compared in the tunnel workload (as gate-mux-tunnel-ref...).
    if (path.endsWith('tunnel-router.js'))
      return [nodePeer(`gate-mux-tunnel-ref${n}`, 'tunnel-router.js', true, path, refNodeArgs, { TERMINATE: '1' })];
    // A saved peered-router.js gives both tunnelled routes of that build (its holder and agent
    // are started from its own dist/).
    if (path.endsWith('peered-router.js'))
      return [
        nodePeer(`gate-mux-local-tunnel-ref${n}`, 'peered-router.js', true, path, refNodeArgs, { LOCAL_TUNNEL: '1' }),
        nodePeer(`gate-mux-peered-ref${n}`, 'peered-router.js', true, path, refNodeArgs),
      ];
    return [nodePeer(`gate-mux-ref${n}`, 'router.js', true, path, refNodeArgs)];
  });
}
