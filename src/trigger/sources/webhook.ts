// POST /webhook (GitHub): an issue opened with label `svc` or labelled `svc`, or a comment starting `/svc`, by someone
// with write-level association becomes a job; everything else is skipped. A commenter, and whoever labelled someone
// else's issue, must also have write permission, asked of GitHub (the issue's own author too, where a token is set).
import { HttpError } from '../../http/http-error.ts';
import { isJsonObject, type Obj } from '../../json-value.ts';
import { obj, positiveInt, str, textOf, tryParseJson } from '../../untrusted.ts';
import { deliveryKeys } from '../../webhook-sources.ts';
import { mayWrite, queueFollowUp, readPullRequestEvent, svcCommand, TRUSTED } from './github-pr.ts';
import { NotQueued, type Decision, type Received, type TCtx } from '../intake.ts';
import { githubHeaders } from '../../engine/github-rest.ts';
import { answerCommand, commentTime } from '../answers.ts';
import { markdownSummary, type Delivery, type NotifyConfig, type ReplyChannel, type SummaryParts } from '../summary.ts';

const TRIGGER_LABEL = 'svc';
const COMMENT_PREFIX = '/svc';

/** `text` the brief's; `repository` the event's repository.full_name, which alone routes it; `keys` its dedupe keys
 * besides the delivery's own; `writer` who must be able to write to the repository (asked of GitHub once routed). */
type WebhookInput =
  | { kind: 'job'; text: string; repository: string | null; keys: string[]; writer?: Writer }
  | { kind: 'skip'; reason: string };

/**
 * A comment's author, and whoever added the `svc` label to someone else's issue, is always asked about (without a
 * token, that fails closed). The issue's own author only where a token is set: without one, their association decides
 * (docs/trigger.md).
 */
type Writer = { login: string; of: 'comment' | 'issue' | 'label' };

// An issue opened with the `svc` label comes as two deliveries, `issues.opened` (its labels include svc) and
// `issues.labeled` svc, in either order. Both claim one key, so only the first queues a job. A label event whose
// issue changed within this long of its creation is that label; one later (svc removed, then added again to ask
// again) claims no such key and is a job of its own.
const OPENED_LABEL_MS = 60_000;

/**
 * The key of the `svc` label an issue was opened with, or none for a label added later. It names the issue by its own
 * id, not `<owner/name>#<number>`: a repository renamed or deleted and a new one of that name within the key's 30 days
 * has issues of the same numbers (`ref`, the key of an event without an id).
 */
function openedLabelKeys(ref: string, issue: Obj, action: 'opened' | 'labeled'): string[] {
  const key = `webhook:issue-opened-svc:${textOf(issue.id) ?? str(issue.node_id) ?? ref}`;
  if (action === 'opened') return [key];
  const created = Date.parse(str(issue.created_at) ?? '');
  const changed = Date.parse(str(issue.updated_at) ?? '');
  // GitHub sends both times; without them the event cannot be told from the creation's, and counts as it.
  const later = changed - created > OPENED_LABEL_MS;
  return later ? [] : [key];
}

function hasLabel(issue: Obj): boolean {
  return Array.isArray(issue.labels) && issue.labels.some((l) => obj(l).name === TRIGGER_LABEL);
}

/** Events on a pull request's review: a follow-up, never new work (github-pr.ts). */
const PR_EVENTS = new Set(['pull_request_review', 'pull_request_review_comment']);

/** A review, a review comment or a comment on a pull request's conversation (GitHub sends that as an issue comment). */
function isPullRequestEvent(event: string, body: Obj): boolean {
  return PR_EVENTS.has(event) || (event === 'issue_comment' && isJsonObject(obj(body.issue).pull_request));
}

/** Why the unsigned event header disagrees with the signed body's shape for an event svc acts on, or null. */
function eventMismatch(event: string, body: Obj): string | null {
  if (PR_EVENTS.has(event)) {
    const part = event === 'pull_request_review' ? 'review' : 'comment';
    if (isJsonObject(body.pull_request) && isJsonObject(body[part]) && !isJsonObject(body.issue)) return null;
    return `X-GitHub-Event "${event}" does not match the signed body, which has no pull_request and ${part}`;
  }
  if (event !== 'issues' && event !== 'issue_comment') return null;
  const shape = !isJsonObject(body.issue) || isJsonObject(body.pull_request) ? 'other'
    : isJsonObject(body.comment) ? 'issue_comment' : 'issues';
  if (shape === event) return null;
  const is = shape === 'other' ? 'neither an issue nor an issue-comment event' : `an "${shape}" event`;
  return `X-GitHub-Event "${event.slice(0, 64)}" does not match the signed body, which is ${is}`;
}

