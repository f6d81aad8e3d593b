export { buildPing, type PingResponse } from './ping.js';
export {
  VersionChannels,
  DEFAULT_CHANNEL,
  type FetchText,
  type FetchTextResult,
  type VersionChannelsOptions,
} from './version-channels.js';
export { parseChannelPath, type ChannelPath } from './channel-path.js';
export {
  createWebRoutes,
  WebErrorCodes,
  type WebRequest,
  type WebResponse,
  type WebRequestHandler,
  type WebRoutesOptions,
} from './routes.js';
