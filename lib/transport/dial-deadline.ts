/**
 * A dial's deadline, judged after I/O. libuv runs due timers before it polls for I/O, so after a
 * turn of the event loop that ran long (a burst of thousands of connections, a GC pause), a dial
 * timer can fire although the connect completed meanwhile and only waits to be polled: the
 * connection would fail with GATE_ERR_DIAL_TIMEOUT on a healthy upstream. So an expired timer
 * defers its verdict by one `setImmediate`, which runs after that same iteration's poll phase; a
 * connect reported there cancels it. nginx orders its loop the same way (events, then expired
 * timers). Returns the cancel function.
 */
export function dialDeadline(timeoutMs: number, expired: () => void): () => void {
  let verdict: NodeJS.Immediate | undefined;
  const timer = setTimeout(() => {
    verdict = setImmediate(expired);
  }, timeoutMs);
  return () => {
    clearTimeout(timer);
    if (verdict) clearImmediate(verdict);
  };
}