/** Why an `issues` event starts nothing, true to the event. */
function issuesSkipReason(action: string, body: Obj, issue: Obj): string {
  const label = `"${TRIGGER_LABEL}" label`;
  if (action === 'opened') return `issues.opened without the ${label}`;
  const added = (str(obj(body.label).name) ?? '').slice(0, 64);
  if (action === 'labeled') return `issues.labeled adds "${added}", not the ${label}`;
  const labelled = hasLabel(issue) ? ` (the issue has the ${label})` : '';
  return `issues.${action.slice(0, 64)} does not start a job${labelled}: only issues.opened with the ${label} or ` +
    `issues.labeled "${TRIGGER_LABEL}" do`;
}

export function readWebhook(event: string, body: Obj): WebhookInput {
  const issue = obj(body.issue);
  const repository = str(obj(body.repository).full_name);
  const ref = `${repository ?? ''}#${textOf(issue.number) ?? ''}`;
  const issueText = (): string => `${ref} ${str(issue.title) ?? ''}${str(issue.body) ? ` — ${str(issue.body)}` : ''}`;
  if (event === 'issues') {
    const action = body.action === 'labeled' && obj(body.label).name === TRIGGER_LABEL ? 'labeled'
      : body.action === 'opened' && hasLabel(issue) ? 'opened' : null;
    if (action === null) return { kind: 'skip', reason: issuesSkipReason(str(body.action) ?? '', body, issue) };
    // The issue's author, who opened it or (an issue template's labels arrive as `labeled` events sent by the author)
    // labelled it, needs a trusted association. Whoever labels it vouches for its text as the brief: triage lets a
    // person or a bot label without write access, which a /svc comment needs, so the labeller is asked about too.
    const sender = str(obj(body.sender).login);
    const byAuthor = action === 'opened' || (sender !== null && sender === str(obj(issue.user).login));
    if (byAuthor && !TRUSTED.has(str(issue.author_association) ?? '')) {
      return { kind: 'skip', reason: 'issue author may not start jobs' };
    }
    // An association of MEMBER says nothing of write access (mayWrite): the author, or the labeller, is asked about.
    const writer: Writer = byAuthor ? { login: str(obj(issue.user).login) ?? '', of: 'issue' }
      : { login: sender ?? '', of: 'label' };
    return { kind: 'job', text: issueText(), repository, keys: openedLabelKeys(ref, issue, action), writer };
  }
  if (event === 'issue_comment' && body.action === 'created') {
    const comment = obj(body.comment);
    const ask = svcCommand(str(comment.body) ?? '');
    if (ask === null) return { kind: 'skip', reason: `comment does not start with ${COMMENT_PREFIX}` };
    if (!TRUSTED.has(str(comment.author_association) ?? '')) {
      return { kind: 'skip', reason: 'comment author may not start jobs' };
    }
    const writer = { login: str(obj(comment.user).login) ?? '', of: 'comment' as const };
    return { kind: 'job', text: `${ref} ${str(issue.title) ?? ''} — ${ask}`, repository, keys: [], writer };
  }
  return { kind: 'skip', reason: `event "${event}" does not start a job` };
}

/**
 * The GitHub source's reader (intake.ts `receive`): the event header checked against the signed body, then an answer
 * on a job's thread, a follow-up on svc's pull request, or the issue's job; the author's write permission is asked of
 * GitHub only once the delivery is no copy of one queued (the job's `prepare`).
 */
export function readGithub(ctx: TCtx, { body, resource }: Received): Decision {
  const event = resource ?? '';
  const mismatch = eventMismatch(event, body);
  if (mismatch !== null) {
    const reason = 'event header does not match the body';
    ctx.deps.log.warn('webhook refused', { route: 'webhook', reason, request_id: ctx.requestId });
    throw new HttpError('invalid_param', mismatch);
  }
  const answered = answerFromGithub(ctx, event, body);
  if (answered) return answered;
  const input = isPullRequestEvent(event, body) ? readPullRequestEvent(event, body) : readWebhook(event, body);
  if (input.kind === 'skip') return input;
  if (input.kind === 'follow-up') {
    const reply = githubThreadTarget(input.repository ?? '', input.number);
    const then = (repo: { name: string }) => queueFollowUp(ctx, repo.name, event, input, reply);
    return { kind: 'routed', route: input.repository, then };
  }
  const reply = githubThreadTarget(input.repository ?? '', positiveInt(obj(body.issue).number));
  const job = { kind: 'job', text: input.text, route: input.repository, keys: input.keys, reply } as const;
  const { writer } = input;
  if (writer === undefined || (writer.of === 'issue' && !ctx.deps.github.configured)) return job;
  const { text, ...asked } = job;
  const label = writer.of === 'label';
  const [who, noun] = label ? ['label sender', "the label's sender"] : [`${writer.of} author`, undefined];
  return {
    ...asked,
    prepare: async (repo) => {
      const writes = await mayWrite(ctx, repo.name, writer.login, noun);
      if (writes !== true) throw new NotQueued(`${who} may not start jobs: ${writes}`);
      return text;
    },
  };
}

