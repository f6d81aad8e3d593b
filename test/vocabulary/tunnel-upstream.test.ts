import t from 'tap';
import { ErrorCodes } from '../../lib/errors.js';
import { parseTunnelUpstream } from '../../lib/vocabulary/tunnel-upstream.js';

t.test('tunnel upstreams: tunnel:<agent>/<host:port>', async (t) => {
  t.same(parseTunnelUpstream('tunnel:db-agent/127.0.0.1:5432'), { agent: 'db-agent', target: '127.0.0.1:5432' });
  t.same(parseTunnelUpstream('tunnel:edge.1/[::1]:6379'), { agent: 'edge.1', target: '[::1]:6379' });
  t.same(parseTunnelUpstream('tunnel:a/db.internal:5432'), { agent: 'a', target: 'db.internal:5432' });
  for (const bad of [
    '127.0.0.1:5432',
    'tunnel:127.0.0.1:5432',
    'tunnel:/127.0.0.1:5432',
    'tunnel:a b/h:1',
    'tunnel:a/h',
    'tunnel:a/h:99999',
    'tunnel:a/https://h:1',
    'tunnel:a/::1:5432',
  ]) {
    t.throws(() => parseTunnelUpstream(bad), { code: ErrorCodes.CONFIG_INVALID }, bad);
  }
});
