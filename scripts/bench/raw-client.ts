// A minimal keep-alive HTTP/1.1 client over one net.Socket: one request in flight, responses framed by
// Content-Length or chunked encoding; a server that closes after each answer (HTTP/1.0 or `Connection: close`, as
// the Python peer does) gets a new connection for the next request, its connect counted in that request's time. It
// exists because http.Agent tops out below a plain node:http server on this machine (measured ~47k vs ~66k req/s),
// which would hide any gap between the ceiling and our servers.
import { connect, type Socket } from 'node:net';

export interface RequestSpec {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface RawResponse {
  status: number;
  body: Buffer;
  /** The server closes the connection after this answer. */
  close?: boolean;
}

export interface RawConnection {
  request(bytes: Buffer): Promise<RawResponse>;
  close(): void;
}

/** Serialises a request once so the hot loop only writes bytes. */
export function encodeRequest(host: string, spec: RequestSpec): Buffer {
  const body = spec.body === undefined ? undefined : Buffer.isBuffer(spec.body) ? spec.body : Buffer.from(spec.body);
  let head = `${spec.method} ${spec.path} HTTP/1.1\r\nhost: ${host}\r\n`;
  for (const [name, value] of Object.entries(spec.headers ?? {})) head += `${name}: ${value}\r\n`;
  if (body) head += `content-length: ${body.length}\r\n`;
  head += '\r\n';
  return body ? Buffer.concat([Buffer.from(head, 'latin1'), body]) : Buffer.from(head, 'latin1');
}

const CRLF2 = Buffer.from('\r\n\r\n');

/** Parses one complete response at the start of buf; returns null until enough bytes have arrived. */
export function parseResponse(buf: Buffer): { response: RawResponse; used: number } | null {
  const end = buf.indexOf(CRLF2);
  if (end < 0) return null;
  const head = buf.toString('latin1', 0, end);
  const status = Number(head.slice(9, 12));
  const close = head.startsWith('HTTP/1.0')
    ? !/\r\nconnection:\s*keep-alive/i.test(head) : /\r\nconnection:\s*close/i.test(head);
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  const start = end + 4;
  if (length) {
    const total = start + Number(length[1]);
    if (buf.length < total) return null;
    return { response: { status, body: buf.subarray(start, total), close }, used: total };
  }
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
    const parts: Buffer[] = [];
    let at = start;
    for (;;) {
      const lineEnd = buf.indexOf('\r\n', at);
      if (lineEnd < 0) return null;
      const size = parseInt(buf.toString('latin1', at, lineEnd), 16);
      const dataEnd = lineEnd + 2 + size;
      if (buf.length < dataEnd + 2) return null;
      if (size === 0) return { response: { status, body: Buffer.concat(parts), close }, used: dataEnd + 2 };
      parts.push(buf.subarray(lineEnd + 2, dataEnd));
      at = dataEnd + 2;
    }
  }
  return { response: { status, body: Buffer.alloc(0), close }, used: start };
}

/** One socket, resolved once connected, with one request in flight at a time. */
function dial(host: string, port: number): Promise<{ socket: Socket; send(bytes: Buffer): Promise<RawResponse> }> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(port, host);
    socket.setNoDelay(true);
    let buf: Buffer = Buffer.alloc(0);
    let pending: { resolve: (r: RawResponse) => void; reject: (e: Error) => void } | undefined;
    function fail(err: Error): void {
      const p = pending;
      pending = undefined;
      p?.reject(err);
    }
    socket.on('data', (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      const parsed = parseResponse(buf);
      if (!parsed || !pending) return;
      buf = buf.subarray(parsed.used);
      const p = pending;
      pending = undefined;
      p.resolve(parsed.response);
    });
    socket.on('error', (err) => {
      fail(err);
      reject(err);
    });
    socket.on('close', () => fail(new Error('connection closed')));
    socket.once('connect', () => resolve({
      socket,
      send(bytes) {
        return new Promise((res, rej) => {
          pending = { resolve: res, reject: rej };
          socket.write(bytes);
        });
      },
    }));
  });
}

export async function openConnection(host: string, port: number): Promise<RawConnection> {
  let current = await dial(host, port);
  let reconnect = false;
  return {
    async request(bytes) {
      if (reconnect) {
        current.socket.destroy();
        current = await dial(host, port);
      }
      const response = await current.send(bytes);
      reconnect = response.close === true;
      return response;
    },
    close() {
      current.socket.destroy();
    },
  };
}