// The job's conversation on GitHub: one progress comment kept up to date where it was asked, and the answers there.

/** The thread an answer on the same issue or PR finds its job by. */
function githubThread(repository: string, number: number): string {
  return `github:${repository.toLowerCase()}#${number}`;
}

/** Where a GitHub job's progress comment goes: a repository and issue or PR number fit for an API path. */
function githubThreadTarget(
  repo: string, number: number | null,
): { channel: 'webhook'; target: Record<string, unknown> } | undefined {
  // Never `.` or `..`, which a URL would resolve into another path.
  const segment = /^[A-Za-z0-9-]{1,39}\/[A-Za-z0-9._-]{1,100}$/.test(repo) && !/\/\.\.?$/.test(repo);
  if (!segment || number === null) return undefined;
  return { channel: 'webhook', target: { repo, issue: number, thread: githubThread(repo, number) } };
}

/** Marks svc's progress comment (GitHub does not show it). */
const PROGRESS_MARK = '<!-- svc-progress -->';

/** A created `/svc answer <text>` comment's answer, once routed; null when the event is not one. */
function answerFromGithub(ctx: TCtx, event: string, body: Obj): Decision | null {
  if (event !== 'issue_comment' || body.action !== 'created') return null;
  const comment = obj(body.comment);
  const command = answerCommand(str(comment.body) ?? '');
  const repository = str(obj(body.repository).full_name);
  const number = positiveInt(obj(body.issue).number);
  if (command === null || repository === null || number === null) return null;
  const commentId = (textOf(comment.id) ?? '').slice(0, 40);
  const author = str(obj(comment.user).login) ?? '';
  const login = (author || 'unknown').slice(0, 100);
  const association = (str(comment.author_association) ?? 'NONE').slice(0, 40);
  const trusted = TRUSTED.has(association);
  const refusal = (): string | null => (trusted ? null
    : `the comment's author is ${association} on this repository: only OWNER, MEMBER or COLLABORATOR may answer`);
  return { kind: 'routed', route: repository, then: (repo) => ctx.deps.answers.reply({
    origin: 'webhook', thread: githubThread(repository, number), ...command, who: login, refusal,
    standing: () => (trusted ? mayWrite(ctx, repo.name, author) : Promise.resolve(true)),
    writtenAt: commentTime(comment.created_at), place: `github ${repository}#${number} comment ${commentId}`,
    keys: deliveryKeys('webhook', ctx.req.headers, ctx.raw, ...(commentId ? [`webhook:comment:${commentId}`] : [])),
  }) };
}

function commentId(answer: string): Record<string, unknown> | null {
  const id = obj(tryParseJson(answer)).id;
  return typeof id === 'number' && Number.isSafeInteger(id) ? { comment_id: id } : null;
}

/** The progress comment: edited in place once its id is kept (`edit`), else a new one (a note is always new). */
function githubComment(target: Obj, parts: SummaryParts, config: NotifyConfig, edit: boolean): Delivery | string {
  const gh = config.github;
  if (!gh) return 'GITHUB_TOKEN is not set';
  if (typeof target.repo !== 'string' || typeof target.issue !== 'number') return 'no GitHub issue';
  const base = `${gh.apiUrl}/repos/${target.repo}/issues`;
  const headers = githubHeaders(gh.token);
  const body = JSON.stringify({ body: `${PROGRESS_MARK}\n${markdownSummary(parts)}` });
  const id = target.comment_id;
  if (edit && typeof id === 'number') {
    return { url: new URL(`${base}/comments/${id}`), method: 'PATCH', headers, body, what: 'GitHub API' };
  }
  return { url: new URL(`${base}/${target.issue}/comments`), headers, body, what: 'GitHub API',
    ...(edit ? { remember: commentId } : {}) };
}

/** One comment per job, made by its first message and edited in place after (its id kept with the reply target). */
export const githubReply: ReplyChannel = {
  configured: (config) => config.github !== undefined,
  progress: true,
  prepare: (target, parts, config) => githubComment(target, parts, config, true),
  note: (target, parts, config) => githubComment(target, parts, config, false),
};
