// A minimal SSE reader over fetch for tests: collects parsed frames and lets a test wait for a count with a deadline.
export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

export interface SseClient {
  status: number;
  headers: Headers;
  frames: SseFrame[];
  /** Frames that carry data (events), in arrival order. */
  events(): SseFrame[];
  waitFor(predicate: (c: SseClient) => boolean, timeoutMs?: number): Promise<void>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
  /** Starts reading a client opened with `paused: true` (until then the server meets TCP backpressure). */
  resume(): void;
}

export async function openSseClient(url: string, headers: Record<string, string> = {}, opts: { paused?: boolean } = {}): Promise<SseClient> {
  let resume = (): void => {};
  const gate = opts.paused ? new Promise<void>((r) => (resume = r)) : Promise.resolve();
  const controller = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const frames: SseFrame[] = [];
  const waiters = new Set<() => void>();
  let buffer = '';
  const decoder = new TextDecoder();
  function parse(block: string): void {
    const frame: SseFrame = {};
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) frame.comment = line.slice(1).trim();
      else {
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'id' || field === 'event') frame[field] = value;
        else if (field === 'data') frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`;
      }
    }
    frames.push(frame);
  }
  const ended = (async () => {
    if (!res.body) return;
    await gate;
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          parse(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
        for (const w of [...waiters]) w();
      }
    } catch {
      // aborted by close()
    } finally {
      for (const w of [...waiters]) w();
    }
  })();
  const client: SseClient = {
    status: res.status,
    headers: res.headers,
    frames,
    events: () => frames.filter((f) => f.data !== undefined && f.id !== undefined),
    waitFor(predicate, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        let finished = false;
        const check = (): void => {
          if (finished) return;
          if (predicate(client)) {
            finished = true;
            waiters.delete(check);
            clearTimeout(timer);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          finished = true;
          waiters.delete(check);
          reject(new Error(`SSE wait timed out with ${client.events().length} events`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    ended,
    close() {
      controller.abort();
    },
    resume: () => resume(),
  };
  return client;
}
