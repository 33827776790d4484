// POST /trackerb (Jira Cloud): a created issue, or an update touching assignee or labels, for the configured
// assignees or labels (no signed time: the delivery id and body hash are the replay defence); the summary goes back
// as an issue comment in ADF, and a `/svc answer` comment answers the run.
import type { Reply } from '../../http/respond.ts';
import { deliveryKeys } from '../../webhook-sources.ts';
import { answerCommand, commentTime, teamRefusal } from '../answers.ts';
import { errorMessage } from '../../errors.ts';
import { SEPARATOR, type ReplyChannel, type SummaryParts } from '../summary.ts';
import { isJsonObject, type Obj } from '../../json-value.ts';
import { list, obj, str, tryParseJson } from '../../untrusted.ts';
import { pinnedIn, type Decision, type Received, type TCtx } from '../intake.ts';

const ISSUE_KEY = /^[A-Za-z][A-Za-z0-9_]*-\d+$/;

// The description is a rich document (ADF): flattened to plain text before it becomes the brief.
const BLOCKS = new Set([
  'paragraph', 'heading', 'blockquote', 'listItem', 'codeBlock', 'panel', 'tableRow', 'rule', 'mediaSingle', 'expand',
]);
const MAX_DEPTH = 64;

function attr(node: Obj, name: string): string | null {
  return str(obj(node.attrs)[name]);
}

function walk(node: unknown, out: string[], depth: number): void {
  if (depth > MAX_DEPTH || !isJsonObject(node)) return;
  const type = typeof node.type === 'string' ? node.type : '';
  if (type === 'text' && typeof node.text === 'string') out.push(node.text);
  else if (type === 'hardBreak') out.push('\n');
  else if (type === 'mention') out.push(attr(node, 'text') ?? '');
  else if (type === 'emoji') out.push(attr(node, 'text') ?? attr(node, 'shortName') ?? '');
  else if (type === 'inlineCard' || type === 'blockCard') out.push(` ${attr(node, 'url') ?? ''} `);
  else if (type === 'tableCell' || type === 'tableHeader') out.push(' | ');
  if (Array.isArray(node.content)) for (const child of node.content) walk(child, out, depth + 1);
  if (BLOCKS.has(type)) out.push('\n');
}

/** ADF doc → text with block boundaries as newlines; a plain string passes through; anything else → ''. */
export function flattenAdf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (!isJsonObject(value)) return '';
  const out: string[] = [];
  walk(value, out, 0);
  return out.join('').replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
}

type TrackerbInput =
  | { kind: 'job'; key: string; text: string; project: string | null }
  | { kind: 'skip'; reason: string };

/** `trackerb:issue_created` in the spec, `jira:issue_created` in the real service: the part after the colon. */
function eventName(body: Obj): string | null {
  return str(body.webhookEvent)?.split(':').pop() ?? null;
}

function touches(items: Obj[], field: string): boolean {
  const named = (value: unknown) => (str(value) ?? '').toLowerCase() === field;
  return items.some((i) => named(i.field) || named(i.fieldId));
}

/** Current labels, plus the changelog's space-separated `toString` form in case the fields lag behind. */
function labelsOf(fields: Obj, items: Obj[]): string[] {
  const labels = Array.isArray(fields.labels) ? fields.labels.filter((l): l is string => typeof l === 'string') : [];
  for (const item of items) {
    const to: unknown = item['toString' as keyof Obj];
    if ((str(item.field) ?? '').toLowerCase() === 'labels' && typeof to === 'string') {
      labels.push(...to.split(/\s+/).filter(Boolean));
    }
  }
  return labels;
}

/** An Atlassian account id: `<number>:<id>` (557058:f1ad…), or the older 24 hex digits. */
const ACCOUNT_ID = /^(\d+:[A-Za-z0-9_-]+|[0-9a-fA-F]{24})$/;

// Each configured value is compared, without regard to case, to the fields of its kind: a display name is the person's
// own choice, so one that reads like the bot's account id or email must not pass a filter pinned to that id or email.
// An email may also be a Jira Server/Data Center username (`name`), which the instance's administrators set.
function assigneeMatches(fields: Obj, wanted: readonly string[]): boolean {
  const a = obj(fields.assignee);
  const lower = (value: unknown) => str(value)?.toLowerCase();
  return wanted.some((w) => {
    const value = w.toLowerCase();
    if (ACCOUNT_ID.test(w)) return lower(a.accountId) === value;
    if (w.includes('@')) return [lower(a.emailAddress), lower(a.name)].includes(value);
    return [lower(a.displayName), lower(a.name)].includes(value);
  });
}

