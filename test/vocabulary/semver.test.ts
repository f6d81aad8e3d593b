import t from 'tap';
import { compareVersions, formatVersion, parseVersion } from '../../lib/vocabulary/semver.js';
import { ErrorCodes } from '../../lib/errors.js';
import { prng } from '../helpers/prng.js';

// semver.org §11.4 example, in ascending order, plus our `v` prefix.
const ASCENDING = [
  '1.0.0-alpha',
  '1.0.0-alpha.1',
  'v1.0.0-alpha.beta',
  '1.0.0-beta',
  '1.0.0-beta.2',
  '1.0.0-beta.11',
  '1.0.0-rc.1',
  '1.0.0',
  'v1.0.1',
  '1.1.0',
  '1.10.0',
  '2.0.0-0',
  '2.0.0',
  '10.0.0',
];

t.test('§11 precedence: every pair of the ordered list compares as its positions do', async (t) => {
  for (let i = 0; i < ASCENDING.length; i++) {
    for (let j = 0; j < ASCENDING.length; j++) {
      const want = i < j ? -1 : i > j ? 1 : 0;
      const got = compareVersions(ASCENDING[i]!, ASCENDING[j]!);
      if (got !== want) t.fail(`${ASCENDING[i]} vs ${ASCENDING[j]}: got ${got}, want ${want}`);
    }
  }
  t.pass(`${ASCENDING.length ** 2} pairs`);
});

t.test('table: v prefix, build metadata, numeric vs alphanumeric identifiers', async (t) => {
  const cases: Array<[string, string, -1 | 0 | 1]> = [
    ['v1.2.3', '1.2.3', 0],
    ['1.2.3', '1.2.4', -1],
    ['1.2.4', 'v1.2.3', 1],
    ['1.0.0+build.1', '1.0.0+build.2', 0],
    ['1.0.0-rc.1+b', '1.0.0-rc.1', 0],
    ['1.0.0-2', '1.0.0-10', -1], // numeric identifiers numerically
    ['1.0.0-10', '1.0.0-9a', -1], // numeric below alphanumeric
    ['1.0.0-a.b', '1.0.0-a', 1], // the longer set wins when the prefix is equal
    ['1.0.0-B', '1.0.0-a', -1], // ASCII order: upper case first
    [' v3.0.0 \n', '3.0.0', 0],
  ];
  for (const [a, b, want] of cases) t.equal(compareVersions(a, b), want, `${a.trim()} vs ${b}`);
  t.equal(formatVersion(parseVersion('v1.2.3-rc.1+build.9')), '1.2.3-rc.1');
  t.same(parseVersion('1.2.3-x.7.y').prerelease, ['x', 7, 'y']);
});

t.test('invalid versions are refused with a stable code', async (t) => {
  for (const bad of [
    '',
    'v',
    '1.2',
    '1.2.3.4',
    '01.2.3',
    '1.02.3',
    '1.2.3-01',
    '1.2.3-',
    '1.2.3+',
    'vv1.2.3',
    '1.2.3-a..b',
    'none',
    '99999999999999999999.0.0',
  ]) {
    t.throws(() => parseVersion(bad), { code: ErrorCodes.UPGRADE_VERSION_INVALID }, JSON.stringify(bad));
  }
});

t.test('seeded random triples: antisymmetric and transitive', async (t) => {
  const random = prng(20260801);
  const pick = <T>(items: readonly T[]): T => random.pick(items);
  const pres = ['', '-alpha', '-alpha.1', '-beta', '-rc.1', '-rc.2', '-0', '-1.a'];
  const make = (): string => `${pick([0, 1, 2])}.${pick([0, 1, 10])}.${pick([0, 3])}${pick(pres)}`;
  let checked = 0;
  for (let i = 0; i < 300; i++) {
    const [a, b, c] = [make(), make(), make()];
    if (compareVersions(a, b) !== -compareVersions(b, a)) t.fail(`antisymmetry ${a} ${b}`);
    if (compareVersions(a, b) <= 0 && compareVersions(b, c) <= 0 && compareVersions(a, c) > 0) t.fail(`transitivity ${a} ${b} ${c}`);
    checked++;
  }
  t.equal(checked, 300);
});
