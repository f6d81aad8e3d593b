// `node dist/bench/phases.js <router> <callgrind file>... [--connections N]`: splits the
// user-space instructions of a kept `npm run bench:instructions -- --keep` run into the phases
// of a connection's life: accept, detection, routing, dial, relay, close, and, for Node, V8's
// compiler and garbage collector, with what is left over as "rest" (the event loop itself,
// timers, and anything no phase claims).
//
// How: callgrind records each function's own instructions and, per call edge, the inclusive
// instructions of the call. A few functions per router are phase roots (PHASES below: the entry
// point of each phase, by symbol, or by address where the distribution strips static symbols).
// Every other function belongs to the phases of its callers in proportion to the instructions
// each caller's calls to it cost (a malloc called from accept and from close is split between
// them by how much each call path cost); a root belongs to its own phase whoever calls it, so
// a dial started from inside a read callback counts as dial. Functions nothing calls (thread
// starts, main) are "rest". Each function's own instructions are then added to its phases.
// The split is as good as the roots: the comments below say what each one covers.
import { readFileSync } from 'node:fs';

type Phase = 'accept' | 'detection' | 'routing' | 'dial' | 'relay' | 'close' | 'compiler' | 'gc' | 'rest';
const ORDER: Phase[] = ['accept', 'detection', 'routing', 'dial', 'relay', 'close', 'compiler', 'gc', 'rest'];

/** A root: a function (regular expression on `name [object]`) and the phase it opens. */
type Root = [RegExp, Phase];

// Node routers (gate-mux, gate-mux-native). Detection, routing and the start of the dial run
// in JavaScript inside the first read callback of the client and cannot be told apart by symbol
// (V8's code has none): all of it is "detection" except the dial's C++ entry (TCPWrap::Connect).
// On the TypeScript relay the same read callback also carries the relay's reads (see BENCHMARKS.md
// for how the two are separated there).
const NODE: Root[] = [
  // V8: optimizing compiler on its worker threads, lazy/baseline compilation on the main thread.
  [
    /OptimizingCompileDispatcher::CompileTask|^v8::internal::Compiler::|Runtime_CompileLazy|Runtime_CompileOptimized|Runtime_InstallBaselineCode|BaselineBatchCompiler|Runtime_CompileBaseline|v8::internal::maglev::/,
    'compiler',
  ],
  // V8's other worker-thread tasks are the concurrent GC (marking, sweeping, scavenging jobs).
  [/^node::\(anonymous namespace\)::PlatformWorkerThread/, 'gc'],
  [
    /^v8::internal::Heap::(CollectGarbage|PerformGarbageCollection|StartIncrementalMarking|FinalizeIncrementalMarking)|^v8::internal::IncrementalMarking::|^v8::internal::ScavengerCollector::|^v8::internal::MarkCompactCollector::|^v8::internal::MemoryReducer::/,
    'gc',
  ],
  // libuv's accept callback: accept4, the TCPWrap, the JavaScript onconnection (the connection
  // object, limits, read start for detection).
  [/^uv__server_io /, 'accept'],
  // Reads on the main thread: detection (peek, ClientHello parse, route match). On the native
  // relay no relay read runs in JavaScript, so this is detection + routing there.
  [/^uv__read /, 'detection'],
  // The dial: the connect request (TCPWrap::Connect → socket(), connect()), its completion callback;
  // on the native relay the addon's dial (socket(), connect(), the hand-over) and the relay
  // thread's check of the finished connect (when the compiler kept it a function of its own).
  [
    /^node::TCPWrap::Connect\b|^uv__stream_connect |^node::MakeLibuvRequestCallback<uv_connect_s|Addon::Dial\b|Engine::Dial\b|Engine::Connected\b/,
    'dial',
  ],
  // The relay once it runs: the handover to the native side (adopt duplicates the descriptors),
  // and on the TypeScript relay its writes and their completions.
  [
    /Addon::Adopt\b|^node::StreamBase::(WriteBuffer|Writev|Write)\b|^node::StreamBase::JSMethod<&node::StreamBase::(WriteBuffer|Writev)|^uv__write_callbacks /,
    'relay',
  ],
  // The native relay thread moves bytes; its Finish (closing both sockets, the end report) is close.
  [/Engine::Run\b|Engine::Pump\b/, 'relay'],
  [/Engine::Finish\b/, 'close'],
  // Shutdown (half-close), handle close and their callbacks, and the native end report's delivery
  // to JavaScript (the thread-safe function's call into onNativeEnd: stats, logs, bookkeeping).
  [
    /^uv_shutdown |^uv__drain |^node::HandleWrap::(Close|OnClose)\b|^uv__run_closing_handles |ThreadSafeFunction|^v8impl::.*ThreadSafeFunction|napi_call_threadsafe_function|Engine::Deliver\b/,
    'close',
  ],
];

