import cluster, { type Worker } from 'node:cluster';
import { ErrorCodes, GateError } from '../errors.js';
import { type Closable, type CloseOptions, Lifecycle, type LifecycleState } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';

export interface RunWorkersOptions {
  /** Worker processes (at least 1). One per core is the usual choice. */
  workers: number;
  /**
   * Runs in every worker: build the Multiplexer and `listen`. Listeners on the same address share
   * one socket through `node:cluster`. The worker counts as started when this resolves; the
   * worker should close its multiplexer on SIGTERM (the primary forwards it).
   */
  start: () => void | Promise<void>;
  /**
   * 'shared' (default): every worker accepts on the one listening socket and the kernel spreads
   * connections; no extra hop. 'round-robin': the primary accepts and hands each socket to a
   * worker (Node's default policy), an even spread paid for with primary CPU per connection.
   */
  scheduling?: 'shared' | 'round-robin';
  /** Delay before restarting a crashed worker, doubled for each crash soon after a start (default 100 ms). */
  restartDelayMs?: number;
  /** Cap on that delay (default 10 s). */
  maxRestartDelayMs?: number;
  /** Milliseconds workers get to exit after SIGTERM before SIGKILL (default 15 s). */
  stopGraceMs?: number;
  logger?: Logger;
}

/** The primary's handle on its workers. */
export interface WorkerPool extends Closable {
  readonly role: 'primary';
  /** Process ids of the live workers. */
  pids(): number[];
  /** open, closing (close() called), closed (every worker exited, or destroy()). */
  readonly state: LifecycleState;
  /**
   * Sends SIGTERM to every worker, stops restarting them and resolves when all have exited; one
   * still running after `graceMs` (default: the `stopGraceMs` option) gets SIGKILL. A second call
   * returns the same promise.
   */
  close(options?: CloseOptions): Promise<void>;
  /** SIGKILL to every worker now, no more restarts; `stopped` resolves once they have exited. */
  destroy(err?: GateError): void;
  /** Resolves once the pool has stopped (close(), destroy() or SIGTERM/SIGINT to the primary). */
  readonly stopped: Promise<void>;
}

export interface WorkerRole {
  readonly role: 'worker';
  /** The cluster worker id (1, 2, ...; a restarted worker gets a new id). */
  readonly id: number;
}

const READY = 'gate-mux:worker-ready';
/** A worker that lived longer than this before crashing resets the restart backoff. */
const STABLE_AFTER_MS = 10_000;

/**
 * Runs the multiplexer in `workers` processes on one listener (node:cluster). Called in the
 * primary it forks the workers, resolves once each has started, restarts a crashed worker with
 * exponential backoff, and forwards SIGTERM/SIGINT (stop) and SIGHUP (e.g. reload routes) to
 * them. Called in a worker it runs `start` and resolves with the worker's role. A worker that
 * fails before it ever started is a configuration problem (port in use, bad routes): the pool
 * stops and the promise rejects with GATE_ERR_WORKER_START_FAILED instead of crash-looping.
 */
export async function runWorkers(options: RunWorkersOptions): Promise<WorkerPool | WorkerRole> {
  if (cluster.isWorker) {
    await options.start();
    process.send?.({ type: READY });
    return { role: 'worker', id: cluster.worker?.id ?? 0 };
  }
  if (!Number.isInteger(options.workers) || options.workers < 1) {
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `workers must be a positive integer, got ${options.workers}`);
  }
  return startPool(options);
}

