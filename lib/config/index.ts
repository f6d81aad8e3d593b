export { parseConfig, loadConfig, ConfigError, type ConfigProblem, type ParseConfigOptions } from './load.js';
export { parseAddress, formatAddress, isDnsName, isCidr, type HostPort, type ParseAddressResult } from './address.js';
export { parseDuration } from './duration.js';
export { channelNameProblem, normalizeVersion, NO_VERSION, type ChannelConfig } from './channel.js';
export { LEGACY_PORTS, LISTEN_ADDR_KEYS, listenAddressFor, hasOwnPort } from './listen-addresses.js';
export * from './types.js';
