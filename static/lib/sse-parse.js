// @ts-check
// Incremental Server-Sent Events parser (WHATWG HTML §9.2.6): feed it text chunks, get whole events back.
// Pure so it runs in Node tests; it does not reconnect or dedupe (sse.js does).
// Twin of readSse in src/client/client.ts (the Node client's copy; this no-build file cannot import it): keep the
// field rules in step.

/** @typedef {{ id: string, event: string, data: string }} SseMessage */

export function createSseParser() {
  let buffer = '';
  let data = /** @type {string[]} */ ([]);
  let event = '';
  let lastId = '';
  /** @type {number | null} */
  let retry = null;

  /** @param {string} line @param {SseMessage[]} out */
  function line(line, out) {
    if (line === '') {
      if (data.length > 0) out.push({ id: lastId, event: event || 'message', data: data.join('\n') });
      data = [];
      event = '';
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) lastId = value;
    else if (field === 'retry' && /^\d+$/.test(value)) retry = Number(value);
  }

  return {
    /** @param {string} chunk @returns {SseMessage[]} */
    push(chunk) {
      buffer += chunk;
      /** @type {SseMessage[]} */
      const out = [];
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const c = buffer[i];
        if (c !== '\n' && c !== '\r') continue;
        // A lone \r at the end of a chunk may be half of \r\n: wait for more.
        if (c === '\r' && i === buffer.length - 1) break;
        line(buffer.slice(start, i), out);
        if (c === '\r' && buffer[i + 1] === '\n') i++;
        start = i + 1;
      }
      buffer = buffer.slice(start);
      return out;
    },
    /** Milliseconds the server asked us to wait before reconnecting, if it said. */
    retryMs() {
      return retry;
    },
  };
}
