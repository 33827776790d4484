// POST /webhook (GitHub): an issue opened with label `svc` or labelled `svc`, or a comment starting `/svc`, by someone
// with write-level association, becomes a job; everything else is skipped.
import { parseJsonObject } from '../../http/body.ts';
import { HttpError } from '../../http/http-error.ts';
import type { Reply } from '../../http/respond.ts';
import { isJsonObject, obj, type Obj } from '../../untrusted.ts';
import { firstHeader, sanitizeBrief, sourceOf } from '../../webhook-sources.ts';
import { isPullRequestEvent, pullRequestEventMismatch, receivePullRequestEvent } from './github-pr.ts';
import { enqueue, skipped, unserved, type TCtx } from '../intake.ts';

const TRIGGER_LABEL = 'svc';
const COMMENT_PREFIX = '/svc';
// Anyone can open issues and comment on a public repository: only these associations may start work.
const TRUSTED = new Set(['OWNER', 'MEMBER', 'COLLABORATOR']);

/** `repository` is the event's repository.full_name, which alone routes it (served-repos.ts); null when absent. */
export type WebhookInput =
  | { kind: 'job'; brief: string; repository: string | null }
  | { kind: 'skip'; reason: string };

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function hasLabel(issue: Obj): boolean {
  return Array.isArray(issue.labels) && issue.labels.some((l) => obj(l).name === TRIGGER_LABEL);
}

/**
 * The unsigned event header must agree with the signed body's shape for an event svc acts on (`issue_comment`
 * carries an issue and a comment, `issues` an issue alone, a `pull_request` body has no `issue`): why not, or null.
 * Other events are skipped whatever their body, so they are not checked (GitHub adds event types).
 */
export function eventMismatch(event: string, body: Obj): string | null {
  if (event !== 'issues' && event !== 'issue_comment') return null;
  const shape = !isJsonObject(body.issue) || isJsonObject(body.pull_request) ? 'other'
    : isJsonObject(body.comment) ? 'issue_comment' : 'issues';
  if (shape === event) return null;
  const is = shape === 'other' ? 'neither an issue nor an issue-comment event' : `an "${shape}" event`;
  return `X-GitHub-Event "${event.slice(0, 64)}" does not match the signed body, which is ${is}`;
}

/**
 * Why an `issues` event starts nothing, true to the event: only `opened` can lack the label; a `labeled` event
 * added another label; any other action (closed, edited, …) never starts a job, labelled or not.
 */
function issuesSkipReason(action: string, body: Obj, issue: Obj): string {
  const label = `"${TRIGGER_LABEL}" label`;
  if (action === 'opened') return `issues.opened without the ${label}`;
  if (action === 'labeled') return `issues.labeled adds "${str(obj(body.label).name).slice(0, 64)}", not the ${label}`;
  const labelled = hasLabel(issue) ? ` (the issue has the ${label})` : '';
  return `issues.${action.slice(0, 64)} does not start a job${labelled}: only issues.opened with the ${label} or ` +
    `issues.labeled "${TRIGGER_LABEL}" do`;
}

export function readWebhook(event: string, body: Obj): WebhookInput {
  const issue = obj(body.issue);
  const repo = str(obj(body.repository).full_name);
  const repository = repo === '' ? null : repo;
  const ref = `${repo}#${typeof issue.number === 'number' || typeof issue.number === 'string' ? issue.number : ''}`;
  const issueBrief = (): string => {
    const body = issue.body ? ` — ${str(issue.body)}` : '';
    return sanitizeBrief(`${ref} ${str(issue.title)}${body}`, sourceOf('webhook').briefBytes);
  };
  if (event === 'issues') {
    if (body.action === 'labeled' && obj(body.label).name === TRIGGER_LABEL) {
      return { kind: 'job', brief: issueBrief(), repository };
    }
    if (body.action === 'opened' && hasLabel(issue)) {
      if (!TRUSTED.has(str(issue.author_association))) {
        return { kind: 'skip', reason: 'issue author may not start jobs' };
      }
      return { kind: 'job', brief: issueBrief(), repository };
    }
    return { kind: 'skip', reason: issuesSkipReason(str(body.action), body, issue) };
  }
  if (event === 'issue_comment' && body.action === 'created') {
    const comment = obj(body.comment);
    const text = str(comment.body).trim();
    if (!text.startsWith(COMMENT_PREFIX) || /^\/svc\S/.test(text)) {
      return { kind: 'skip', reason: `comment does not start with ${COMMENT_PREFIX}` };
    }
    if (!TRUSTED.has(str(comment.author_association))) {
      return { kind: 'skip', reason: 'comment author may not start jobs' };
    }
    const ask = text.slice(COMMENT_PREFIX.length);
    const brief = sanitizeBrief(`${ref} ${str(issue.title)} — ${ask}`, sourceOf('webhook').briefBytes);
    return { kind: 'job', brief, repository };
  }
  return { kind: 'skip', reason: `event "${event}" does not start a job` };
}

export async function receiveWebhook(ctx: TCtx, raw: Buffer): Promise<Reply> {
  const event = firstHeader(ctx.req.headers, sourceOf('webhook').resource) ?? '';
  const body = parseJsonObject(raw);
  const mismatch = eventMismatch(event, body) ?? pullRequestEventMismatch(event, body);
  if (mismatch !== null) {
    const reason = 'event header does not match the body';
    ctx.deps.log.warn('webhook refused', { route: 'webhook', reason, request_id: ctx.requestId });
    throw new HttpError('invalid_param', mismatch);
  }
  const input = readWebhook(event, body);
  // Comments and reviews on a pull request ask for a follow-up on it (github-pr.ts).
  if (isPullRequestEvent(event, body)) return receivePullRequestEvent(ctx, event, body);
  if (input.kind === 'skip') return skipped(input.reason);
  // The event names its repository: only that one, if served, ever takes it.
  const routed = ctx.deps.settings.repos.webhook(input.repository);
  if (routed.kind === 'unserved') return unserved(ctx, 'webhook', routed.reason);
  return enqueue(ctx, { origin: 'webhook', repo: routed.repo.name, brief: input.brief });
}
