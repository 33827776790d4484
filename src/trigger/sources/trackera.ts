// POST /trackera (Linear): an issue event starts `trackera:<identifier>`, its verified payload kept for the run; the
// summary goes back as an issue comment in CommonMark, and a `/svc answer` comment answers the run.
import type { Reply } from '../../http/respond.ts';
import type { Obj } from '../../json-value.ts';
import { obj, objOrNull, str, describe, tryParseJson } from '../../untrusted.ts';
import { deliveryKeys } from '../../webhook-sources.ts';
import { errorMessage } from '../../errors.ts';
import { intakeDir, TRACKERA_IDENTIFIER as IDENTIFIER } from '../managed-checkout.ts';
import type { ServedRepo } from '../served-repos-file.ts';
import { TRACKERA_INBOX } from '../../engine/paths.ts';
import { makePlainDirIn, makePlainPath, UnsafePathError, UnusableRootError } from '../../engine/safe-fs.ts';
import { pathIn, type PlainDir } from '../../engine/plain-tree.ts';
import { renameSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { markdownSummary, PermanentError, type ReplyChannel } from '../summary.ts';
import { accepted, pinnedIn, type Decision, type Received, type TCtx } from '../intake.ts';
import { answerCommand, commentTime, teamRefusal } from '../answers.ts';

type TrackeraInput =
  | { kind: 'issue'; identifier: string; issueId: string; teamKey: string | null }
  | { kind: 'skip'; reason: string };

export function readTrackera(body: Record<string, unknown>): TrackeraInput {
  if (body.type !== 'Issue') return { kind: 'skip', reason: `${describe(body.type)} events do not start jobs` };
  if (body.action !== 'create' && body.action !== 'update') {
    return { kind: 'skip', reason: `issue action "${describe(body.action)}" does not start a job` };
  }
  const data = obj(body.data);
  const team = str(obj(data.team).key);
  const fromUrl = /\/issue\/([A-Za-z0-9_-]+)(?:[/#?]|$)/.exec(str(body.url) ?? '')?.[1] ?? null;
  const fromTeam = team && typeof data.number === 'number' ? `${team}-${data.number}` : null;
  const candidate = str(data.identifier) ?? fromTeam ?? fromUrl;
  const identifier = candidate && IDENTIFIER.test(candidate) ? candidate : null;
  const issueId = str(data.id);
  if (!identifier || !issueId) return { kind: 'skip', reason: 'issue event without an identifier' };
  // The team's key routes it (trackera=…), else the identifier's prefix (ENG-123 is team ENG's issue 123).
  const teamKey = team ?? /^([A-Za-z0-9_]+)-\d+$/.exec(identifier)?.[1] ?? null;
  return { kind: 'issue', identifier, issueId, teamKey };
}

export function readTrackeraDelivery(ctx: TCtx, { body, raw }: Received): Decision {
  // Another organization's issue ids and team keys are its own: its comment answers nothing, its issue routes nowhere.
  const stranger = !pinnedIn(ctx.deps.settings.orgs.trackera, str(body.organizationId)?.toLowerCase());
  const answered = stranger ? null : answerFromTrackera(ctx, body);
  if (answered) return { kind: 'reply', reply: answered };
  const input = readTrackera(body);
  if (input.kind === 'skip') return input;
  // Staged once the cheap checks passed; put in place in the turn the job commits, before the job loop can launch it.
  const { identifier } = input;
  let snapshot: Awaited<ReturnType<typeof stageTrackeraSnapshot>> | undefined;
  let unstaged: string | null = null;
  const target = { issue_id: input.issueId, identifier, thread: trackeraThread(input.issueId) };
  const prepare = async (repo: ServedRepo) => {
    const inbox = intakeDir(ctx.deps.settings.stateDir, repo);
    // svc's own intake folder of a clone= repository is made as needed (before its first job fetched, it is not
    // there); an operator's checkout never is: missing (unmounted), it is a 500 below.
    if (repo.checkout === null) await mkdir(inbox, { recursive: true, mode: 0o700 });
    try {
      snapshot = await stageTrackeraSnapshot(inbox, identifier, raw);
    } catch (err) {
      // A link or non-folder the repository committed under .svc/inbox is its own layout, not the server's failure:
      // a 500 has the vendor deliver again (trackera retries any answer but 200) only to meet the same link. The job
      // runs without the snapshot, as after a crash before keep() (docs/trigger.md), and the log says why under its
      // job id. A checkout root that is missing or unusable is the host's failure: a 500, delivered again later.
      if (!(err instanceof UnsafePathError) || err instanceof UnusableRootError) throw err;
      unstaged = err.message;
    }
    return `trackera:${identifier}`;
  };
  const queued = (jobId: string): Reply => {
    if (unstaged !== null) ctx.deps.log.warn('trackera snapshot not staged', { job_id: jobId, error: unstaged });
    try {
      snapshot?.keep(jobId);
    } catch (err) {
      // The job is committed: its run falls back to the newest snapshot or the tracker API (docs/trigger.md).
      ctx.deps.log.warn('trackera snapshot not kept', { job_id: jobId, error: errorMessage(err) });
    }
    return accepted.queued(jobId);
  };
  return {
    kind: 'job', route: input.teamKey, stranger, reply: { channel: 'trackera', target },
    prepare, replies: { queued }, done: async () => snapshot?.discard(),
  };
}

// The verified payload a job's run reads instead of the tracker API (no key in the child; docs/trigger.md): staged,
// put in place as `jobs/<job id>.json` and `<identifier>.json` once the job committed; else nothing is left behind.
// A checkout's `.svc/inbox` is the repository's to commit, links included (DESIGN §7a): its folders are held open
// without following one, each file is new ('wx'), and a rename replaces whatever name stands at the end, never
// writing through it.
export async function stageTrackeraSnapshot(repoDir: string, identifier: string, raw: Buffer) {
  // Both names become file names on the host: checked here too, whatever the caller checked.
  if (!IDENTIFIER.test(identifier)) throw new RangeError('bad trackera identifier');
  const inbox = makePlainPath(repoDir, TRACKERA_INBOX);
  let jobs: PlainDir;
  try {
    jobs = makePlainDirIn(inbox, 'jobs');
  } catch (err) {
    inbox.close();
    throw err;
  }
  const [latestTmp, jobTmp] = [pathIn(inbox, `.${randomUUID()}.tmp`), pathIn(jobs, `.${randomUUID()}.tmp`)];
  const staged = [latestTmp, jobTmp];
  /** Removes whatever keep() did not put in place: nothing after a keep, so a queued delivery waits on no rm. */
  const discard = async (): Promise<void> => {
    try {
      await Promise.all(staged.splice(0).map((path) => rm(path, { force: true })));
    } finally {
      jobs.close();
      inbox.close();
    }
  };
  try {
    await Promise.all(staged.map((path) => writeFile(path, raw, { mode: 0o600, flag: 'wx' })));
  } catch (err) {
    await discard();
    throw err;
  }
  return {
    /** Synchronous: done before the job loop can launch the job. */
    keep(jobId: string) {
      if (!IDENTIFIER.test(jobId)) throw new RangeError('bad job id');
      renameSync(jobTmp, pathIn(jobs, `${jobId}.json`));
      staged.splice(staged.indexOf(jobTmp), 1);
      renameSync(latestTmp, pathIn(inbox, `${identifier}.json`));
      staged.splice(staged.indexOf(latestTmp), 1);
    },
    discard,
  };
}

export const trackeraReply: ReplyChannel = {
  configured: (config) => Boolean(config.trackeraApiKey),
  prepare(target, parts, config) {
    if (!config.trackeraApiKey) return 'TRACKERA_API_KEY is not set';
    if (typeof target.issue_id !== 'string') return 'no trackera issue id';
    const body = JSON.stringify({
      query: 'mutation CommentCreate($input: CommentCreateInput!) { commentCreate(input: $input) { success } }',
      variables: { input: { issueId: target.issue_id, body: markdownSummary(parts) } },
    });
    return {
      url: new URL(config.trackeraApiUrl),
      // Personal API keys go in Authorization as-is, without "Bearer" (trackera GraphQL docs).
      headers: { authorization: config.trackeraApiKey },
      body,
      what: 'trackera API',
      check(answer) {
        const parsed = objOrNull(tryParseJson(answer));
        // A 2xx that says nothing readable may still have posted the comment: no retry, and the log says which.
        if (!parsed) throw new PermanentError('trackera API answered with something that is not a JSON object');
        if (parsed.errors || obj(obj(parsed.data).commentCreate).success !== true) {
          throw new PermanentError('trackera API refused the comment');
        }
      },
    };
  },
};

// An answer is a `/svc answer <text>` comment on the issue by a member of its team (asked of the tracker's API: without
// TRACKERA_API_KEY none is taken).

function trackeraThread(issueId: string): string {
  return `trackera:${issueId}`;
}

/** Whether the user is a member of the issue's team, or why that cannot be known. */
async function onIssueTeam(ctx: TCtx, issueId: string, userId: string): Promise<true | string> {
  const { trackeraApiKey, trackeraApiUrl } = ctx.deps.settings.notify;
  if (!trackeraApiKey) return 'TRACKERA_API_KEY is not set, so the issue\'s team cannot be checked';
  const query = 'query IssueTeam($id: String!) { issue(id: $id) { team { members(first: 250) { nodes { id } } } } }';
  try {
    const res = await ctx.deps.post(new URL(trackeraApiUrl), { authorization: trackeraApiKey },
      JSON.stringify({ query, variables: { id: issueId } }));
    if (res.status !== 200) return `the trackera API answered HTTP ${res.status} about the issue's team`;
    const answer = objOrNull(tryParseJson(res.text));
    if (!answer) return 'the trackera API answered something that is not a JSON object about the issue\'s team';
    const nodes = obj(obj(obj(obj(answer.data).issue).team).members).nodes;
    const members = Array.isArray(nodes) ? nodes.map((n) => str(obj(n).id)) : [];
    return members.includes(userId) ? true : 'the comment\'s author is not a member of the issue\'s team';
  } catch (err) {
    // The reason is posted where the answer was written: the error (a host, a proxy's words) goes only to the log.
    ctx.deps.log.warn('issue team not known', { route: 'trackera', issue: issueId, error: errorMessage(err) });
    return 'the trackera API could not say who is on the issue\'s team';
  }
}

/** A created `/svc answer <text>` comment's reply; null when the event is not one. */
function answerFromTrackera(ctx: TCtx, body: Obj): Promise<Reply> | null {
  if (body.type !== 'Comment' || body.action !== 'create') return null;
  const data = obj(body.data);
  const command = answerCommand(str(data.body) ?? '');
  const issueId = (str(data.issueId) ?? str(obj(data.issue).id))?.slice(0, 100);
  const userId = str(data.userId) ?? str(obj(data.user).id);
  if (command === null || !issueId || !userId) return null;
  // The account, not the name it shows, which the person can change.
  const who = userId.slice(0, 100);
  const commentId = (str(data.id) ?? '').slice(0, 100);
  return ctx.deps.answers.reply({
    origin: 'trackera', thread: trackeraThread(issueId), ...command, who,
    refusal: teamRefusal(ctx.deps.settings.repos), standing: () => onIssueTeam(ctx, issueId, userId),
    place: `trackera issue ${issueId} comment ${commentId}`,
    // The comment's own time: a retry is signed with a fresh `webhookTimestamp`, so only this dates what it answers.
    writtenAt: commentTime(data.createdAt),
    keys: deliveryKeys('trackera', ctx.req.headers, ctx.raw, ...(commentId ? [`trackera:comment:${commentId}`] : [])),
  });
}
