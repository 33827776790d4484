// POST /webhook (GitHub), pull request follow-ups (docs/trigger.md "Follow-ups on svc's pull requests"): `/svc
// <instruction>` on svc's PR queues `svc start --follow-up svc/<run>`; never on a PR svc did not open, for someone
// who may not write to the repository (asked of GitHub's API), or while another run works on the PR; no payload text
// in an API path but a login checked as GitHub spells one, none in a reply.
import { json, type Reply } from '../../http/respond.ts';
import { errorMessage, RefusedError } from '../../errors.ts';
import type { Obj } from '../../json-value.ts';
import { list, obj, positiveInt, str } from '../../untrusted.ts';
import { briefOf } from '../../webhook-sources.ts';
import { capUtf8, oneLine } from '../../one-line.ts';
import { receiptIntegrity } from '../../engine/follow-up.ts';
import { enqueue, type Intake, type TCtx } from '../intake.ts';
import { inTurn } from '../queue.ts';

const COMMAND = /^\/svc(?:\s+|$)/;
// Anyone can open issues and comment on a public repository: only these associations may start or change work.
export const TRUSTED = new Set(['OWNER', 'MEMBER', 'COLLABORATOR']);
const ASSOCIATIONS = new Set([...TRUSTED, 'CONTRIBUTOR', 'FIRST_TIMER', 'FIRST_TIME_CONTRIBUTOR', 'MANNEQUIN', 'NONE']);
const RUN_BRANCH = /^svc\/(r[0-9a-z]{26})$/;
/** GitHub's roles that may push to the repository, as its permission API names them. */
const WRITERS = new Set(['admin', 'maintain', 'write']);
// Enterprise Managed Users' logins end in `_<shortcode>` (octocat_acme).
const LOGIN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,38}$/;
const MAX_COMMENTS = 30;
const COMMENT_BYTES = 300;

type ReviewComment = ReturnType<typeof commentOf>;

/** A follow-up as the payload asks it, checked against the server's records before queueing. */
type FollowUpAsk = Extract<ReturnType<typeof ask>, { kind: 'follow-up' }>;
type PrInput = FollowUpAsk | { kind: 'skip'; reason: string };

/**
 * Whether `login` may write to `repo`, asked of GitHub's API, else why not. An association of MEMBER or COLLABORATOR
 * says no such thing (an organization's member, a read-only collaborator), and a job of theirs pushes with svc's token.
 * Fails closed: an API that cannot say (no token, an error, an answer without a permission) is a no, and logged; a
 * login that is no person's (none, or an App's or Action's `name[bot]`) is a no without asking. `who` names them.
 */
export async function mayWrite(ctx: TCtx, repo: string, login: string, who = 'the author'): Promise<true | string> {
  if (!LOGIN.test(login)) return `${who} is not a GitHub user who may write to this repository`;
  try {
    const path = `/repos/${repo}/collaborators/${encodeURIComponent(login)}/permission`;
    const answer = obj(await ctx.deps.github.getWhileDelivering(path));
    const permission = str(answer.permission) ?? '';
    return WRITERS.has(permission) ? true : `${who} may not write to this repository`;
  } catch (err) {
    ctx.deps.log.warn('write permission not known', { route: 'webhook', repo, login, error: errorMessage(err) });
    // What GitHub shows under Recent Deliveries: without a token the fix is the server's, not GitHub's.
    return ctx.deps.github.configured ? `the GitHub API could not say whether ${who} may write to this repository`
      : `svc has no GITHUB_TOKEN (or GH_TOKEN) to ask GitHub whether ${who} may write to this repository`;
  }
}

/** The text after `/svc`, or null when the text is not a `/svc` command. */
export function svcCommand(text: string): string | null {
  const t = text.trim();
  return COMMAND.test(t) ? t.replace(COMMAND, '').trim() : null;
}

function commentOf(c: Obj, text: string) {
  return { path: str(c.path) ?? '', line: positiveInt(c.line) ?? positiveInt(c.original_line), text };
}

function ask(body: Obj, who: Obj, instruction: string, rest: {
  number: number | null;
  /** The PR as the payload carries it; null for a comment on its conversation (then fetched). */
  pull: Obj | null;
  comments: ReviewComment[];
  /** A submitted review, whose comments are fetched; `needsComments` when only they make it a request. */
  review: { id: number; needsComments: boolean } | null;
  /** The review it belongs to: its other events are duplicates of this one. */
  reviewId: number | null;
}) {
  if (rest.number === null) return { kind: 'skip', reason: 'the event names no pull request number' } as const;
  return {
    kind: 'follow-up' as const, repository: str(obj(body.repository).full_name), instruction, ...rest,
    number: rest.number, actor: str(obj(who.user).login) ?? '', association: str(who.author_association) ?? '',
  };
}

