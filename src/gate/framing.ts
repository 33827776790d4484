// How the gate frames a request body it forwards: its own framing for exactly the bytes node's parser read, never the
// client's. A body on a method that carries none is refused: a destination that ignored it would read it as a second
// request the gate never decided (request smuggling).

/** Methods whose request has no meaning for a body (RFC 9110 §9.3); CONNECT never reaches here. */
const NO_BODY = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE']);

export type Framing =
  | { kind: 'none' }
  | { kind: 'length'; bytes: number }
  | { kind: 'chunked' }
  | { kind: 'refused'; reason: string };

function values(raw: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === name) out.push(raw[i + 1] ?? '');
  return out;
}

/** The framing the gate writes upstream for a request with this method and these raw headers. */
export function requestFraming(method: string, raw: readonly string[]): Framing {
  const codings = values(raw, 'transfer-encoding');
  const lengths = values(raw, 'content-length');
  if (codings.length > 0 && lengths.length > 0) {
    return { kind: 'refused', reason: 'a request with both Transfer-Encoding and Content-Length is refused' };
  }
  if (codings.length > 0) {
    if (NO_BODY.has(method)) return { kind: 'refused', reason: `a ${method} request has no body to transfer-encode` };
    // Only plain chunked: a coding the gate would drop (gzip, chunked) changes what the destination reads.
    if (codings.length > 1 || codings[0]?.trim().toLowerCase() !== 'chunked') {
      return { kind: 'refused', reason: 'only "Transfer-Encoding: chunked" is forwarded' };
    }
    return { kind: 'chunked' };
  }
  if (lengths.length > 1) return { kind: 'refused', reason: 'a request with more than one Content-Length is refused' };
  const text = lengths[0]?.trim();
  if (text === undefined) return { kind: 'none' };
  if (!/^\d{1,15}$/.test(text)) return { kind: 'refused', reason: 'the Content-Length is not a number' };
  const bytes = Number(text);
  if (bytes === 0) return { kind: 'none' };
  if (NO_BODY.has(method)) return { kind: 'refused', reason: `a ${method} request with a body is refused` };
  return { kind: 'length', bytes };
}

/** The header pair the gate adds for the framing (none for a bodiless request: node then sends no length). */
export function framingHeaders(framing: Framing, method: string): string[] {
  if (framing.kind === 'chunked') return ['transfer-encoding', 'chunked'];
  if (framing.kind === 'length') return ['content-length', String(framing.bytes)];
  return NO_BODY.has(method) ? [] : ['content-length', '0'];
}
