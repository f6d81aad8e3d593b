export { buildPing, type PingResponse } from './ping.js';
export {
  VersionChannels,
  DEFAULT_CHANNEL,
  type FetchText,
  type FetchTextResult,
  type VersionChannelsOptions,
} from './version-channels.js';
export { parseChannelPath, CHANNEL_PATH_PREFIX, type ChannelPath } from './channel-path.js';
export {
  createWebRoutes,
  PING_PATH,
  WebErrorCodes,
  type WebRequest,
  type WebResponse,
  type WebRequestHandler,
  type WebRoutesOptions,
} from './routes.js';
