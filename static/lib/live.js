// @ts-check
// Pages report their live stream's state here; the connection module turns it into the one indicator the topbar,
// footer and stale banner share.
import { noteStream } from './connection.js';

/** @param {import('./sse.js').StreamState} state */
export function showStreamState(state) {
  noteStream(state);
}