export function readTrackerb(
  body: Obj, filter: { assignees: readonly string[]; labels: readonly string[] },
): TrackerbInput {
  const event = eventName(body);
  const changelog = obj(body.changelog).items;
  const items = list(changelog).map(obj);
  if (event !== 'issue_created' && event !== 'issue_updated') {
    return { kind: 'skip', reason: `event "${str(body.webhookEvent) ?? ''}" does not start a job` };
  }
  if (event === 'issue_updated' && !touches(items, 'assignee') && !touches(items, 'labels')) {
    return { kind: 'skip', reason: 'the change touches neither assignee nor labels' };
  }
  if (filter.assignees.length === 0 && filter.labels.length === 0) {
    return { kind: 'skip', reason: 'neither TRACKERB_ASSIGNEES nor TRACKERB_LABELS is configured' };
  }
  const issue = obj(body.issue);
  const fields = obj(issue.fields);
  const key = str(issue.key);
  if (!key || !ISSUE_KEY.test(key)) return { kind: 'skip', reason: 'issue without a key' };
  const labelled = labelsOf(fields, items).some((l) => filter.labels.includes(l));
  if (!labelled && !assigneeMatches(fields, filter.assignees)) {
    return { kind: 'skip', reason: 'issue is not assigned to a configured user and has no configured label' };
  }
  const summary = str(fields.summary) ?? '';
  const description = flattenAdf(fields.description);
  const text = `${key}: ${summary}${description ? ` — ${description}` : ''}`;
  // The project's key routes it (trackerb=…), else the issue key's prefix (KAN-22 is project KAN's issue 22).
  const project = str(obj(fields.project).key) ?? key.slice(0, key.lastIndexOf('-'));
  return { kind: 'job', key, text, project };
}

/** The site a delivery was sent for: the host of the issue's (or comment's) REST address, which the admin webhook's
 * payload names nowhere else; lower case, as TRACKERB_SITES is read. */
function siteOf(body: Obj): string | null {
  const self = str(obj(body.issue).self) ?? str(obj(body.comment).self);
  return (self === null ? null : URL.parse(self)?.host.toLowerCase()) ?? null;
}

/**
 * Whether the comment account (TRACKERB_BASE_URL, one site) comments on this site's issues. With several sites pinned,
 * only on its own: another site's KAN-31 is a different issue from the one its key names there.
 */
function commentsOn(ctx: TCtx, site: string | null): boolean {
  const pins = ctx.deps.settings.orgs.trackerb;
  const base = ctx.deps.settings.notify.trackerb?.baseUrl;
  return pins === null || pins.size < 2 || (base !== undefined && URL.parse(base)?.host.toLowerCase() === site);
}

export function readTrackerbDelivery(ctx: TCtx, { body }: Received): Decision {
  // A site's issue keys and comment ids are its own: another site's comment answers nothing, its issue routes nowhere.
  const site = siteOf(body);
  const stranger = !pinnedIn(ctx.deps.settings.orgs.trackerb, site);
  const answered = stranger ? null : answerFromTrackerb(ctx, body, site);
  if (answered) return { kind: 'reply', reply: answered };
  const input = readTrackerb(body, ctx.deps.settings.trackerbFilter);
  if (input.kind === 'skip') return input;
  // No reply target, so no summary or question there and no answer from there: the job still runs.
  const target = { issue_key: input.key, thread: trackerbThread(site, input.key) };
  const reply = commentsOn(ctx, site) ? { channel: 'trackerb', target } as const : undefined;
  return { kind: 'job', text: input.text, route: input.project, stranger, reply };
}

type AdfText = { type: 'text'; text: string; marks?: Array<{ type: string; attrs?: Record<string, string> }> };

/** One paragraph; ADF text nodes must not be empty, and plain neighbours are merged. */
function adfSummary(parts: SummaryParts): { type: 'doc'; version: 1; content: unknown[] } {
  const nodes: AdfText[] = [];
  const push = (node: AdfText): void => {
    if (node.text === '') return;
    const last = nodes[nodes.length - 1];
    if (!node.marks && last && !last.marks) last.text += node.text;
    else nodes.push(node);
  };
  parts.forEach((part, i) => {
    if (i > 0) push({ type: 'text', text: SEPARATOR });
    for (const piece of part) {
      if ('own' in piece) push({ type: 'text', text: piece.own });
      else if ('link' in piece) {
        push({ type: 'text', text: piece.link, marks: [{ type: 'link', attrs: { href: piece.link } }] });
      }
      else push({ type: 'text', text: piece.data, marks: [{ type: 'code' }] });
    }
  });
  return { type: 'doc', version: 1, content: [{ type: 'paragraph', content: nodes }] };
}

