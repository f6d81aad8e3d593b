import type { Http2Session } from 'node:http2';
import { FramedSession } from '../tunnel-framing/framed-session.js';

/**
 * Ends a tunnel or peering session gracefully, whichever protocol it speaks: GOAWAY with no error,
 * no new streams either way, the open ones finish, then the connection ends.
 */
export function goAwayGracefully(session: Http2Session | FramedSession): void {
  if (session instanceof FramedSession) session.goAway();
  else if (!session.closed && !session.destroyed) session.close();
}
