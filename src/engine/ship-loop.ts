// When a run ships, and the one recovery (docs/engine.md "Shipping to the Control Plane").
import { rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { plainSubdir, writeNoFollow } from './safe-fs.ts';
import { isValidSegment } from './ids.ts';
import { runDir } from './paths.ts';
import { plainEntries } from './plain-tree.ts';
import { createShipper, type Shipper } from './shipper.ts';

/** The project of a run folder `<repo>/.svc/runs/<run>`. */
function projectOf(dir: string): string {
  return dirname(dirname(dirname(dir)));
}

export function markPending(dir: string): void {
  try {
    writeNoFollow(join(plainSubdir(projectOf(dir), join('.svc', 'ship-pending')), basename(dir)), '');
  } catch {
    // a project svc cannot write: `svc ship` remains the way
  }
}

function clearPending(dir: string): void {
  rmSync(join(projectOf(dir), '.svc', 'ship-pending', basename(dir)), { force: true });
}

/** `changed()`: something of the run changed, so ship it soon. */
export function createShipLoop(
  shipper: Shipper, dir: string, say: (text: string) => void,
): { changed(): void; close(): Promise<void> } {
  let dirty = true;
  /** A flush is running or backing off: the next one is already timed. Otherwise, while dirty, one is due in 200 ms. */
  let held = false;
  let backoff = 0;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let shipping: Promise<unknown> = Promise.resolve();

  function shipIn(ms: number): void {
    clearTimeout(timer);
    timer = setTimeout(() => {
      dirty = false;
      held = true;
      shipping = shipper.flush().then((ok) => {
        held = !ok;
        backoff = ok ? 0 : Math.min(Math.max(backoff * 2, 250), 30_000);
        if (!closed) shipIn(backoff || (dirty ? 200 : 2_000));
      });
    }, ms).unref();
  }
  shipIn(200);

  return {
    changed() {
      if (dirty || closed) return;
      dirty = true;
      if (!held) shipIn(200);
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await shipping;
      for (const wait of [0, 250, 1_000]) {
        if (wait) await sleep(wait);
        if (await shipper.flush()) {
          clearPending(dir);
          return;
        }
      }
      markPending(dir);
      const why = shipper.failure() ?? `no Control Plane answered at ${shipper.url}`;
      say(`not shipped: ${why}; the next svc command in this project that reaches one sends this run ` +
        '(or run `svc ship`)');
    },
  };
}

/** Runs waiting to be shipped in `repo`, oldest name first. */
export function pendingRuns(repo: string): string[] {
  return plainEntries(repo, ['.svc', 'ship-pending'], 'file').filter(isValidSegment);
}

/** Ships `runs` while `budgetMs` lasts, each whole one losing its marker; stops at the first failure. */
export async function shipRuns(
  repo: string, runs: string[], env: NodeJS.ProcessEnv,
  opts: { budgetMs?: number; onSkip?: (run: string, entry: string, reason: string) => void } = {},
): Promise<{ shipped: string[]; left: string[]; url: string | null; failure: string | null }> {
  const shipped: string[] = [];
  let url: string | null = null;
  let failure: string | null = null;
  const deadline = performance.now() + (opts.budgetMs ?? Infinity);
  for (const run of runs) {
    if (performance.now() > deadline) break;
    const dir = runDir(repo, run);
    const shipper = createShipper(dir, env, undefined, opts.onSkip && ((entry, why) => opts.onSkip!(run, entry, why)));
    url = shipper.url;
    if (!(await shipper.flush())) {
      failure = shipper.failure();
      break;
    }
    clearPending(dir);
    shipped.push(run);
  }
  return { shipped, left: runs.filter((r) => !shipped.includes(r)), url, failure };
}
