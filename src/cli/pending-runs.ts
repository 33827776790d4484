// Before a command that talks to the Control Plane: the project's runs it has not heard the end of are sent first
// (src/engine/shipper.ts), so `svc runs show` finds a run made while no Control Plane ran.
import { lstatSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { CliIo } from './io.ts';
import { pendingRuns, shipRuns } from '../engine/shipper.ts';

/** The nearest folder from `cwd` up whose `.svc/ship-pending` lists a run; null when there is none. */
function projectWithPending(cwd: string): string | null {
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    if (lstatSync(join(dir, '.svc', 'ship-pending'), { throwIfNoEntry: false })?.isDirectory()) {
      return pendingRuns(dir).length ? dir : null;
    }
    if (dir === dirname(dir)) return null;
  }
}

/** Sends them within `budgetMs`, says so on stderr, and never fails the command it runs before. */
export async function sendPendingRuns(io: CliIo, cwd: string, budgetMs = 3_000): Promise<void> {
  if (io.env.SVC_SHIP === '0') return;
  const repo = projectWithPending(cwd);
  if (!repo) return;
  try {
    const { shipped, left, url } = await shipRuns(repo, pendingRuns(repo), io.env, { budgetMs });
    if (shipped.length) {
      io.stderr(`svc: sent ${shipped.length} run${shipped.length === 1 ? '' : 's'} the Control Plane at ${url} ` +
        `had not seen${left.length ? ` (${left.length} still waiting)` : ''}\n`);
    }
  } catch {
    // a Control Plane that is down, or a project svc cannot read: the marker stays for the next command
  }
}
