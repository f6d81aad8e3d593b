import t from 'tap';
import type { Socket } from 'node:net';
import { connectDirect } from '../../lib/client/connect-direct.js';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { freePort } from '../helpers/daemon.js';
import { startEchoServer } from '../helpers/echo-servers.js';

function timers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

function connectOnce(host: string, port: number, allowHalfOpen = false): Promise<Socket | GateError> {
  return new Promise((resolve) => connectDirect(host, port, { timeoutMs: 5_000, allowHalfOpen }, resolve));
}

t.test('connects to a listening target, clears its timer, keeps allowHalfOpen', async (t) => {
  const echo = await startEchoServer(t);
  const before = timers();
  const outcome = await connectOnce(echo.host, echo.port, true);
  if (outcome instanceof GateError) throw outcome;
  t.teardown(() => outcome.destroy());
  t.equal(timers(), before, 'no deadline timer left once connected');
  t.equal(outcome.allowHalfOpen, true);
  outcome.write('ping');
  const [echoed] = (await new Promise((resolve) => outcome.once('data', (d: Buffer) => resolve([d])))) as [Buffer];
  t.equal(echoed.toString(), 'ping');
});

t.test('a closed port is GATE_ERR_DIAL_REFUSED with the message dial() gives', async (t) => {
  const port = await freePort('127.0.0.1');
  const before = timers();
  const outcome = await connectOnce('127.0.0.1', port);
  t.ok(outcome instanceof GateError);
  t.equal((outcome as GateError).code, ErrorCodes.DIAL_REFUSED);
  t.equal((outcome as GateError).message, `upstream 127.0.0.1:${port} refused the connection`, 'in the words of every dial');
  t.equal(timers(), before, 'no deadline timer left after a failure');
});

t.test('cancel destroys the socket under way, never calls back, leaves no timer', async (t) => {
  const echo = await startEchoServer(t);
  const before = timers();
  let called = false;
  const cancel = connectDirect(echo.host, echo.port, { timeoutMs: 5_000, allowHalfOpen: false }, () => (called = true));
  t.equal(timers(), before + 1, 'one deadline timer while connecting');
  cancel();
  t.equal(timers(), before, 'the timer is cleared by cancel');
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(called, false, 'done is not called after cancel');
  cancel(); // a second cancel does nothing
});
