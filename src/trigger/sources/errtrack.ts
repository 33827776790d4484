// POST /errtrack (Sentry): an alert's brief is its text plus release, environment, newest deploy record and the
// culprit file's last author (docs/trigger.md "Briefs").
import type { Obj } from '../../json-value.ts';
import { list, objOrNull as obj, textOf } from '../../untrusted.ts';
import { latestDeployLine } from '../../engine/deploys.ts';
import { runCollect } from '../../spawn/start.ts';
import { gitArgv, gitExtraEnv } from '../../engine/git.ts';
import { realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { pinnedIn, type Decision, type Received, type TCtx } from '../intake.ts';

type ErrtrackAlert = Exclude<ReturnType<typeof readErrtrackAlert>, { skip: string }>;

/** An event carries its project only as a number; its API `url` names the slug: `/projects/<org>/<slug>/events/`. */
function slugFromUrl(url: string | null): string | null {
  return url ? (/\/projects\/[^/]+\/([^/?#]+)\/events\//.exec(url)?.[1] ?? null) : null;
}

function tag(event: Obj, name: string): string | null {
  if (!Array.isArray(event.tags)) return null;
  for (const t of event.tags) if (Array.isArray(t) && t[0] === name) return textOf(t[1]);
  return null;
}

/** In-app frames first, innermost (last) first, then metadata and culprit. */
function frameFiles(event: Obj): string[] {
  const inApp: string[] = [];
  const other: string[] = [];
  const values = obj(event.exception)?.values;
  for (const v of list(values)) {
    const frames = obj(obj(v)?.stacktrace)?.frames;
    for (const f of list(frames).slice().reverse()) {
      const frame = obj(f);
      const name = textOf(frame?.filename) ?? textOf(frame?.abs_path);
      if (name) (frame?.in_app === true ? inApp : other).push(name);
    }
  }
  return [...inApp, ...other];
}

/** The key every delivery about one Sentry issue claims: its `issue` `created` and its events' alerts (which Sentry
 * sends for a new issue too) start one job between them (docs/trigger.md "Dedupe and replay"). */
function issueKeys(issueId: string | null): string[] {
  return issueId ? [`errtrack:issue:${issueId}`] : [];
}

/** An alert, or why it is skipped; its `keys` are stable across retries, `projectSlug` routes it (errtrack=…). */
export function readErrtrackAlert(resource: string | undefined, payload: Obj) {
  const action = textOf(payload.action);
  const data = obj(payload.data) ?? {};
  const event = obj(data.event);
  const issue = obj(data.issue);
  if (event && (resource === undefined || resource === 'event_alert')) {
    const metadata = obj(event.metadata) ?? {};
    const release = obj(event.release) ? textOf(obj(event.release)!.version) : textOf(event.release);
    const rule = textOf(data.triggered_rule) ?? '';
    return {
      keys: [`errtrack:event:${textOf(event.event_id) ?? 'none'}:${rule}`, ...issueKeys(textOf(event.issue_id))],
      label: textOf(event.issue_id) ? `issue ${textOf(event.issue_id)}` : 'event',
      title: textOf(event.title) ?? textOf(metadata.value) ?? 'unknown error',
      culprit: textOf(event.culprit),
      release,
      environment: textOf(event.environment) ?? tag(event, 'environment'),
      fileCandidates: [...frameFiles(event), ...[textOf(metadata.filename)].filter((x): x is string => x !== null)],
      // From the event's API address, which Sentry writes; never a field the reporting SDK could have set.
      projectSlug: slugFromUrl(textOf(event.url)),
    };
  }
  if (issue && (resource === undefined || resource === 'issue')) {
    if (action !== 'created') return { skip: `issue action "${action ?? ''}" does not start a job` } as const;
    const metadata = obj(issue.metadata) ?? {};
    return {
      keys: issueKeys(textOf(issue.id)),
      label: textOf(issue.shortId) ?? `issue ${textOf(issue.id) ?? ''}`,
      title: textOf(issue.title) ?? 'unknown error',
      culprit: textOf(issue.culprit),
      release: null,
      environment: null,
      fileCandidates: [textOf(metadata.filename)].filter((x): x is string => x !== null),
      projectSlug: textOf(obj(issue.project)?.slug),
    };
  }
  return { skip: `resource "${resource ?? 'unknown'}" does not start a job` } as const;
}

/** A stack-frame filename as a file inside repoDir (links resolved before the containment check), or null. */
export async function resolveInsideRepo(repoDir: string, candidate: string): Promise<string | null> {
  if (
    !candidate || candidate.length > 1024 || candidate.includes('\0') ||
    /^[a-z][a-z0-9+.-]*:/i.test(candidate) || candidate.startsWith('<')
  ) {
    return null;
  }
  const root = await realpath(repoDir).catch(() => null);
  if (root === null) return null;
  const tries = isAbsolute(candidate) ? [candidate, resolve(root, `.${candidate}`)] : [resolve(root, candidate)];
  for (const path of tries) {
    try {
      const real = await realpath(path);
      if (!real.startsWith(root + sep)) continue;
      const rel = relative(root, real);
      if (rel.split(sep)[0] === '.git' || !(await stat(real)).isFile()) continue;
      return rel;
    } catch {
      // not there: the next reading
    }
  }
  return null;
}

/** The first candidate that resolves inside the repo, with its last commit's author (`git log`, no shell, 3 s). */
async function culpritAuthor(repoDir: string, candidates: readonly string[]) {
  for (const candidate of candidates.slice(0, 20)) {
    const file = await resolveInsideRepo(repoDir, candidate);
    if (!file) continue;
    const base = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/' };
    const log = await runCollect(gitArgv(['--literal-pathspecs', 'log', '-1', '--format=%an', '--', file]), {
      kind: 'probe', base, extra: gitExtraEnv(), cwd: repoDir, timeout: 3000, maxBuffer: 64 * 1024,
    });
    const author = log.error ? null : log.stdout.trim();
    return author ? { file, author } : null;
  }
  return null;
}

/** The brief's text; `repoDir` (the routed checkout) adds the deploy line and culprit author, null for a managed
 * clone. */
export async function buildErrtrackBrief(alert: ErrtrackAlert, repoDir: string | null): Promise<string> {
  const parts = [`Fix errtrack ${alert.label}: ${alert.title}`];
  if (alert.culprit) parts.push(`culprit ${alert.culprit}`);
  if (alert.release) parts.push(`release ${alert.release}`);
  if (alert.environment) parts.push(`environment ${alert.environment}`);
  const deploy = repoDir ? await latestDeployLine(repoDir) : null;
  if (deploy) parts.push(deploy);
  const author = repoDir ? await culpritAuthor(repoDir, alert.fileCandidates) : null;
  if (author) parts.push(`last commit to ${author.file} by ${author.author}`);
  return parts.join('; ');
}

export function readErrtrack(ctx: TCtx, { body, resource }: Received): Decision {
  const alert = readErrtrackAlert(resource, body);
  if (alert.skip !== undefined) return { kind: 'skip', reason: alert.skip };
  // Every resource's body names the Sentry installation (one per organization) that sent it, and only that.
  const installation = textOf(obj(body.installation)?.uuid)?.toLowerCase();
  const stranger = !pinnedIn(ctx.deps.settings.orgs.errtrack, installation);
  // Reads the checkout's deploy records and runs `git log`: only once the cheap checks passed.
  const prepare = (repo: { checkout: string | null }) => buildErrtrackBrief(alert, repo.checkout);
  return { kind: 'job', route: alert.projectSlug, keys: alert.keys, stranger, prepare };
}
