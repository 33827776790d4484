// `svc ship`: sends the project's runs to the Control Plane now, by the path every finished run takes (shipper.ts);
// and before a command that talks to the Control Plane, the project's runs it has not heard the end of, so
// `svc runs show` finds a run made while no Control Plane ran.
import { lstatSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseFlags, type CliIo } from './io.ts';
import { FailedError, UsageError } from '../errors.ts';
import { resolveRepo } from '../engine/launch.ts';
import { runsDir, runDir, runWorktreeHolding } from '../engine/paths.ts';
import { pendingRuns } from '../engine/ship-pending.ts';
import { shipRuns } from '../engine/ship-recovery.ts';
import { LAST_WORKER_WAIT_MS } from '../engine/last-worker.ts';
import { keptLocal, listPlain, openPlainPath, skipReason, withDir } from '../engine/plain-tree.ts';
import { isValidSegment } from '../engine/ids.ts';
import { settingChoice } from '../settings-registry.ts';
import { orNull, realOrNull } from '../spawn/tree.ts';

export const HELP = `Usage: svc ship [--repo DIR] [--all] [RUN...]

Sends the runs under <repo>/.svc/runs to the Control Plane (SVC_CONTROL_URL, else server.json, else
127.0.0.1:$SVC_CONTROL_PORT), or only the RUNs named. Each run resumes from its ship.json offset; --all re-sends
everything. A run made with SVC_SHIP=0 goes only when named.
A run whose worker is still there is left to it (its worker ships it): an ended run's worker is waited for up to
10 s in all, a running run's not at all. So is one another svc ship sends. A run sent is held meanwhile: a
resume, verify or --open-pr of it waits, then is refused. Exit 1 when a run was not sent, but for one its worker
ships that no RUN named; with --all such a run counts as not sent: its worker sends only what it has not sent
before.
Token: SVC_CONTROL_TOKEN_FILE, ~/.svc/control/token (a loopback address only), or SVC_CONTROL_TOKEN.
`;

export default async function ship(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, { repo: { type: 'string' }, all: { type: 'boolean' } });
  const repo = resolveRepo(values.repo ?? process.cwd());
  const dir = runsDir(repo);
  // Never through a link, as every run folder is opened (openRunFolder): one is named, and skipped.
  const folder = openPlainPath(realOrNull(repo) ?? repo, ['.svc', 'runs']);
  const linked = 'failed' in folder && folder.kind === 'link';
  if (linked) io.stderr(`svc ship: ${dir} ${skipReason('link')}; nothing shipped\n`);
  const entries = ('failed' in folder ? [] : withDir(folder, () => listPlain(folder)))
    .filter((e) => isValidSegment(e.name) && (!positionals.length || positionals.includes(e.name)));
  for (const { name } of entries.filter((e) => e.kind === 'link')) {
    io.stderr(`svc ship: ${name}: ${join(dir, name)} ${skipReason('link')}; not shipped\n`);
  }
  const found = entries.filter((e) => e.kind === 'dir').map((e) => e.name);
  const unknown = positionals.find((run) => !found.includes(run));
  if (unknown !== undefined) throw new UsageError(`No run "${unknown}" under ${dir}`);
  // A run made with SVC_SHIP=0 was meant to stay here: only naming it sends it.
  const local = positionals.length ? [] : found.filter((run) => keptLocal(runDir(repo, run)));
  if (local.length > 0) {
    const runs = local.length === 1 ? '1 run' : `${local.length} runs`;
    io.stderr(`svc ship: ${runs} kept local (SVC_SHIP=0): svc ship RUN sends one\n`);
  }
  const runs = found.filter((run) => positionals.length ? positionals.includes(run) : !local.includes(run));
  // An ended run's worker gets the time a resume gives it to leave; a running run's ships it (shipRuns `working`).
  const { shipped, left, url, failures, working } = await shipRuns(repo, runs, io.env, {
    onSkip: (run, entry, reason) => io.stderr(`svc ship: ${run}: ${entry} ${reason}; not shipped\n`),
    workerWaitMs: LAST_WORKER_WAIT_MS, fromStart: values.all === true,
  });
  // Its worker goes on from its own ship.json: what a restored Control Plane lost of the run is not sent again by it.
  for (const { run, pid, shipping } of working) {
    const holder = shipping
      ? { is: `another svc ship (pid ${pid}) is sending it`, sends: '', gone: 'it has ended' }
      : { is: `its worker (pid ${pid}) is still there`, sends: ' and sends only what it has not sent',
        gone: 'it has left' };
    io.stderr(`svc ship: ${run}: ${values.all
      ? `not sent again from the start: ${holder.is}${holder.sends}; svc ship --all ${run} once ${holder.gone}`
      : `not shipped here: ${holder.is}${shipping ? '' : ' and ships it'}`}\n`);
  }
  // Each run refused on its own is named; the last line says how many did not go, and what ended the pass, if anything.
  for (const f of failures.filter((f) => !f.everyRun)) io.stderr(`svc ship: ${f.run}: not shipped: ${f.why}\n`);
  const ended = failures.find((f) => f.everyRun);
  const why = ended ? `: ${ended.why}` : ' (each is named above)';
  // A run its worker ships fails only the command that named it, or asked for all again (--all): asked for the
  // project's runs, it is in good hands.
  const leftToWorker = positionals.length > 0 || values.all === true ? [] : working.map((w) => w.run);
  const notSent = left.filter((run) => !leftToWorker.includes(run));
  if (notSent.length > 0) throw new FailedError(`${notSent.length} of ${runs.length} runs not sent${why}`);
  io.stdout(`Shipped ${shipped.length} run${shipped.length === 1 ? '' : 's'}${url ? ` to ${url}` : ''}\n`);
  return 0;
}

