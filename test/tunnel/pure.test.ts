import t from 'tap';
import { ErrorCodes } from '../../lib/errors.js';
import { agentNameOf, commonNameOfSubject } from '../../lib/tunnel/agent-identity.js';
import { backoffDelay } from '../../lib/tunnel/backoff.js';
import { framedRefusal } from '../../lib/tunnel/framed-answer.js';
import { statusForCode } from '../../lib/tunnel/refusal-status.js';
import { prng } from '../helpers/prng.js';

t.test('backoff: full jitter under a doubling, capped ceiling', async (t) => {
  const options = { initialMs: 100, maxMs: 1000 };
  t.equal(
    backoffDelay(0, options, () => 0),
    0,
    'full jitter reaches 0',
  );
  t.equal(
    backoffDelay(0, options, () => 0.999999),
    99,
  );
  t.equal(
    backoffDelay(1, options, () => 0.5),
    100,
  );
  t.equal(
    backoffDelay(3, options, () => 0.999999),
    799,
  );
  t.equal(
    backoffDelay(4, options, () => 0.999999),
    999,
    'capped at maxMs',
  );
  t.equal(
    backoffDelay(5000, options, () => 0.999999),
    999,
    'huge attempts stay finite',
  );
  const random = prng(7);
  for (let attempt = 0; attempt < 200; attempt++) {
    const d = backoffDelay(attempt % 12, options, () => random.u32() / 0x100000000);
    if (!(d >= 0 && d < Math.min(1000, 100 * 2 ** (attempt % 12)))) t.fail(`attempt ${attempt}: ${d}`);
  }
});

t.test('agent identity: CN, else first DNS SAN; ambiguity and junk refused', async (t) => {
  t.equal(agentNameOf({ commonName: 'db-agent', subjectAltName: 'DNS:other' }), 'db-agent');
  t.equal(agentNameOf({ commonName: undefined, subjectAltName: 'IP Address:10.0.0.1, DNS:edge-7.site' }), 'edge-7.site');
  t.throws(() => agentNameOf({ commonName: ['a', 'b'], subjectAltName: undefined }), { code: ErrorCodes.AGENT_IDENTITY });
  t.throws(() => agentNameOf({ commonName: 'has space', subjectAltName: undefined }), { code: ErrorCodes.AGENT_IDENTITY });
  t.throws(() => agentNameOf({ commonName: '', subjectAltName: 'IP Address:10.0.0.1' }), { code: ErrorCodes.AGENT_IDENTITY });
  t.equal(commonNameOfSubject('O=gate\nCN=agent-1'), 'agent-1');
  t.same(commonNameOfSubject('CN=a\nCN=b'), ['a', 'b']);
  t.equal(commonNameOfSubject('O=gate'), undefined);
});

t.test('refusals: status per code, codes read back only when well-formed', async (t) => {
  t.equal(statusForCode(ErrorCodes.AGENT_TARGET_DENIED), 403);
  t.equal(statusForCode(ErrorCodes.DIAL_TIMEOUT), 504);
  t.equal(statusForCode(ErrorCodes.DIAL_REFUSED), 502);
  t.same(framedRefusal({ status: 502, code: ErrorCodes.DIAL_REFUSED, reason: 'refused' }), {
    code: ErrorCodes.DIAL_REFUSED,
    message: 'refused',
  });
  t.same(
    framedRefusal({ status: 500, code: 'rm -rf', reason: '' }),
    { code: undefined, message: 'status 500' },
    'only a code of ours is kept',
  );
});
