import t from 'tap';
import { parseChannelPath } from '../../lib/web/channel-path.js';

const P = '/v1/webapi/automaticupgrades/channel';

t.test('splits name and verb; the name may hold slashes', async (t) => {
  t.same(parseChannelPath(`${P}/default/version`), { kind: 'channel', name: 'default', verb: 'version' });
  t.same(parseChannelPath(`${P}/stable/cloud/version`), { kind: 'channel', name: 'stable/cloud', verb: 'version' });
  t.same(parseChannelPath(`${P}/a/b/c/critical?x=1#f`), { kind: 'channel', name: 'a/b/c', verb: 'critical' });
  t.same(parseChannelPath(`${P}/v1.2_x-y/version`), { kind: 'channel', name: 'v1.2_x-y', verb: 'version' });
});

t.test('other paths are not ours', async (t) => {
  for (const path of ['/', '/webapi/ping', `${P}x/default/version`, '/v1/webapi/automaticupgrades/channels/a/version']) {
    t.same(parseChannelPath(path), { kind: 'other' }, path);
  }
});

t.test('refuses bad names', async (t) => {
  const cases: Array<[string, RegExp]> = [
    [P, /expected \/channel\/<name>\/version/],
    [`${P}/`, /expected/],
    [`${P}/version`, /expected/],
    [`${P}//version`, /empty/],
    [`${P}/stable//cloud/version`, /empty segment/],
    [`${P}/stable/../default/version`, /"\.\." segment/],
    [`${P}/./version`, /"\." segment/],
    [`${P}/stable%2Fcloud/version`, /percent-encoded/],
    [`${P}/stable%2fcloud/version`, /percent-encoded/],
    [`${P}/%2e%2e/version`, /percent-encoded/],
    [`${P}/Stable/version`, /lower-case/],
    [`${P}/sta ble/version`, /lower-case/],
    [`${P}/stable\\cloud/version`, /lower-case/],
    [`${P}/stable/version/`, /may not end with/],
    [`${P}/${'a'.repeat(129)}/version`, /longer than 128/],
  ];
  for (const [path, reason] of cases) {
    const parsed = parseChannelPath(path);
    t.equal(parsed.kind, 'invalid', path);
    if (parsed.kind === 'invalid') t.match(parsed.reason, reason, path);
  }
});
