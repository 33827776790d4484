// The run's input (DESIGN §6) and the task spec and brief it becomes (the prompt around it: provider-session.ts).
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { basename, relative, resolve } from 'node:path';
import { BadInputError, errorMessage } from '../errors.ts';
import type { InputKind } from './run-state.ts';
import { errtrackSpec, fetchIssueExport, fetchJson } from './errtrack-spec.ts';
import { fence, markdownSpec } from './text.ts';
import { oneLine } from '../one-line.ts';
import type { Obj } from '../json-value.ts';
import { obj, objOrNull, textOf, tryParseJson } from '../untrusted.ts';
import { realOrNull } from '../spawn/tree.ts';
import { within } from '../spawn/bwrap-argv.ts';
import { openPlainDirIn, openPlainPath, pathIn, readPlainIn, type PlainDir } from './plain-tree.ts';
import { trackedOrAll } from './run-state.ts';
import { tryGit } from './git.ts';
import { TRACKERA_INBOX } from './paths.ts';
import { withDir } from './safe-fs.ts';

/** `value`: the absolute path for files, the URL, the tracker id, or the brief text. */
type ClassifiedInput = { kind: InputKind; value: string };

const TRACKERA = /^trackera:([A-Za-z0-9][A-Za-z0-9_-]{0,63})$/;
// Error-tracker issue pages: https://<org>.sentry.io/issues/<id>/ or …/organizations/<org>/issues/<id>/.
const ISSUE_URL = /^https?:\/\/[^\s/]+(?:\/[^\s?#]*)?\/issues\/\d+\/?(?:[?#]\S*)?$/;

export function isIssueUrl(text: string): boolean {
  return ISSUE_URL.test(text.trim());
}

/** Whether `text` is, as a run's input, an issue reference of `tracker` (classifyInput reads it as one). */
export function isIssueReference(tracker: 'errtrack' | 'trackera', text: string): boolean {
  return tracker === 'errtrack' ? isIssueUrl(text) : TRACKERA.test(text.trim());
}

/** Runs whose text came from a webhook (chat, tracker, /jobs) rather than a person at the CLI or the Control Plane. */
export function isWebhookOrigin(origin: string | undefined): boolean {
  return origin !== undefined && origin !== '' && origin !== 'cli' && origin !== 'control';
}

// GitHub's own limits: an owner is 1-39 alphanumerics or single hyphens; a name 1-100 of [A-Za-z0-9._-].
const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;
const NAME = /^[A-Za-z0-9._-]{1,100}$/;

export function isRepoName(text: string): boolean {
  const [owner, name, extra] = text.split('/');
  if (extra !== undefined || !owner || !name) return false;
  return OWNER.test(owner) && NAME.test(name) && name !== '.' && name !== '..' && !name.toLowerCase().endsWith('.git');
}

/** Whether the run's name is the one a trigger server routed its job to (see runRepoName, launch.ts). */
export function isRoutedRepoName(env: NodeJS.ProcessEnv): boolean {
  const routed = env.SVC_REPO_NAME;
  return isWebhookOrigin(env.SVC_ORIGIN) && routed !== undefined && isRepoName(routed);
}

/**
 * Whether a run of `origin` may read an issue of `tracker`, fetched with the operator's credential or kept from the
 * tracker's own deliveries (DESIGN §7a: a credential goes only to the origin it was made for, and every sender acts
 * with its own authority): a person at the CLI, the Control Plane, the operator's /jobs, and the tracker's own
 * webhook, whose issue the operator's mapping routed here. Never other senders' text (a chat message), which may name
 * any project's or team's issue, a private team's routed to the same repository included.
 */
export function mayFetchIssue(tracker: 'errtrack' | 'trackera', origin: string | undefined): boolean {
  return !isWebhookOrigin(origin) || origin === tracker || origin === 'jobs';
}

/** The file's real path when it is a regular file inside `root` (symbolic links resolved), else null. */
export function fileInside(path: string, root: string): string | null {
  const real = realOrNull(path);
  const top = realOrNull(root);
  // A file gone between the two looks (a race) reads as no file: the text is a brief.
  return real && top && real !== top && within(real, top) && statSync(real, { throwIfNoEntry: false })?.isFile()
    ? real : null;
}

/**
 * The file's real path when it is one the repository at `root` commits (git tracks it), else null: what else the
 * checkout holds is svc's (other runs' folders and worktrees, their specs, the trackera inbox) or the operator's.
 */
function committedFile(path: string, root: string): string | null {
  const real = fileInside(path, root);
  const top = realOrNull(root);
  if (real === null || top === null) return null;
  const name = relative(top, real);
  return tryGit(top, ['ls-files', '-z', '--', `:(literal)${name}`]).split('\0').includes(name) ? real : null;
}

/**
 * `confineTo`: for webhook text, a `.md`/`.json` name is a file input only when that folder's repository commits it,
 * else the brief it literally is, so a chat message cannot point a run at ~/.ssh/config.json, another project's notes
 * or another run's spec.
 */
export function classifyInput(
  input: string,
  opts: { forceBrief: boolean; cwd: string; confineTo?: string | null },
): ClassifiedInput {
  const text = input.trim();
  if (text === '') throw new BadInputError('Nothing to do: give a brief, a spec file, an issue export or an issue URL');
  if (opts.forceBrief) return { kind: 'brief', value: text };
  const tracker = TRACKERA.exec(text);
  if (tracker) return { kind: 'trackera', value: tracker[1]! };
  if (isIssueUrl(text)) return { kind: 'issue-url', value: text };
  if (!/\s/.test(text) && /\.(json|md)$/i.test(text)) {
    const kind = text.toLowerCase().endsWith('.json') ? 'errtrack-file' : 'spec-file';
    const path = resolve(opts.cwd, text);
    if (opts.confineTo) {
      const inside = committedFile(path, opts.confineTo);
      return inside ? { kind, value: inside } : { kind: 'brief', value: text };
    }
    if (!existsSync(path) || !statSync(path).isFile()) {
      throw new BadInputError(`File not found: "${text}" (use --brief to send it as text)`);
    }
    return { kind, value: path };
  }
  return { kind: 'brief', value: text };
}

export type Task = { spec: string; brief: string; origin: string };

/** The run's origin its launcher named (SVC_ORIGIN: a trigger's route, `control`), or null when it named none. */
export function launcherOrigin(env: NodeJS.ProcessEnv): string | null {
  return env.SVC_ORIGIN && /^[a-z][a-z0-9_-]{0,31}$/.test(env.SVC_ORIGIN) ? env.SVC_ORIGIN : null;
}

function defaultOrigin(input: ClassifiedInput, env: NodeJS.ProcessEnv): string {
  const launcher = launcherOrigin(env);
  if (launcher !== null) return launcher;
  if (input.kind === 'errtrack-file' || input.kind === 'issue-url') return 'errtrack';
  if (input.kind === 'trackera') return 'trackera';
  return 'cli';
}

export async function buildTask(input: ClassifiedInput, repo: string, env: NodeJS.ProcessEnv): Promise<Task> {
  const origin = defaultOrigin(input, env);
  switch (input.kind) {
    case 'brief': {
      const brief = oneLine(input.value, 1500);
      const criteria = ['- The change does what the task asks.', '- Existing tests pass.'];
      return { spec: markdownSpec('Task', [brief], { 'Acceptance criteria': criteria }), brief, origin };
    }
    case 'spec-file': {
      const spec = readFileSync(input.value, 'utf8');
      const heading = /^#+\s+(.+)$/m.exec(spec)?.[1];
      return { spec, brief: oneLine(heading ?? basename(input.value), 1500), origin };
    }
    case 'errtrack-file': {
      const raw = tryParseJson(readFileSync(input.value, 'utf8'));
      if (raw === undefined) throw new BadInputError(`"${basename(input.value)}" is not valid JSON`);
      try {
        return { ...errtrackSpec(raw), origin };
      } catch (err) {
        throw new BadInputError(`${basename(input.value)}: ${errorMessage(err)}`, { cause: err });
      }
    }
    case 'issue-url':
      if (!mayFetchIssue('errtrack', env.SVC_ORIGIN)) {
        throw new BadInputError(`Refusing to fetch the error-tracker issue "${input.value}" for a ${origin} run: ` +
          'ERRTRACK_AUTH_TOKEN serves only the CLI, the Control Plane, /jobs and the errtrack webhook\'s runs, and ' +
          `text from ${origin} may name any project's issue. Paste the issue's details instead`);
      }
      return { ...errtrackSpec(await fetchIssueExport(input.value, env)), origin };
    case 'trackera':
      return { ...(await trackeraSpec(repo, input.value, env)), origin };
  }
}

// `trackera:<id>`: the webhook snapshot under .svc/inbox/trackera/, else the tracker API, else the reference alone.
type TrackerIssue = ReturnType<typeof issueOf>;

const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/** A delivery svc kept is a webhook body it took, at most 1 MiB (http/pipeline.ts). */
const MAX_SNAPSHOT = 1024 * 1024;

/** The delivery the trigger server's job came from (`jobs/$SVC_JOB_ID.json`, removed once read), else the newest
 * delivery for the issue (`<id>.json`). Read as policy.json is (plain-tree.ts): no link followed, regular files only;
 * a snapshot git tracks is the repository's own content, never a delivery svc kept (DESIGN §7a); and another sender's
 * run (a chat message naming `trackera:<id>`) reads none (mayFetchIssue). */
function fromSnapshot(repo: string, id: string, env: NodeJS.ProcessEnv): TrackerIssue | null {
  if (!mayFetchIssue('trackera', env.SVC_ORIGIN)) return null;
  const real = realOrNull(repo); // the checkout's own path is the operator's, and may be a link
  if (real === null) return null;
  const inbox = openPlainPath(real, TRACKERA_INBOX);
  if ('failed' in inbox) return null;
  return withDir(inbox, () => {
    const jobId = env.SVC_JOB_ID;
    const jobs = jobId && FILE_NAME.test(jobId) ? openPlainDirIn(inbox, 'jobs') : null;
    const own = jobs !== null && typeof jobs !== 'string' ? withDir(jobs, () => {
      const name = `${jobId}.json`;
      const snapshot = readSnapshot(real, jobs, 'jobs', name);
      if (snapshot !== null) rmSync(pathIn(jobs, name), { force: true });
      return snapshot;
    }) : null;
    const found = own ?? readSnapshot(real, inbox, '', `${id}.json`);
    return found && issueOf(objOrNull(found.data) ?? found, id);
  });
}

/** A snapshot's JSON (its parse error thrown, as ever); null when `name` in the inbox's folder `sub` is no regular
 * file within the cap, or one git tracks (or may: git failed in the checkout). */
function readSnapshot(repo: string, dir: PlainDir, sub: string, name: string): Obj | null {
  const bytes = readPlainIn(dir, name, MAX_SNAPSHOT);
  if (typeof bytes === 'string' || trackedOrAll(repo, [...TRACKERA_INBOX, sub].filter(Boolean).join('/'))(name)) {
    return null;
  }
  return obj(JSON.parse(bytes.toString('utf8')));
}

function issueOf(data: Obj, id: string) {
  return {
    identifier: textOf(data.identifier) ?? id,
    title: textOf(data.title),
    description: textOf(data.description),
    url: textOf(data.url),
  };
}

const ISSUE_QUERY = 'query($id:String!){issue(id:$id){identifier title description url}}';

async function fromApi(id: string, env: NodeJS.ProcessEnv): Promise<TrackerIssue | null> {
  const key = env.TRACKERA_API_KEY;
  if (!key || !mayFetchIssue('trackera', env.SVC_ORIGIN)) return null;
  const url = env.TRACKERA_API_URL || 'https://api.linear.app/graphql';
  const body = JSON.stringify({ query: ISSUE_QUERY, variables: { id } });
  // A personal API key goes as it is; an OAuth token is set as "Bearer <token>" (trackera takes both).
  const scheme = key.startsWith('Bearer ') ? 'Bearer ' : '';
  const credential = { name: 'TRACKERA_API_KEY', token: key.slice(scheme.length), scheme } as const;
  const answer = await fetchJson(url, credential, body);
  const issue = objOrNull(obj(obj(answer).data).issue);
  return issue && issueOf(issue, id);
}

export async function trackeraSpec(repo: string, id: string, env: NodeJS.ProcessEnv) {
  const issue = fromSnapshot(repo, id, env) ?? await fromApi(id, env).catch(() => null);
  if (!issue || (!issue.title && !issue.description)) {
    const lead = ['No details were available offline; work from the reference.'];
    const criteria = { 'Acceptance criteria': ['- The issue is resolved.', '- Existing tests pass.'] };
    return { brief: `trackera:${id}`, spec: markdownSpec(`Tracker issue trackera:${id}`, lead, criteria) };
  }
  const title = oneLine(issue.title ?? `trackera:${id}`, 300);
  return {
    brief: oneLine(`trackera:${issue.identifier} ${title}`, 1500),
    spec: markdownSpec(`${issue.identifier}: ${title}`, issue.url ? [`Link: ${issue.url}`] : [], {
      Description: [fence(issue.description ?? '(none)', 'text')],
      'Acceptance criteria': ['- The issue is resolved as described.', '- Existing tests pass.'],
    }),
  };
}