/** What a pull request event asks, from its payload alone. */
export function readPullRequestEvent(event: string, body: Obj): PrInput {
  const action = str(body.action) ?? '';
  if (event === 'issue_comment') {
    if (action !== 'created') return { kind: 'skip', reason: `issue_comment.${action.slice(0, 64)} on a pull request` };
    const comment = obj(body.comment);
    const instruction = svcCommand(str(comment.body) ?? '');
    if (instruction === null) return { kind: 'skip', reason: 'comment does not start with /svc' };
    if (instruction === '') return { kind: 'skip', reason: '/svc with no instruction' };
    return ask(body, comment, instruction, {
      number: positiveInt(obj(body.issue).number), pull: null, comments: [], review: null, reviewId: null,
    });
  }
  const pull = obj(body.pull_request);
  if (event === 'pull_request_review_comment') {
    if (action !== 'created') return { kind: 'skip', reason: `pull_request_review_comment.${action.slice(0, 64)}` };
    const comment = obj(body.comment);
    const instruction = svcCommand(str(comment.body) ?? '');
    if (!instruction) return { kind: 'skip', reason: 'review comment does not start with /svc and an instruction' };
    return ask(body, comment, instruction, {
      number: positiveInt(pull.number), pull, comments: [commentOf(comment, instruction)], review: null,
      reviewId: positiveInt(comment.pull_request_review_id),
    });
  }
  if (action !== 'submitted') return { kind: 'skip', reason: `pull_request_review.${action.slice(0, 64)}` };
  const review = obj(body.review);
  const state = (str(review.state) ?? '').toLowerCase();
  if (state !== 'commented' && state !== 'changes_requested') {
    return { kind: 'skip', reason: `a review that is "${state.slice(0, 32)}" asks for no change` };
  }
  const id = positiveInt(review.id);
  if (id === null) return { kind: 'skip', reason: 'the review has no id' };
  // A review body that is a /svc command is a request by itself; any other is one when it has comments.
  const own = svcCommand(str(review.body) ?? '');
  const instruction = own ?? oneLine(str(review.body) ?? '');
  return ask(body, review, instruction, {
    number: positiveInt(pull.number), pull, comments: [], review: { id, needsComments: !own }, reviewId: id,
  });
}

/** A follow-up not queued: why, and the reply posted on the PR (null: none). */
class FollowUpNotQueued extends RefusedError {
  readonly reply: string | null;
  readonly audit: boolean;
  constructor(message: string, reply: string | null, audit: boolean) {
    super(message);
    this.reply = reply;
    this.audit = audit;
  }
}

const REPLY_HEAD = 'svc did not start a follow-up run:';

async function pullOf(ctx: TCtx, repo: string, a: FollowUpAsk): Promise<Obj> {
  if (a.pull) return a.pull;
  try {
    return obj(await ctx.deps.github.get(`/repos/${repo}/pulls/${a.number}`));
  } catch (err) {
    throw new FollowUpNotQueued(`the pull request could not be read from the GitHub API (${errorMessage(err)})`,
      null, false);
  }
}

/** The review's comments on the code (the event does not carry them); none when they cannot be read. */
async function reviewComments(ctx: TCtx, repo: string, a: FollowUpAsk): Promise<ReviewComment[]> {
  if (!a.review) return a.comments;
  let listed: unknown = [];
  try {
    listed = await ctx.deps.github.get(`/repos/${repo}/pulls/${a.number}/reviews/${a.review.id}/comments?per_page=100`);
  } catch (err) {
    ctx.deps.log.warn('review comments not read', { route: 'webhook', repo, pr: a.number, error: errorMessage(err) });
  }
  return list(listed).map(obj)
    .flatMap((c) => (str(c.body) ? [commentOf(c, oneLine(str(c.body)!))] : []));
}

/** The PR, the instruction, then each review comment as `path:line: text`. */
function followUpBrief(repo: string, a: FollowUpAsk, comments: ReviewComment[]): string {
  const shown = comments.slice(0, MAX_COMMENTS).map((c) =>
    `${capUtf8(c.path, 200) || '(the pull request)'}${c.line ? `:${c.line}` : ''}: ${capUtf8(c.text, COMMENT_BYTES)}`);
  const more = comments.length > MAX_COMMENTS ? [`(${comments.length - MAX_COMMENTS} more not shown)`] : [];
  const instruction = a.instruction || 'Address the review comments.';
  const review = shown.length ? ` — review comments: ${[...shown, ...more].join(' | ')}` : '';
  return briefOf('webhook', `Follow-up on pull request ${repo}#${a.number}: ${instruction}${review}`);
}

