// `svc prune`: what ended runs leave behind in a project (src/engine/prune.ts) and, with --checkouts, the trigger's
// managed job checkouts (src/trigger/checkout-prune.ts).
import { resolve } from 'node:path';
import { parseFlags, type CliIo } from './io.ts';
import { UsageError, FailedError, errorMessage } from '../errors.ts';
import { repoRoot } from '../engine/git.ts';
import { planProjectPrune, removeProjectTarget, type PrunePlan, type PruneTarget } from '../engine/prune.ts';
import { planCheckoutPrune, removeCheckout } from '../trigger/checkout-prune.ts';
import { checkoutsDirOf, triggerDbOf } from '../trigger/settings.ts';
import { safeJson } from '../safe-json.ts';

export const HELP = `Usage: svc prune [--repo DIR]... [--checkouts] [--older-than AGE] [--dry-run] [--json]

Removes what runs that have ended leave behind, once they ended longer ago than AGE:
  - in the project (the git repository around the current folder, or each --repo DIR):
    worktrees .svc/worktrees/<run> and local branches svc/<run> that svc made for its runs;
  - with --checkouts: the trigger's managed job checkouts ($SVC_TRIGGER_CHECKOUTS, default
    ~/.local/share/svc/checkouts/<owner>/<name>/<job>), of jobs its queue ($SVC_TRIGGER_DB)
    no longer has queued or running.
Never touched: anything of a run that has not ended (queued, running, blocked, stopping: stop
it first), run folders (.svc/runs/<run>, the runs' records and receipts), branches on remotes,
the trigger's mirrors, and a checkout whose runs have not reached the Control Plane yet.
Never followed: a symbolic link anywhere on the way (.svc, .svc/worktrees, a checkout's folders).
Ignored: run folders and pending markers git tracks (a repository's content, not svc's runs).

  --older-than AGE   0, or a number with s, m, h, d or w (default 7d)
  --dry-run          list what would be removed and remove nothing
  --json             print {"removed","kept"} (or {"would_remove","kept"}) as JSON
`;

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

function parseAge(text: string): number {
  const m = /^(\d{1,6})([smhdw])?$/.exec(text);
  if (!m || (m[2] === undefined && m[1] !== '0')) {
    throw new UsageError(`Invalid --older-than "${text}" (expected 0 or a number with s, m, h, d or w, e.g. 7d)`);
  }
  return Number(m[1]) * (m[2] ? UNITS[m[2]]! : 0);
}

function line(verb: string, t: PruneTarget): string {
  return `${verb} ${t.kind} ${t.name} (${t.reason})\n`;
}

export default async function prune(io: CliIo): Promise<number> {
  const { values } = parseFlags(io.argv, {
    repo: { type: 'string', multiple: true },
    checkouts: { type: 'boolean' },
    'older-than': { type: 'string' },
    'dry-run': { type: 'boolean' },
    json: { type: 'boolean' },
  }, 0);
  const olderThan = parseAge(values['older-than'] ?? '7d');
  const dryRun = values['dry-run'] === true;
  const repos = (values.repo ?? []).map((dir) => {
    const root = repoRoot(resolve(dir));
    if (root === null) throw new UsageError(`--repo ${dir} is not a git repository`);
    return root;
  });
  const here = repos.length === 0 ? repoRoot(process.cwd()) : null;
  if (here !== null) repos.push(here);
  else if (repos.length === 0 && !values.checkouts) {
    throw new UsageError('Nothing to prune here: run it in a project, or give --repo DIR or --checkouts');
  }
  // Every plan is made before anything is removed: a bad --repo changes nothing.
  const plans: Array<{ plan: PrunePlan; remove: (t: PruneTarget) => void }> = repos.map((repo) => ({
    plan: planProjectPrune(repo, olderThan), remove: removeProjectTarget,
  }));
  if (values.checkouts) {
    const checkouts = checkoutsDirOf(io.env, process.cwd());
    const plan = planCheckoutPrune(checkouts, triggerDbOf(io.env, process.cwd()), olderThan);
    plans.push({ plan, remove: (t) => removeCheckout(checkouts, t.name) });
  }
  const removed: PruneTarget[] = [];
  const kept: PruneTarget[] = [];
  let failed = 0;
  for (const { plan, remove } of plans) {
    kept.push(...plan.keep);
    for (const target of plan.remove) {
      try {
        if (!dryRun) remove(target);
        removed.push(target);
      } catch (err) {
        failed++;
        io.stderr(`svc prune: could not remove ${target.kind} ${target.name}: ${errorMessage(err)}\n`);
      }
    }
  }
  if (values.json) {
    io.stdout(`${safeJson({ [dryRun ? 'would_remove' : 'removed']: removed, kept }, 2)}\n`);
  } else {
    for (const t of removed) io.stdout(line(dryRun ? 'Would remove' : 'Removed', t));
    for (const t of kept) io.stdout(line('Kept', t));
    if (removed.length === 0 && kept.length === 0) io.stdout('Nothing to prune\n');
  }
  if (failed) throw new FailedError(`${failed} could not be removed`);
  return 0;
}
