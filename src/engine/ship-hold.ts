// A run held by the process that ships it (`svc ship`, the pending pass before a command): taken under the run's take
// lock (run-take.ts) as a worker takes it, so no resume, verify, --open-pr or checkout rename takes the run while it
// is sent, and no second shipper rolls its ship.json back. Must not: hold the take lock across the ship, outlive the
// ship (thrown or signalled), or count a holder that is gone.
import { unlinkSync } from 'node:fs';
import { holderAlive } from '../proc-stat.ts';
import { createWith, readLock, RunBeingTakenError, takeRun, unlinkLock } from './run-take.ts';
import { onEndSignal } from './run-context.ts';
import { pathIn, withDir } from './plain-tree.ts';
import { openRunDir, UnsafePathError } from './safe-fs.ts';
import { orNull } from '../spawn/tree.ts';

/** The hold's name in the run folder: the shipper's pid and start time, as the take lock holds its holder's. */
export const SHIP_HOLD = 'ship.hold';

/** Who holds a run: a worker of it (proc-group.ts liveWorkerOf), or a process shipping it (`shipping`). */
export interface RunHolder {
  pid: number;
  shipping: boolean;
}

/** The pid of the live process shipping the run in `dir`, else null: none, or one gone (the lock's rule). */
export function shipperOf(dir: string): number | null {
  const found = orNull(() => withDir(openRunDir(dir), (folder) => readLock(folder, SHIP_HOLD)));
  return found?.holder && holderAlive(found.holder) ? found.holder.pid : null;
}

/**
 * `ship` run while this process holds the run in `dir`: taken under the run's take lock when `heldBy` (read under it)
 * names no holder, released once `ship` has settled, or on a signal that ends the process. Else `ship` is not run and
 * the holder is answered. A RunBeingTakenError: another command is taking the run this very moment.
 */
export async function whileShipping<T>(
  dir: string, run: string, heldBy: () => RunHolder | null, ship: () => Promise<T>,
): Promise<{ shipped: T } | { holder: RunHolder }> {
  let holder: RunHolder | null;
  try {
    holder = takeRun(dir, run, () => heldBy() ?? hold(dir, run));
  } catch (err) {
    // A run folder nothing can take (a link, gone) is one the shipper refuses too, in its own words: nothing is sent.
    if (!(err instanceof UnsafePathError)) throw err;
    return { shipped: await ship() };
  }
  if (holder !== null) return { holder };
  const offSignal = onEndSignal((signal) => {
    release(dir);
    offSignal();
    // Ended as it would have been without this handler, unless the command has handlers of its own for the signal.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  });
  try {
    return { shipped: await ship() };
  } finally {
    offSignal();
    release(dir);
  }
}

/** Records this process as the run's shipper; null (no holder) once it has. Under the take lock, which every maker of
 * a hold holds: a hold found here has a holder that is gone (heldBy asked first), and is cleared. */
function hold(dir: string, run: string): null {
  withDir(openRunDir(dir), (folder) => {
    // A folder there, which no shipper could clear, refuses the ship as it refuses every take (LockBlockedError).
    unlinkLock(folder, SHIP_HOLD, run);
    if (!createWith(folder, SHIP_HOLD)) throw new RunBeingTakenError(`Run ${run} is being shipped: try again`);
  });
  return null;
}

/** The hold removed if it is this process's: only its maker, or a clearer of a gone one, removes it. */
function release(dir: string): void {
  orNull(() => withDir(openRunDir(dir), (folder) => {
    if (readLock(folder, SHIP_HOLD)?.holder?.pid === process.pid) unlinkSync(pathIn(folder, SHIP_HOLD));
  }));
}