export const trackerbReply: ReplyChannel = {
  configured: (config) => config.trackerb !== undefined,
  prepare(target, parts, config) {
    const tb = config.trackerb;
    if (!tb) return 'TRACKERB_BASE_URL, TRACKERB_EMAIL and TRACKERB_API_TOKEN are not all set';
    if (typeof target.issue_key !== 'string') return 'no trackerb issue key';
    return {
      ...trackerbApi(tb, `issue/${encodeURIComponent(target.issue_key)}/comment`),
      body: JSON.stringify({ body: adfSummary(parts) }),
      what: 'trackerb API',
    };
  },
};

// An answer is a `/svc answer <text>` comment on the issue by someone the tracker says could be assigned it (asked
// with the comment account, TRACKERB_*: without it none is taken).

function trackerbThread(site: string | null, key: string): string {
  return `trackerb:${site ?? ''}/${key.toUpperCase()}`;
}

/** Whether the account is assignable to the issue, or why that cannot be known. */
async function onIssueTeam(ctx: TCtx, key: string, accountId: string): Promise<true | string> {
  const tb = ctx.deps.settings.notify.trackerb;
  if (!tb) return 'TRACKERB_BASE_URL, TRACKERB_EMAIL and TRACKERB_API_TOKEN are not all set, so the issue\'s team ' +
    'cannot be checked';
  const query = new URLSearchParams({ issueKey: key, accountId });
  const { url, headers } = trackerbApi(tb, `user/assignable/search?${query}`);
  try {
    const res = await ctx.deps.post(url, headers, '', 'GET');
    if (res.status !== 200) return `the trackerb API answered HTTP ${res.status} about the issue's team`;
    const users = tryParseJson(res.text);
    if (users === undefined) return 'the trackerb API answered something that is not JSON about the issue\'s team';
    const listed = Array.isArray(users) && users.some((u) => str(obj(u).accountId) === accountId);
    return listed ? true : 'the comment\'s author cannot be assigned this issue (not on its team)';
  } catch (err) {
    // The reason is posted where the answer was written: the error (a host, a proxy's words) goes only to the log.
    ctx.deps.log.warn('issue team not known', { route: 'trackerb', issue: key, error: errorMessage(err) });
    return 'the trackerb API could not say who is on the issue\'s team';
  }
}

/** A call to the tracker's REST API (`path` under /rest/api/3/) as the comment account. */
function trackerbApi(tb: { baseUrl: string; email: string; token: string }, path: string) {
  const authorization = `Basic ${Buffer.from(`${tb.email}:${tb.token}`).toString('base64')}`;
  const url = new URL(`${tb.baseUrl.replace(/\/+$/, '')}/rest/api/3/${path}`);
  return { url, headers: { authorization, accept: 'application/json' } };
}

/** A created `/svc answer <text>` comment's reply; null when the event is not one. */
function answerFromTrackerb(ctx: TCtx, body: Obj, site: string | null): Promise<Reply> | null {
  if (eventName(body) !== 'comment_created') return null;
  const comment = obj(body.comment);
  const command = answerCommand(flattenAdf(comment.body));
  const key = str(obj(body.issue).key);
  const accountId = str(obj(comment.author).accountId)?.slice(0, 128);
  if (command === null || !key || !ISSUE_KEY.test(key) || !accountId) return null;
  // The account, not the name it shows, which the person can change.
  const who = accountId.slice(0, 100);
  const commentId = (str(comment.id) ?? '').slice(0, 40);
  const commentKey = commentId ? [`trackerb:comment:${site ?? ''}/${commentId}`] : [];
  return ctx.deps.answers.reply({
    origin: 'trackerb', thread: trackerbThread(site, key), ...command, who, writtenAt: commentTime(comment.created),
    refusal: teamRefusal(ctx.deps.settings.repos), standing: () => onIssueTeam(ctx, key, accountId),
    place: `trackerb issue ${key} comment ${commentId}`,
    keys: deliveryKeys('trackerb', ctx.req.headers, ctx.raw, ...commentKey),
  });
}
