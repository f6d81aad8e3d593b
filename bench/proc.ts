// Reads a process tree's CPU time, resident memory and open descriptors from /proc (Linux only).
// A peer is measured as its whole tree (nginx master + worker, cluster primary + workers), and
// every thread counts: /proc/<pid>/stat's utime+stime already sums the process's threads.
import { readFileSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

let ticksPerSecond: number | undefined;

/** Clock ticks per second for /proc/<pid>/stat times (`getconf CLK_TCK`, 100 on Linux/x86). */
export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined; // the process went away between listing and reading
  }
}

/** Fields of /proc/<pid>/stat after the `(comm)` field, which may itself contain spaces. */
function statFields(pid: number): string[] | undefined {
  const text = read(`/proc/${pid}/stat`);
  if (!text) return undefined;
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/** Direct and indirect children of `pid`, found by scanning every process's parent id. */
export function descendants(pid: number): number[] {
  const byParent = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    const child = Number(name);
    if (!Number.isInteger(child)) continue;
    const fields = statFields(child);
    const parent = Number(fields?.[1]); // stat field 4 (ppid), index 1 after the comm field
    if (!Number.isInteger(parent)) continue;
    let list = byParent.get(parent);
    if (!list) byParent.set(parent, (list = []));
    list.push(child);
  }
  const out: number[] = [];
  const queue = [pid];
  for (let i = 0; i < queue.length && i < 10_000; i++) {
    for (const child of byParent.get(queue[i]!) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

export interface ProcSample {
  /** utime + stime of the tree, in seconds. */
  cpuSeconds: number;
  /** The stime part: the kernel's share (on loopback it includes TCP delivery to the peer). */
  systemSeconds: number;
  /** VmRSS of the tree, KiB. */
  rssKiB: number;
  /** Open file descriptors of the tree. */
  fds: number;
  pids: number[];
  /** utime + stime of each process of the tree, in seconds, by pid. */
  cpuSecondsByPid: Record<number, number>;
}

/** One reading of the tree rooted at `pid`. */
export function sample(pid: number): ProcSample {
  return sampleOf([pid, ...descendants(pid)]);
}

/** One reading of `pid` alone, without its children (the tunnel router without its agent). */
export function sampleProcess(pid: number): ProcSample {
  return sampleOf([pid]);
}

function sampleOf(pids: number[]): ProcSample {
  let ticks = 0;
  let systemTicks = 0;
  let rssKiB = 0;
  let fds = 0;
  const cpuSecondsByPid: Record<number, number> = {};
  for (const p of pids) {
    const fields = statFields(p);
    // stat fields 14 (utime) and 15 (stime): indexes 11 and 12 after the comm field.
    if (fields) {
      const own = Number(fields[11]) + Number(fields[12]);
      ticks += own;
      systemTicks += Number(fields[12]);
      cpuSecondsByPid[p] = own / clockTicks();
    }
    const status = read(`/proc/${p}/status`);
    const m = status && /^VmRSS:\s+(\d+) kB/m.exec(status);
    if (m) rssKiB += Number(m[1]);
    try {
      fds += readdirSync(`/proc/${p}/fd`).length;
    } catch {
      // gone
    }
  }
  return { cpuSeconds: ticks / clockTicks(), systemSeconds: systemTicks / clockTicks(), rssKiB, fds, pids, cpuSecondsByPid };
}

/** The script a node process runs (`peer-holder.js`), or its command's name: to label a tree's processes. */
export function processLabel(pid: number): string {
  const args = (read(`/proc/${pid}/cmdline`) ?? '').split('\0').filter(Boolean);
  const script = args.find((a) => a.endsWith('.js'));
  return (script ?? args[0] ?? String(pid)).split('/').pop()!;
}

/**
 * CPU µs of `pid` so far: every thread's `se.sum_exec_runtime` (/proc/<pid>/task/<tid>/sched, ns
 * precision) summed, what getrusage tells a process of itself, readable from outside. utime+stime
 * in /proc/<pid>/stat count 10 ms ticks, too coarse for a few thousand connections; they are the
 * fallback on a kernel without the scheduler's debug files (CONFIG_SCHED_DEBUG).
 */
export function threadsCpuMicros(pid: number): number {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0; // gone
  }
  let ms = 0;
  let threads = 0;
  for (const tid of tasks) {
    const m = /^se\.sum_exec_runtime\s*:\s*([\d.]+)/m.exec(read(`/proc/${pid}/task/${tid}/sched`) ?? '');
    if (!m) continue;
    ms += Number(m[1]);
    threads++;
  }
  if (threads > 0) return ms * 1000;
  const fields = statFields(pid);
  return fields ? ((Number(fields[11]) + Number(fields[12])) / clockTicks()) * 1e6 : 0;
}
