// Sends generated requests for the fuzz suites: most over keep-alive sockets (node:http Agent), the ones no HTTP
// client would send (bad request lines, bad header bytes, CL+TE, no Host) as raw bytes on their own socket.
// Every answer is checked the same way: never 5xx, and every error is the JSON envelope (DESIGN §4).
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface FuzzRequest {
  /** What the generator did, for the failure message. */
  note: string;
  /** The route table entry it was generated for (`METHOD /pattern`). */
  route: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Exact bytes to write on a fresh socket instead (the request line and headers included). */
  raw?: Buffer;
  /** An SSE route: a 200 is dropped as soon as its headers arrive. */
  stream?: boolean;
  /** The server may close the socket without an answer (bytes it cannot frame a response for). */
  mayClose?: boolean;
  /** Changes server state only when answered 2xx (used for the "nothing stored when refused" check). */
  mutating: boolean;
}

export interface FuzzAnswer {
  status: number;
  contentType: string;
  text: string;
}

const MAX_READ = 256 * 1024;

export function createSender(baseUrl: string, concurrency: number) {
  const base = new URL(baseUrl);
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency });
  // When each kept-alive socket last had its response read, and the keep-alive timeout (ms) the server announced on it.
  const idleSince = new WeakMap<Socket, { at: number; timeoutMs: number }>();
  // Only the race Node's http docs name ("agent.reusedSocket"): the server closed the socket as idle, which it does
  // only once it has been idle for the timeout it announced, as this request went out on it. A reset of a socket idle
  // for less is the server's doing mid-request (a finding), never sent again.
  const closedAsIdle = (socket: Socket | null): boolean => {
    const idle = socket ? idleSince.get(socket) : undefined;
    return idle !== undefined && Date.now() - idle.at >= idle.timeoutMs;
  };
  // What a reported reset of a kept-alive socket says, so a finding under load shows how long the socket had rested.
  const resetOnKeptSocket = (err: NodeJS.ErrnoException, socket: Socket | null): Error => {
    const idle = socket ? idleSince.get(socket) : undefined;
    const rested = idle
      ? `${Date.now() - idle.at} ms, the server announced ${idle.timeoutMs} ms`
      : 'for an unknown time';
    return Object.assign(new Error(`${err.message} on a kept-alive socket idle ${rested}`, { cause: err }),
      { code: err.code });
  };

  function viaAgent(r: FuzzRequest, retried = false): Promise<FuzzAnswer> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { ...r.headers };
      if (r.body !== undefined && headers['transfer-encoding'] === undefined) headers['content-length'] ??= String(r.body.length);
      const req = request({ host: base.hostname, port: base.port, method: r.method, path: r.path, headers, agent: retried ? false : agent, setHost: !('host' in headers) });
      req.on('response', (res) => {
        const contentType = String(res.headers['content-type'] ?? '');
        if (r.stream && res.statusCode === 200 && contentType.startsWith('text/event-stream')) {
          resolve({ status: 200, contentType, text: '' });
          req.destroy();
          return;
        }
        const socket = req.socket;
        const parts: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size <= MAX_READ) parts.push(c);
        });
        res.on('end', () => {
          const timeout = /^timeout=(\d+)/.exec(String(res.headers['keep-alive'] ?? ''))?.[1];
          if (timeout !== undefined && socket) {
            idleSince.set(socket, { at: Date.now(), timeoutMs: Number(timeout) * 1000 });
          }
          resolve({ status: res.statusCode ?? 0, contentType, text: Buffer.concat(parts).toString('utf8') });
        });
        res.on('error', reject);
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        // A kept-alive socket the server closed as idle just as this request went out on it: the server never read
        // the request, so it is sent again once, on a socket of its own.
        const idleRace = req.reusedSocket && err.code === 'ECONNRESET' && !retried && closedAsIdle(req.socket);
        if (idleRace) resolve(viaAgent(r, true));
        else reject(req.reusedSocket && err.code === 'ECONNRESET' ? resetOnKeptSocket(err, req.socket) : err);
      });
      // A hang is a finding too (not a speed assertion): nothing here should take more than a moment.
      req.setTimeout(15_000, () => req.destroy(new Error('no answer within 15 s')));
      req.end(r.body);
    });
  }

  function viaSocket(r: FuzzRequest): Promise<FuzzAnswer> {
    return new Promise((resolve, reject) => {
      const socket = connect(Number(base.port), base.hostname);
      const parts: Buffer[] = [];
      socket.on('connect', () => socket.write(r.raw!));
      socket.on('data', (c: Buffer) => {
        parts.push(c);
        // A kept-alive socket stays open: the first complete response is all we wait for.
        if (responseComplete(Buffer.concat(parts))) socket.destroy();
      });
      socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' || err.code === 'EPIPE' ? socket.destroy() : reject(err)));
      socket.on('close', () => resolve(parseRaw(Buffer.concat(parts))));
      // A request the server is still waiting on (it asked for more bytes) is ended from our side.
      socket.setTimeout(5_000, () => socket.end());
    });
  }

  return {
    send: (r: FuzzRequest): Promise<FuzzAnswer> => (r.raw ? viaSocket(r) : viaAgent(r)),
    close: () => agent.destroy(),
  };
}

