// Parses a Server-Sent Events byte stream into messages (WHATWG HTML §9.2.6 "event stream interpretation").
// Twin of static/lib/sse-parse.js (the browser's copy, which dist/ cannot import): keep the field rules in step.
import type { StreamMessage } from './types.ts';

/** Yields one message per blank-line-terminated block that carried data; comments (`: ping`) are skipped. */
export async function* readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<StreamMessage> {
  // A TextDecoder drops the stream's leading BOM itself, as the spec's decoding step says.
  const decoder = new TextDecoder();
  let buffer = '';
  let id: string | null = null;
  let event = '';
  let data: string[] = [];
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    // A trailing lone \r may be the first half of \r\n: keep it for the next chunk.
    let match: RegExpExecArray | null;
    const lineEnd = /\r\n|\r(?!$)|\n/g;
    let consumed = 0;
    while ((match = lineEnd.exec(buffer)) !== null) {
      const line = buffer.slice(consumed, match.index);
      consumed = match.index + match[0].length;
      if (line === '') {
        if (data.length > 0) yield { id, event: event || 'message', data: decode(data.join('\n')) };
        data = [];
        event = '';
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') data.push(value);
      else if (field === 'event') event = value;
      else if (field === 'id' && !value.includes('\0')) id = value;
    }
    buffer = buffer.slice(consumed);
  }
}

function decode(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
