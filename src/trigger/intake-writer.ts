// Main-thread side of the intake writer (intake-writer-worker.ts): a worker thread with its own connection commits
// the batches of verified deliveries, so node:sqlite's synchronous statements and COMMIT no longer block the event
// loop that reads, verifies and parses the next deliveries. A batch's promise settles only after its COMMIT
// returned on the worker; the queue answers 2xx only then. If the thread dies, every batch it held is rejected
// (answered 500: the sender retries, and dedupe answers "duplicate" if it had committed) and the queue goes back
// to committing on the main thread.
import { UnavailableError } from '../errors.ts';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../log.ts';
import type { EnqueueRequest } from './delivery.ts';
import type { PlaceOutcome, Precheck } from './queue-place.ts';
import type { QueueShares } from './queue-shares.ts';
import type { PruneCounts, TriggerRetention } from './retention.ts';

const WORKER = new URL(`./intake-writer-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

export type WriterMessage =
  | { type: 'batch'; id: number; now: number; shares: QueueShares; requests: EnqueueRequest[] }
  | { type: 'precheck'; id: number; origin: string; keys: string[]; shares: QueueShares }
  | { type: 'prune'; id: number; now: number; retention: TriggerRetention }
  | { type: 'close' };

type Reply =
  | { type: 'ready' }
  | { type: 'batch'; id: number; outcomes: PlaceOutcome[] }
  | { type: 'precheck'; id: number; result: Precheck }
  | ({ type: 'prune'; id: number; error?: string } & Partial<PruneCounts> & { done?: boolean });

/** The writer thread is gone (crashed, or closed): whether its last batch committed is unknown. */
export class IntakeWriterGoneError extends UnavailableError {
  constructor(reason: string) {
    super(`intake writer thread unavailable: ${reason}`);
  }
}

export interface IntakeWriter {
  placeBatch(requests: EnqueueRequest[], now: number, shares: QueueShares): Promise<PlaceOutcome[]>;
  /** The cheap checks (queue-place.ts precheck) on the thread, whose connection holds the dedupe index. */
  precheck(origin: string, keys: readonly string[], shares: QueueShares): Promise<Precheck>;
  prune(retention: TriggerRetention, now: number): Promise<PruneCounts & { done: boolean }>;
  /** Whether batches still go to the thread. */
  alive(): boolean;
  /** Lets the thread finish what it holds, closes its connection and waits for it to exit. */
  close(): Promise<void>;
}

/** A request to the thread before ask() numbers it (Omit over a union would merge its members). */
type Ask = WriterMessage extends infer M ? (M extends { id: number } ? Omit<M, 'id'> : never) : never;

type Waiter = { resolve: (value: Reply) => void; reject: (err: Error) => void };

/** Starts the thread and waits until its connection is open; rejects if it cannot start. */
export function startIntakeWriter(path: string, log: Logger): Promise<IntakeWriter> {
  const worker = new Worker(WORKER, { workerData: { path } });
  // Never what keeps the process alive: main.ts closes it on shutdown, after the server drained.
  worker.unref();
  const waiting = new Map<number, Waiter>();
  let nextId = 1;
  let gone: IntakeWriterGoneError | undefined;
  let closing = false;

  function fail(reason: string): void {
    if (gone) return;
    gone = new IntakeWriterGoneError(reason);
    if (!closing) log.error('intake writer thread failed; committing deliveries on the main thread', { reason });
    for (const w of waiting.values()) w.reject(gone);
    waiting.clear();
  }

  function ask(message: Ask): Promise<Reply> {
    if (gone) return Promise.reject(gone);
    const id = nextId++;
    return new Promise<Reply>((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      worker.postMessage({ ...message, id });
    });
  }

  const writer: IntakeWriter = {
    async placeBatch(requests, now, shares) {
      const reply = await ask({ type: 'batch', now, shares, requests });
      return (reply as Extract<Reply, { type: 'batch' }>).outcomes;
    },
    async precheck(origin, keys, shares) {
      const reply = await ask({ type: 'precheck', origin, keys: [...keys], shares });
      return (reply as Extract<Reply, { type: 'precheck' }>).result;
    },
    async prune(retention, now) {
      const reply = (await ask({ type: 'prune', now, retention })) as Extract<Reply, { type: 'prune' }>;
      if (reply.error !== undefined) throw new Error(reply.error);
      return { dedupeKeys: reply.dedupeKeys ?? 0, jobs: reply.jobs ?? 0, done: reply.done ?? true };
    },
    alive() {
      return gone === undefined;
    },
    async close() {
      if (closing) return;
      closing = true;
      if (gone) return;
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      // Messages are handled in order: every batch posted before this one is committed and answered first.
      worker.postMessage({ type: 'close' } satisfies WriterMessage);
      await exited;
    },
  };

  return new Promise((resolve, reject) => {
    worker.on('message', (reply: Reply) => {
      if (reply.type === 'ready') {
        resolve(writer);
        return;
      }
      const w = waiting.get(reply.id);
      waiting.delete(reply.id);
      w?.resolve(reply);
    });
    worker.on('error', (err) => {
      fail(err.message);
      reject(err);
    });
    worker.on('exit', (code) => {
      fail(`exited (${code})`);
      reject(new IntakeWriterGoneError(`exited (${code}) while starting`));
    });
  });
}