// nginx 1.22 (Debian's stream module, its static functions stripped): the named entries, and
// three static functions named by what they call (callgrind_annotate --tree=calling).
const NGINX: Root[] = [
  // accept4, the connection, ngx_stream_init_connection (pool, addresses as text).
  [/^ngx_event_accept /, 'accept'],
  // ssl_preread: reading and parsing the ClientHello.
  [/^ngx_stream_core_preread_phase /, 'detection'],
  // The routing decision: the map of "$ssl_preread_server_name|$ssl_preread_alpn_protocols" (a regex).
  [/^ngx_stream_complex_value /, 'routing'],
  // The proxy content handler (upstream setup and connect), and 0x15110, the connect handler
  // (init_upstream: TCP_NODELAY, buffers, the peeked bytes sent).
  [/^ngx_stream_core_content_phase |^ngx_event_connect_peer |^0x0000000000015110 \[.*ngx_stream_module/, 'dial'],
  // 0x13580: the proxy's read/write event handler (ngx_unix_recv, the write filter, sendfile_chain).
  [/^0x0000000000013580 \[.*ngx_stream_module/, 'relay'],
  [/^ngx_stream_finalize_session |^ngx_close_connection /, 'close'],
];

// HAProxy 2.6 (Debian): tcp-request inspect + req.ssl_* fetches, use_backend rules.
const HAPROXY: Root[] = [
  [/^listener_accept |^sock_accept_iocb |^session_accept_fd |^conn_complete_session |^stream_new /, 'accept'],
  // The inspect analyser and the fetches that parse the ClientHello (SNI, ALPN, hello type).
  [/^tcp_inspect_request |^smp_fetch_ssl_hello|^smp_fetch_req_ssl/, 'detection'],
  // Rule evaluation (use_backend ... if { req.ssl_sni ... } { req.ssl_alpn ... }).
  [/^acl_exec_cond /, 'routing'],
  [/^back_try_conn_req |^back_handle_st_req |^back_handle_st_con |^connect_server |^tcp_connect_server |^srv_redispatch_connect /, 'dial'],
  // The stream connector's I/O: receive and send on both sides.
  [/^sc_conn_io_cb |^sock_conn_iocb |^sc_conn_sync_recv |^sc_conn_sync_send |^raw_sock_/, 'relay'],
  [/^stream_free |^sc_destroy |^conn_free |^fd_delete |^sock_conn_ctrl_close /, 'close'],
];

const ROUTERS: Record<string, Root[]> = { node: NODE, nginx: NGINX, haproxy: HAPROXY };

interface Graph {
  self: Map<string, number>;
  /** callee → caller → inclusive instructions of those calls */
  callers: Map<string, Map<string, number>>;
  total: number;
}

/** Reads a callgrind output file (name compression, call edges; only the first event, Ir). */
function parseCallgrind(text: string, graph: Graph): void {
  const names = { fn: new Map<string, string>(), ob: new Map<string, string>() };
  const resolve = (kind: 'fn' | 'ob', value: string): string => {
    const m = /^\((\d+)\)(?: (.*))?$/.exec(value);
    if (!m) return value;
    if (m[2] !== undefined) names[kind].set(m[1]!, m[2]);
    return names[kind].get(m[1]!) ?? value;
  };
  let ob = '';
  let cob = '';
  let fn = '';
  let cfn = '';
  let callCost = false;
  const key = (name: string, object: string): string => `${name} [${object}]`;
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const c = line.charCodeAt(0);
    if ((c >= 48 && c <= 57) || c === 43 || c === 45 || c === 42) {
      // A cost line: position, then Ir.
      const parts = line.split(' ');
      const ir = Number(parts[1] ?? 0);
      if (callCost) {
        callCost = false;
        const callee = key(cfn, cob);
        let byCaller = graph.callers.get(callee);
        if (!byCaller) graph.callers.set(callee, (byCaller = new Map()));
        byCaller.set(fn, (byCaller.get(fn) ?? 0) + ir);
        cob = ob; // cob= is written only when the callee's object differs from the caller's
      } else {
        graph.self.set(fn, (graph.self.get(fn) ?? 0) + ir);
        graph.total += ir;
      }
      continue;
    }
    const eq = line.indexOf('=');
    if (eq < 0) continue;
    const field = line.slice(0, eq);
    const value = line.slice(eq + 1);
    if (field === 'ob') ob = resolve('ob', value);
    else if (field === 'cob') cob = resolve('ob', value);
    else if (field === 'fn') {
      fn = key(resolve('fn', value), ob);
      cob = ob;
    } else if (field === 'cfn') cfn = resolve('fn', value);
    else if (field === 'calls') callCost = true;
  }
}

/** Each function's share of each phase (roots: their own; others: their callers', weighted). */
function phaseShares(graph: Graph, roots: Root[]): Map<string, Float64Array> {
  const rootPhase = new Map<string, number>();
  const functions = new Set<string>([...graph.self.keys(), ...graph.callers.keys()]);
  for (const f of functions) {
    const bare = f.replace(/'\d+ \[/, ' ['); // recursion levels (callgrind's name'2) are the same function
    const root = roots.find(([re]) => re.test(bare));
    if (root) rootPhase.set(f, ORDER.indexOf(root[1]));
  }
  const unit = (i: number): Float64Array => {
    const v = new Float64Array(ORDER.length);
    v[i] = 1;
    return v;
  };
  const rest = ORDER.indexOf('rest');
  // Roots and functions nothing calls start known; the others start unknown (zero), so that a
  // recursive cycle cannot keep a made-up share alive.
  const shares = new Map<string, Float64Array>();
  for (const f of functions) {
    const own = rootPhase.get(f);
    shares.set(f, own !== undefined ? unit(own) : !graph.callers.has(f) ? unit(rest) : new Float64Array(ORDER.length));
  }
  // Visit callers before callees (breadth first from the functions nothing calls), updating in
  // place, so one sweep carries a phase down a whole call chain; recursion makes cycles, so
  // sweep again until nothing moves (bounded).
  const callees = new Map<string, string[]>();
  for (const [callee, byCaller] of graph.callers) {
    for (const caller of byCaller.keys()) {
      let list = callees.get(caller);
      if (!list) callees.set(caller, (list = []));
      list.push(callee);
    }
  }
  const order: string[] = [];
  const seen = new Set<string>();
  const queue = [...functions].filter((f) => !graph.callers.has(f));
  for (const f of queue) seen.add(f);
  for (let i = 0; i < queue.length; i++) {
    order.push(queue[i]!);
    for (const callee of callees.get(queue[i]!) ?? []) {
      if (seen.has(callee)) continue;
      seen.add(callee);
      queue.push(callee);
    }
  }
  for (const f of functions) if (!seen.has(f)) order.push(f);
  for (let sweep = 0; sweep < 200; sweep++) {
    let moved = 0;
    for (const f of order) {
      const byCaller = graph.callers.get(f);
      if (rootPhase.has(f) || !byCaller) continue;
      const v = new Float64Array(ORDER.length);
      let sum = 0;
      for (const [caller, cost] of byCaller) {
        const s = shares.get(caller);
        // A function's phase comes from its callers, not from itself; unknown callers wait.
        if (!s || cost <= 0 || caller === f || s.every((x) => x === 0)) continue;
        for (let i = 0; i < v.length; i++) v[i]! += s[i]! * cost;
        sum += cost;
      }
      if (sum > 0) for (let i = 0; i < v.length; i++) v[i]! /= sum;
      const old = shares.get(f)!;
      for (let i = 0; i < v.length; i++) moved = Math.max(moved, Math.abs(v[i]! - old[i]!));
      shares.set(f, v);
    }
    if (moved < 1e-6) break;
  }
  for (const v of shares.values()) if (v.every((x) => x === 0)) v[rest] = 1;
  return shares;
}

/** The functions whose own instructions weigh most in `phase` (to check the roots). */
function topOf(graph: Graph, shares: Map<string, Float64Array>, phase: Phase, count: number): Array<[string, number]> {
  const i = ORDER.indexOf(phase);
  return [...graph.self]
    .map(([f, self]): [string, number] => [f, self * shares.get(f)![i]!])
    .sort((a, b) => b[1] - a[1])
    .slice(0, count);
}

export function phaseInstructions(files: string[], router: string, explain?: Phase): Record<Phase, number> & { total: number } {
  const roots = ROUTERS[router];
  if (!roots) throw new Error(`router kind must be one of ${Object.keys(ROUTERS).join(', ')}`);
  const graph: Graph = { self: new Map(), callers: new Map(), total: 0 };
  for (const file of files) parseCallgrind(readFileSync(file, 'utf8'), graph);
  const shares = phaseShares(graph, roots);
  if (explain)
    for (const [f, n] of topOf(graph, shares, explain, 40)) process.stderr.write(`${Math.round(n).toString().padStart(12)}  ${f}\n`);
  const out = Object.fromEntries(ORDER.map((p) => [p, 0])) as Record<Phase, number>;
  for (const [f, self] of graph.self) {
    const s = shares.get(f)!;
    ORDER.forEach((p, i) => {
      out[p] += self * s[i]!;
    });
  }
  return { ...out, total: graph.total };
}

function main(argv: string[]): void {
  let connections = 300;
  let explain: Phase | undefined;
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--connections') connections = Number(argv[++i]);
    else if (argv[i] === '--explain') explain = argv[++i] as Phase;
    else positional.push(argv[i]!);
  }
  const [router, ...files] = positional;
  if (!router || files.length === 0) {
    process.stderr.write(
      'usage: node dist/bench/phases.js node|nginx|haproxy <callgrind file>... [--connections 300] [--explain <phase>]\n',
    );
    process.exit(2);
  }
  const result = phaseInstructions(files, router, explain);
  const k = (n: number): string => `${(n / connections / 1000).toFixed(1)}k`;
  process.stdout.write(`| ${ORDER.join(' | ')} | total |\n|${' ---: |'.repeat(ORDER.length + 1)}\n`);
  process.stdout.write(`| ${ORDER.map((p) => k(result[p])).join(' | ')} | ${k(result.total)} |\n`);
}

if (process.argv[1]?.endsWith('phases.js')) main(process.argv.slice(2));