// Once its keys are new: svc's PR (branch svc/<run>, not a fork's, <run> a job of this server's), who asks, nothing
// else working on it; then the run before it and the brief. Else FollowUpNotQueued.
async function prepareFollowUp(ctx: TCtx, repo: string, a: FollowUpAsk): Promise<{ brief: string; args: string[] }> {
  const pull = await pullOf(ctx, repo, a);
  const head = obj(pull.head);
  const run = RUN_BRANCH.exec(str(head.ref) ?? '')?.[1];
  const sameRepo = (str(obj(head.repo).full_name) ?? '').toLowerCase() === repo.toLowerCase();
  const chain = run && sameRepo ? ctx.deps.pulls.onPullRequestBranch(repo, run) : [];
  if (!run || !chain.some((j) => j.run_id === run)) {
    throw new FollowUpNotQueued(`pull request #${a.number} is not svc's: its branch is not one a run of this server ` +
      'made', null, false);
  }
  if (!TRUSTED.has(a.association)) {
    const who = ASSOCIATIONS.has(a.association) ? a.association : 'not a member';
    throw new FollowUpNotQueued('the author may not ask for follow-ups', `${REPLY_HEAD} only a repository owner, ` +
      `member or collaborator may ask svc to change this pull request (this request's author is ${who}).`, true);
  }
  const writes = await mayWrite(ctx, repo, a.actor);
  if (writes !== true) {
    throw new FollowUpNotQueued(writes, `${REPLY_HEAD} only someone who may write to the repository may ask svc to ` +
      'change this pull request (asked of the GitHub API).', true);
  }
  if (str(pull.state) === 'closed') {
    throw new FollowUpNotQueued('the pull request is closed', `${REPLY_HEAD} this pull request is closed. Reopen it ` +
      'first, or ask for new work in an issue.', false);
  }
  const going = chain.find((j) => j.status === 'queued' || j.status === 'running');
  if (going) {
    const what = going.run_id ? `run ${going.run_source}/${going.run_id} (job ${going.id})` : `job ${going.id}`;
    throw new FollowUpNotQueued(`${what} is still working on this pull request`, `${REPLY_HEAD} ${what} is still ` +
      'working on this pull request. Ask again once it has ended; svc runs one follow-up at a time per pull request.',
    false);
  }
  const comments = await reviewComments(ctx, repo, a);
  if (a.review?.needsComments && comments.length === 0) {
    throw new FollowUpNotQueued('the review has no comments and its text is not a /svc command', null, false);
  }
  const previous = chain.find((j) => j.run_id !== null && j.run_source !== null)!;
  const receipt = previous.workdir === null ? null : receiptIntegrity(previous.workdir, previous.run_id!);
  const url = str(pull.html_url);
  const prUrl = url && URL.parse(url)?.href === url && /^https:\/\//.test(url) ? url : null;
  const brief = followUpBrief(repo, a, comments);
  return {
    brief,
    args: ['start', '--brief', brief, '--follow-up', `svc/${run}`, ...(prUrl ? ['--pr-url', prUrl] : []),
      '--previous', `${previous.run_source}/${previous.run_id}`, ...(receipt ? ['--previous-receipt', receipt] : []),
      '--detach'],
  };
}

/** Follow-ups of one PR are decided one at a time, so two cannot both find it idle. */
const lanes = new Map<string, Promise<unknown>>();

/** Per server, who was already told on which PR that they may not ask (the last TOLD_KEPT). */
const told = new WeakMap<object, Set<string>>();
const TOLD_KEPT = 10_000;

/** Whether this refusal is the first to this person on this PR: a hundred comments make one reply, as for answers. */
function firstTold(ctx: TCtx, repo: string, a: FollowUpAsk): boolean {
  let seen = told.get(ctx.deps);
  if (!seen) told.set(ctx.deps, (seen = new Set()));
  const key = `${repo.toLowerCase()}#${a.number}:${a.actor.toLowerCase()}`;
  if (seen.has(key)) return false;
  if (seen.size >= TOLD_KEPT) seen.delete(seen.values().next().value!);
  seen.add(key);
  return true;
}

/**
 * A follow-up the payload asks for on `repo` (the served repository it routed to), once checked against records;
 * `reply`, the PR's thread (its progress comment and answers).
 */
export async function queueFollowUp(
  ctx: TCtx, repo: string, event: string, a: FollowUpAsk, reply: Intake['reply'],
): Promise<Reply> {
  // A review and its comments arrive as separate events: the first is the request, the rest duplicates.
  const keys = a.reviewId === null ? [] : [`webhook:review:${repo.toLowerCase()}:${a.reviewId}`];
  const intake: Intake = {
    origin: 'webhook', repo, keys, reply,
    prepare: () => prepareFollowUp(ctx, repo, a),
  };
  try {
    return await inTurn(lanes, `${repo.toLowerCase()}#${a.number}`, () => enqueue(ctx, intake));
  } catch (err) {
    if (!(err instanceof FollowUpNotQueued)) throw err;
    const fields = { route: 'webhook', repo, pr: a.number, reason: err.message, request_id: ctx.requestId };
    if (err.audit) {
      ctx.deps.log.warn('audit: follow-up refused', {
        ...fields, actor: a.actor.slice(0, 64), association: a.association.slice(0, 32), event,
      });
    } else {
      ctx.deps.log.info('follow-up not queued', fields);
    }
    if (err.reply !== null && (!err.audit || firstTold(ctx, repo, a))) {
      ctx.deps.github.comment(repo, a.number, err.reply).catch((e: unknown) => {
        ctx.deps.log.warn('follow-up reply not posted', { ...fields, error: errorMessage(e) });
      });
    }
    return json(200, { status: err.reply === null ? 'skipped' : 'refused', reason: err.message });
  }
}
