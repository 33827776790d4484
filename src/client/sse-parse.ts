// Incremental Server-Sent Events parser (WHATWG HTML §9.2.6): feed it text chunks, get whole events back.
// The one parser of both stream readers: the SDK's (client.ts) and the browser UI's (static/lib/sse.js), which loads
// it from the Control Plane as /client/sse-parse.js. So it imports nothing and uses nothing of Node or the DOM; it
// does not decode bytes, reconnect or dedupe (its callers do).

export interface SseMessage {
  /** The last `id:` the stream set (it carries over to later events), null before any. */
  id: string | null;
  /** The `event:` field, "message" when the event had none. */
  event: string;
  /** The `data:` lines joined by newlines. */
  data: string;
}

export function createSseParser() {
  let buffer = '';
  let data: string[] = [];
  let event = '';
  let lastId: string | null = null;
  let retry: number | null = null;

  function line(text: string, out: SseMessage[]): void {
    if (text === '') {
      if (data.length > 0) out.push({ id: lastId, event: event || 'message', data: data.join('\n') });
      data = [];
      event = '';
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) lastId = value;
    else if (field === 'retry' && /^\d+$/.test(value)) retry = Number(value);
  }

  return {
    /** The events that the text so far completes, in order. */
    push(chunk: string): SseMessage[] {
      buffer += chunk;
      const out: SseMessage[] = [];
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
    /** Milliseconds the server asked the reader to wait before reconnecting, if it said. */
    retryMs(): number | null {
      return retry;
    },
  };
}
