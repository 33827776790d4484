// A Control Plane's ingest on loopback that holds the answer to the batches carrying a failed run while a test says so:
// the slow ship of a worker's end, or of `svc ship`, made real. Must not: answer anything but /v1/ingest.
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import { makeRepo, processesMentioning, FAILS_ONCE, GIT_ENV } from '../engine/fixtures.ts';

/** One ingest batch as the stand-in saw it. */
export interface Batch {
  arrived: number;
  answered: number;
  run: unknown;
  status: unknown;
  seqs: unknown[];
  /** It carries the run.status line a resume writes when it queues the run again. */
  resumed: boolean;
}

/** Rejects after `ms` naming `what`: no step of these tests can hang. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** A Control Plane's ingest that answers at once, but for a batch carrying a `failed` run while `hold` says so. */
export async function standInControl() {
  const seen: Batch[] = [];
  const held: Array<() => void> = [];
  /** `ms`: the first such batch answered that long after it came; `until-released`: each answered by release(). */
  let hold: { ms: number } | 'until-released' | null = null;
  let onHeld: (() => void) | null = null;
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      if (req.url !== '/v1/ingest') return void answer(res, 404, { error: { code: 'not_found', message: req.url } });
      const batch = JSON.parse(body) as {
        runs?: Array<{ run?: unknown; status?: unknown }>; events?: Array<Record<string, any>>;
      };
      const events = batch.events ?? [];
      const entry: Batch = {
        arrived: Date.now(), answered: NaN, run: batch.runs?.[0]?.run, status: batch.runs?.[0]?.status,
        seqs: events.map((e) => e.seq),
        resumed: events.some((e) => e.kind === 'run.status' && e.data?.resumed === true),
      };
      seen.push(entry);
      const reply = () => {
        entry.answered = Date.now();
        answer(res, 200, { runs: 1, events: events.length, duplicates: 0, artifacts: 0, control: [] });
      };
      if (entry.status !== 'failed' || hold === null) return reply();
      onHeld?.();
      if (hold === 'until-released') return void held.push(reply);
      // Only the first: the old worker's, which its last ship then waits behind.
      setTimeout(reply, hold.ms);
      hold = null;
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  return {
    url: `http://127.0.0.1:${address.port}`,
    seen,
    /** Holds the batches carrying the run's failure from now on; resolves once the first of them came. */
    holdFailed(how: { ms: number } | 'until-released'): Promise<void> {
      hold = how;
      return new Promise((resolve) => (onHeld = () => resolve()));
    },
    release(): void {
      hold = null;
      for (const reply of held.splice(0)) reply();
    },
    close(): void {
      server.closeAllConnections();
      server.close();
    },
  };
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  // A request whose sender timed out and went: nothing to answer.
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** A project whose runs fail once and ship to a stand-in ingest; `cleanup` ends the processes of `runs` too. */
export async function shippingProject() {
  const repo = makeRepo({ providers: { 'fails-once': FAILS_ONCE } });
  const control = await standInControl();
  const env: NodeJS.ProcessEnv = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: control.url,
    SVC_SHIP: '1', SVC_SANDBOX: 'none' };
  const cleanup = (runs: string[]) => {
    control.close();
    for (const run of runs) for (const pid of processesMentioning(run)) process.kill(pid, 'SIGKILL');
    repo.cleanup();
  };
  return { repo, control, env, cleanup };
}
