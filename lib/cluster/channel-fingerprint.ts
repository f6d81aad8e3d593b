import { createHash } from 'node:crypto';
import type { ChannelConfig } from '../config/channel.js';

/**
 * A stable digest of `proxy_service.automatic_upgrades_channels`: proxies behind
 * one load balancer whose channels differ answer an agent's updater differently from one request to
 * the next, and agents flip between versions. Each proxy publishes this in its presence so the
 * others can say so.
 *
 * `sha256:` + hex of a canonical JSON: channels sorted by name, each as
 * `[name, static_version|null, forward_url|null, critical]`. Only what the configuration says counts:
 * a forwarded channel's answer is the upstream's business, and the implicit `default` channel (the
 * proxy's own version) is left out, since versions differ during a rolling upgrade by design.
 */
export function channelFingerprint(channels: Readonly<Record<string, ChannelConfig>>): string {
  const canonical = Object.keys(channels)
    .sort()
    .map((name) => {
      const channel = channels[name] as ChannelConfig;
      return channel.kind === 'static' ? [name, channel.version, null, channel.critical === true] : [name, null, channel.url, false];
    });
  return `sha256:${createHash('sha256').update(JSON.stringify(canonical)).digest('hex')}`;
}