function startPool(options: RunWorkersOptions): Promise<WorkerPool> {
  const logger = componentLogger(options.logger, 'cluster');
  const minDelay = options.restartDelayMs ?? 100;
  const maxDelay = options.maxRestartDelayMs ?? 10_000;
  const stopGraceMs = options.stopGraceMs ?? 15_000;
  // Must be chosen before the first fork; it applies to every server the workers open.
  cluster.schedulingPolicy = options.scheduling === 'round-robin' ? cluster.SCHED_RR : cluster.SCHED_NONE;

  const live = new Map<number, { worker: Worker; startedAt: number; ready: boolean }>();
  const restartTimers = new Set<NodeJS.Timeout>();
  let delay = minDelay;
  const lifecycle = new Lifecycle();
  /** Set once the pool stops (close, destroy, or a worker that never started): no more restarts. */
  let stopping: Promise<void> | undefined;
  let resolveStopped!: () => void;
  const stopped = new Promise<void>((resolve) => (resolveStopped = resolve));
  let pendingFirstStarts = options.workers;
  let settleStart!: (error?: Error) => void;
  const started = new Promise<void>((resolve, reject) => {
    settleStart = (error) => (error ? reject(error) : resolve());
  });

  const fork = (): void => {
    const worker = cluster.fork();
    const entry = { worker, startedAt: Date.now(), ready: false };
    live.set(worker.id, entry);
    worker.on('message', (message: unknown) => {
      if (!entry.ready && typeof message === 'object' && message !== null && (message as { type?: unknown }).type === READY) {
        entry.ready = true;
        if (pendingFirstStarts > 0 && --pendingFirstStarts === 0) settleStart();
      }
    });
    worker.on('error', (err) => logger.warn({ err, pid: worker.process.pid }, 'worker channel error'));
    worker.once('exit', (code, signal) => onExit(worker.id, code, signal));
  };

  const onExit = (id: number, code: number | null, signal: string | null): void => {
    const entry = live.get(id);
    live.delete(id);
    if (stopping) {
      if (live.size === 0) resolveStopped();
      return;
    }
    if (!entry?.ready && pendingFirstStarts > 0) {
      // Never started: restarting would only repeat the failure.
      const error = new GateError(ErrorCodes.WORKER_START_FAILED, `worker exited before it started (code ${code}, signal ${signal})`);
      logger.error({ code, signal }, error.message);
      settleStart(error);
      void close();
      return;
    }
    const livedMs = Date.now() - (entry?.startedAt ?? 0);
    delay = livedMs > STABLE_AFTER_MS ? minDelay : Math.min(maxDelay, delay * 2);
    logger.warn({ code, signal, restartInMs: delay }, 'worker exited; restarting');
    const timer = setTimeout(() => {
      restartTimers.delete(timer);
      if (!stopping) fork();
    }, delay);
    restartTimers.add(timer);
  };

  const onTerminate = (): void => void close();
  const onHangup = (): void => {
    for (const { worker } of live.values()) worker.process.kill('SIGHUP');
  };

  const detach = (): void => {
    process.removeListener('SIGTERM', onTerminate);
    process.removeListener('SIGINT', onTerminate);
    process.removeListener('SIGHUP', onHangup);
  };

  function beginStop(): void {
    stopping ??= stopped;
    if (pendingFirstStarts > 0) settleStart(new GateError(ErrorCodes.SHUTDOWN, 'stopped before every worker started'));
    for (const timer of restartTimers) clearTimeout(timer);
    restartTimers.clear();
    if (live.size === 0) resolveStopped();
  }

  function close(closeOptions: CloseOptions = {}): Promise<void> {
    // The pool's `stopped` waits for this: the signal listeners are gone by then.
    stopping = lifecycle.close(async () => {
      beginStop();
      for (const { worker } of live.values()) worker.process.kill('SIGTERM');
      const killTimer = setTimeout(() => {
        for (const { worker } of live.values()) worker.process.kill('SIGKILL');
      }, closeOptions.graceMs ?? stopGraceMs);
      await stopped;
      clearTimeout(killTimer);
      detach();
    });
    return stopping;
  }

  function destroy(): void {
    if (!lifecycle.destroy()) return;
    beginStop();
    for (const { worker } of live.values()) worker.process.kill('SIGKILL');
    detach();
  }

  process.on('SIGTERM', onTerminate);
  process.on('SIGINT', onTerminate);
  process.on('SIGHUP', onHangup);
  for (let i = 0; i < options.workers; i++) fork();

  const pool: WorkerPool = {
    role: 'primary',
    pids: () => [...live.values()].flatMap(({ worker }) => (worker.process.pid === undefined ? [] : [worker.process.pid])),
    get state() {
      return lifecycle.state;
    },
    close,
    destroy,
    stopped: stopped.then(() => stopping).then(() => undefined),
  };
  return started.then(() => pool);
}