function responseComplete(bytes: Buffer): boolean {
  const head = bytes.indexOf('\r\n\r\n');
  if (head < 0) return false;
  const headers = bytes.subarray(0, head).toString('latin1');
  if (/\r\ncontent-type:\s*text\/event-stream/i.test(headers)) return true;
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(headers)?.[1];
  if (length !== undefined) return bytes.length - head - 4 >= Number(length);
  return /\r\ntransfer-encoding:\s*chunked/i.test(headers) && bytes.subarray(head).includes('\r\n0\r\n\r\n');
}

/** The first response in raw bytes (status 0 when the server closed without one). */
function parseRaw(bytes: Buffer): FuzzAnswer {
  const text = bytes.toString('latin1');
  const head = text.indexOf('\r\n\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
  if (head < 0) return { status, contentType: '', text: '' };
  const headers = text.slice(0, head);
  const contentType = /\r\ncontent-type:\s*([^\r\n]*)/i.exec(headers)?.[1] ?? '';
  const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(headers)?.[1] ?? Number.NaN);
  const rest = bytes.subarray(Buffer.byteLength(text.slice(0, head + 4), 'latin1'));
  const body = Number.isFinite(length) ? rest.subarray(0, length) : rest;
  return { status, contentType, text: body.toString('utf8') };
}

/** Why an answer breaks the contract, or null when it keeps it. */
export function contractProblem(r: FuzzRequest, a: FuzzAnswer): string | null {
  if (a.status === 0) return r.mayClose ? null : 'no response before the socket closed';
  if (a.status >= 500) return `status ${a.status}`;
  if (a.status < 400 || r.method === 'HEAD') return null;
  if (!a.contentType.startsWith('application/json')) return `error ${a.status} with content-type "${a.contentType}"`;
  let body: unknown;
  try {
    body = JSON.parse(a.text);
  } catch {
    return `error ${a.status} whose body is not JSON`;
  }
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  const keys = body !== null && typeof body === 'object' ? Object.keys(body) : [];
  if (keys.length !== 1 || typeof error?.code !== 'string' || !/^[a-z][a-z_]*$/.test(error.code) || typeof error.message !== 'string') {
    return `error ${a.status} is not the envelope: ${a.text.slice(0, 200)}`;
  }
  return null;
}

/** A request as a failure message shows it: enough to replay by hand, long bodies cut. */
export function describeRequest(r: FuzzRequest): string {
  const show = (b: Buffer): string => JSON.stringify(b.subarray(0, 600).toString('latin1')) + (b.length > 600 ? ` …(${b.length} bytes)` : '');
  if (r.raw) return `${r.note}: raw ${show(r.raw)}`;
  return `${r.note}: ${r.method} ${r.path.slice(0, 300)} headers=${JSON.stringify(r.headers).slice(0, 400)}${r.body ? ` body=${show(r.body)}` : ''}`;
}
