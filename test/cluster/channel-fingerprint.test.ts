// The channel fingerprint: equal configurations give equal digests whatever the
// order they were written in; any difference an updater would see gives another.
import t from 'tap';
import { channelFingerprint } from '../../lib/cluster/channel-fingerprint.js';
import { parseConfig } from '../../lib/config/load.js';

const channelsOf = (yaml: string) =>
  parseConfig(`proxy_service:\n  automatic_upgrades_channels:\n${yaml}`).config.proxy.automaticUpgradesChannels;

t.test('stable: the same channels in another order, or spelled differently, give the same digest', async (t) => {
  const a = channelsOf(
    '    stable/cloud: {static_version: v1.2.3}\n    stable/rolling: {forward_url: https://updates.example.com/v1/rolling/}\n',
  );
  const b = channelsOf(
    '    stable/rolling: {forward_url: https://updates.example.com/v1/rolling}\n    stable/cloud: {static_version: 1.2.3, critical: false}\n',
  );
  t.equal(channelFingerprint(a), channelFingerprint(b));
  t.match(channelFingerprint(a), /^sha256:[0-9a-f]{64}$/);
  t.equal(channelFingerprint({}), channelFingerprint(channelsOf('    {}\n')), 'none configured');
});

t.test('any difference an updater would see changes it', async (t) => {
  const base = channelFingerprint(channelsOf('    stable/cloud: {static_version: v1.2.3}\n'));
  const variants = [
    '    stable/cloud: {static_version: v1.2.4}\n',
    '    stable/cloud: {static_version: v1.2.3, critical: true}\n',
    '    stable/cloud: {forward_url: https://updates.example.com/v1/cloud}\n',
    '    stable/other: {static_version: v1.2.3}\n',
    '    stable/cloud: {static_version: v1.2.3}\n    stable/rolling: {static_version: v1.2.3}\n',
  ];
  const digests = new Set([base, ...variants.map((v) => channelFingerprint(channelsOf(v)))]);
  t.equal(digests.size, variants.length + 1, 'all distinct');
  t.not(base, channelFingerprint({}));
});
