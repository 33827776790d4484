// The one recovery of shipping: the runs a project marks as not yet shipped (ship-pending.ts) are sent by the next svc
// command in it, or by `svc ship`, with the run's own shipper (shipper.ts). It never ships a run whose worker is still
// there (that worker's live loop is its only sender), nor one another shipper holds; and it holds the run it ships
// (ship-hold.ts), so no resume, verify or --open-pr starts a second sender of it meanwhile.
import { lstatSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { runDir } from './paths.ts';
import { holderOf, workerStillThere } from './last-worker.ts';
import { whileShipping, type RunHolder } from './ship-hold.ts';
import { RunBeingTakenError } from './run-take.ts';
import { readOwnObject } from './plain-tree.ts';
import { createShipper, type ShipFailure } from './shipper.ts';
import { clearPending } from './ship-pending.ts';

/** The most of a state.json read to find whether its worker is still there. */
const MAX_STATE = 1024 * 1024;

/**
 * Ships `runs` while `budgetMs` lasts, each whole one losing its marker. A run refused on its own (403
 * forbidden_run, a bad batch, an unreadable folder) holds back no other: each is in `failures`, and loses its marker
 * too, since it would be refused again before every later command (`svc ship` still tries it). Only a failure every
 * run would meet now (failsEveryRun) ends the pass there, every marker kept. A run whose worker is still there
 * (last-worker.ts) is its worker's to ship, one another shipper holds (ship-hold.ts) is that one's: it is in
 * `working`, its marker and ship.json as they were.
 */
export async function shipRuns(
  repo: string, runs: string[], env: NodeJS.ProcessEnv,
  opts: {
    budgetMs?: number; onSkip?: (run: string, entry: string, reason: string) => void;
    /** How long in all the pass waits for the workers of ended runs to leave (`svc ship`); none by default. */
    workerWaitMs?: number;
    /** Each run sent whole again, its ship.json forgotten (`svc ship --all`). */
    fromStart?: boolean;
  } = {},
): Promise<{
  shipped: string[]; left: string[]; url: string | null; failures: Array<ShipFailure & { run: string }>;
  working: Array<{ run: string } & RunHolder>;
}> {
  const shipped: string[] = [];
  const failures: Array<ShipFailure & { run: string }> = [];
  const working: Array<{ run: string } & RunHolder> = [];
  let url: string | null = null;
  const deadline = performance.now() + (opts.budgetMs ?? Infinity);
  const waitsUntil = performance.now() + (opts.workerWaitMs ?? 0);
  for (const run of runs) {
    if (performance.now() > deadline) break;
    const dir = runDir(repo, run);
    // Its worker ships it, and clears its pid only after its last ship (run-context.ts leave): a second shipper
    // meanwhile would roll its ship.json back and send batches out of its order. The marker stays for a later pass.
    const read = () => {
      const state = readOwnObject(dir, 'state.json', MAX_STATE);
      return state && { run, pid: state.pid, proc_start: state.proc_start, verifier: state.verifier,
        status: state.status };
    };
    const holder = await workerStillThere(read, Math.max(0, waitsUntil - performance.now()), repo, dir);
    if (holder !== null) {
      working.push({ run, ...holder });
      continue;
    }
    const shipper = createShipper(dir, env, undefined, opts.onSkip && ((entry, why) => opts.onSkip!(run, entry, why)));
    url = shipper.url;
    // Looked at again under the take lock: a resume that took the run since the wait above ships it with its worker.
    const sent = await whileShipping(dir, run, () => {
      const state = read();
      return state && holderOf(state, repo, dir);
    }, () => {
      // Never through a linked run folder (the shipper refuses one and says so).
      if (opts.fromStart && lstatSync(dir, { throwIfNoEntry: false })?.isDirectory()) {
        rmSync(join(dir, 'ship.json'), { force: true });
      }
      return shipper.flush();
    }).catch((err: unknown) => {
      // Another command taking the run this very moment: its marker stays, for a later pass.
      if (err instanceof RunBeingTakenError) return { taken: err.message };
      throw err;
    });
    if ('taken' in sent) {
      failures.push({ run, why: sent.taken, everyRun: false });
      continue;
    }
    if ('holder' in sent) {
      working.push({ run, ...sent.holder });
      continue;
    }
    const failure = sent.shipped;
    if (failure !== null) failures.push({ run, ...failure });
    if (failure?.everyRun) break;
    clearPending(dir);
    if (failure === null) shipped.push(run);
  }
  return { shipped, left: runs.filter((r) => !shipped.includes(r)), url, failures, working };
}
