// The error contract (docs/ARCHITECTURE.md, "Errors"): every error a caller can meet is a GateError
// with a stable code, recognised across copies of the package, and nothing in lib/ throws a bare
// Error or assumes a caught value is a GateError.
import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCodes, GateError, isGateError, toGateError } from '../../lib/errors.js';

// dist/test/package → the repository's lib/ (the TypeScript sources, which is what a reader reads).
const repo = fileURLToPath(new URL('../../../', import.meta.url));
const libDir = join(repo, 'lib');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/**
 * `new Error(` that stays: each is not an error a caller of the library receives. A place here
 * that no longer has it fails the test too, so the list cannot outlive its reasons.
 */
const BARE_ERROR_ALLOWED: Record<string, string | string[]> = {
  // AbortSignal and DialCancel reasons: an aborted dial reports its own GateError, the reason is only why it stopped.
  'lib/client/local-proxy.ts': "abort.abort(new Error('local proxy closing'))",
  'lib/transport/dial-then-relay.ts': "cancel.cancel(new Error(steps.closedWhy ?? 'client closed'))",
  // Caught two lines below and reported as GATE_ERR_INVALID_ARGUMENT with its message.
  'lib/tunnel/join-endpoint.ts': "throw new Error('not an object')",
  // Node's own shapes: a TLSSocket's authorizationError, a libuv errno error, a rejected value that was no Error.
  'lib/handlers/terminate.ts': 'tlsSocket.authorizationError = new Error(problem)',
  'lib/transport/uv.ts': 'Object.assign(new Error(code), { code })',
  'lib/client/deadline.ts': 'new Error(String(err))',
};

t.test('a GateError from another copy of the package is a GateError here', async (t) => {
  // A second evaluation of the same module (another URL): what two installed copies amount to.
  const other = (await import(`../../lib/errors.js?copy=${Date.now()}`)) as typeof import('../../lib/errors.js');
  t.not(other.GateError, GateError, 'a separate class');
  const foreign = new other.GateError(other.ErrorCodes.DIAL_TIMEOUT, 'from the other copy');
  t.ok(isGateError(foreign), 'isGateError');
  t.ok(isGateError(foreign, ErrorCodes.DIAL_TIMEOUT), 'isGateError with its code');
  t.notOk(isGateError(foreign, ErrorCodes.DIAL_REFUSED), 'not with another code');
  t.ok(foreign instanceof GateError, 'instanceof');
  t.ok(other.isGateError(new GateError(ErrorCodes.NO_ROUTE, 'x')), 'and the other way round');
  t.notOk(isGateError(new Error('plain')), 'a plain Error is not one');
  t.notOk(isGateError({ code: 'GATE_ERR_NO_ROUTE', message: 'look-alike' }), 'nor a look-alike object');
  t.notOk(new Error('plain') instanceof GateError);
});

t.test('toGateError keeps a GateError and wraps anything else with the fallback code and the cause', async (t) => {
  const original = new GateError(ErrorCodes.DIAL_REFUSED, 'refused');
  t.equal(toGateError(original, ErrorCodes.HANDLER_FAILED), original);
  const cause = new TypeError('boom');
  const wrapped = toGateError(cause, ErrorCodes.HANDLER_FAILED);
  t.match(wrapped, { code: ErrorCodes.HANDLER_FAILED, message: 'boom' });
  t.equal(wrapped.cause, cause);
  t.match(toGateError('a string', ErrorCodes.HANDLER_FAILED), { code: ErrorCodes.HANDLER_FAILED, message: 'a string' });
  t.match(toGateError(cause, ErrorCodes.HANDLER_FAILED, 'said otherwise'), { message: 'said otherwise' });
});

t.test('lib/ throws no bare Error and casts no caught value to GateError', async (t) => {
  const seen = new Set<string>();
  const problems: string[] = [];
  for (const file of sources(libDir)) {
    const rel = relative(repo, file);
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const where = `${rel}:${i + 1}: ${line.trim()}`;
        if (/\bas GateError\b/.test(line)) problems.push(`${where} (use toGateError(err, fallbackCode))`);
        if (!/\bnew Error\(|\bthrow Error\(/.test(line)) return;
        const allowed = [BARE_ERROR_ALLOWED[rel] ?? []].flat().find((text) => line.includes(text));
        if (allowed !== undefined) seen.add(`${rel}: ${allowed}`);
        else problems.push(`${where} (throw a GateError with a code from ErrorCodes)`);
      });
  }
  t.same(problems, [], 'every error a caller can meet has a stable code');
  const stale = Object.entries(BARE_ERROR_ALLOWED)
    .flatMap(([rel, texts]) => [texts].flat().map((text) => `${rel}: ${text}`))
    .filter((entry) => !seen.has(entry));
  t.same(stale, [], 'every allowed place still needs its entry');
});
