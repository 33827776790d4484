// Source-host webhook (POST /webhook): an issue opened with label `svc` or labelled `svc`, or a comment starting
// `/svc`, by someone with write-level association, becomes a job; everything else is skipped.
import { sanitizeBrief, DEFAULT_BRIEF_BYTES } from '../brief.ts';

export const TRIGGER_LABEL = 'svc';
export const COMMENT_PREFIX = '/svc';
// Anyone can open issues and comment on a public repository: only these associations may start work.
const TRUSTED = new Set(['OWNER', 'MEMBER', 'COLLABORATOR']);

export type SourceHostInput = { kind: 'job'; brief: string } | { kind: 'skip'; reason: string };

type Obj = Record<string, unknown>;
function obj(value: unknown): Obj {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Obj) : {};
}
function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function hasLabel(issue: Obj): boolean {
  return Array.isArray(issue.labels) && issue.labels.some((l) => obj(l).name === TRIGGER_LABEL);
}

export function readSourceHost(event: string, body: Obj): SourceHostInput {
  const issue = obj(body.issue);
  const repo = str(obj(body.repository).full_name);
  const ref = `${repo}#${typeof issue.number === 'number' || typeof issue.number === 'string' ? issue.number : ''}`;
  const issueBrief = (): string => sanitizeBrief(`${ref} ${str(issue.title)}${issue.body ? ` — ${str(issue.body)}` : ''}`, DEFAULT_BRIEF_BYTES);
  if (event === 'issues') {
    if (body.action === 'labeled' && obj(body.label).name === TRIGGER_LABEL) return { kind: 'job', brief: issueBrief() };
    if (body.action === 'opened' && hasLabel(issue)) {
      if (!TRUSTED.has(str(issue.author_association))) return { kind: 'skip', reason: 'issue author may not start jobs' };
      return { kind: 'job', brief: issueBrief() };
    }
    return { kind: 'skip', reason: `issues.${str(body.action)} without the "${TRIGGER_LABEL}" label` };
  }
  if (event === 'issue_comment' && body.action === 'created') {
    const comment = obj(body.comment);
    const text = str(comment.body).trim();
    if (!text.startsWith(COMMENT_PREFIX) || /^\/svc\S/.test(text)) return { kind: 'skip', reason: `comment does not start with ${COMMENT_PREFIX}` };
    if (!TRUSTED.has(str(comment.author_association))) return { kind: 'skip', reason: 'comment author may not start jobs' };
    const ask = text.slice(COMMENT_PREFIX.length);
    return { kind: 'job', brief: sanitizeBrief(`${ref} ${str(issue.title)} — ${ask}`, DEFAULT_BRIEF_BYTES) };
  }
  return { kind: 'skip', reason: `event "${event}" does not start a job` };
}