/** The folder's `.svc/ship-pending`, if it is a folder svc may look into (another user's `/.svc` is not). */
function pendingFolderIn(dir: string): boolean {
  return orNull(() => lstatSync(join(dir, '.svc', 'ship-pending'), { throwIfNoEntry: false })?.isDirectory()) === true;
}

/** The nearest folder from `cwd` up whose `.svc/ship-pending` lists a run to ship; null when there is none. From
 * inside a run's worktree, the walk starts at its project: the agent wrote the worktree, a `.svc` there too. */
export function projectWithPending(cwd: string): string | null {
  const start = runWorktreeHolding(cwd) ?? runWorktreeHolding(realOrNull(cwd) ?? cwd);
  for (let dir = resolve(start?.project ?? cwd); ; dir = dirname(dir)) {
    if (pendingFolderIn(dir)) {
      return pendingRuns(dir).length ? dir : null;
    }
    if (dir === dirname(dir)) return null;
  }
}

/** The project's pending runs sent within `budgetMs`, said on stderr; never fails the command it runs before. */
export async function sendPendingRuns(io: CliIo, cwd: string, budgetMs = 3_000): Promise<void> {
  // A bad SVC_SHIP sends nothing: the commands that make a run refuse it (exit 2), and a stop must still work.
  if (orNull(() => settingChoice(io.env, 'SVC_SHIP')) !== '1') return;
  const repo = projectWithPending(cwd);
  if (!repo) return;
  try {
    const { shipped, left, url, failures } = await shipRuns(repo, pendingRuns(repo), io.env, { budgetMs });
    const refused = failures.filter((f) => !f.everyRun);
    const waiting = left.length - refused.length;
    if (shipped.length) {
      io.stderr(`svc: sent ${shipped.length} run${shipped.length === 1 ? '' : 's'} to the Control Plane at ${url} ` +
        `that had not reached it before${waiting ? ` (${waiting} still waiting)` : ''}\n`);
    }
    // A run refused on its own would otherwise wait unseen: said once, its marker gone (shipRuns), so it is not said
    // again before every later command. One that nothing could reach says nothing, as before.
    for (const f of refused) {
      io.stderr(`svc: run ${f.run} was not sent: ${f.why}; not tried again before each command ` +
        '(`svc ship` tries it)\n');
    }
  } catch {
    // a Control Plane that is down, or a project svc cannot read: the marker stays for the next command
  }
}
