// `trackera:<id>`: the saved webhook snapshot under .svc/inbox/trackera/, else the tracker API with a key, else the
// reference alone.
import { readFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { oneLine, str, fence } from './text.ts';

interface TrackerIssue {
  identifier: string;
  title: string | null;
  description: string | null;
  url: string | null;
}

const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/**
 * A run started by the trigger server reads the delivery its job came from (`jobs/$SVC_JOB_ID.json`, removed once
 * read: the spec keeps what it said), else the newest delivery for the issue (`<id>.json`).
 */
function fromSnapshot(repo: string, id: string, env: NodeJS.ProcessEnv): TrackerIssue | null {
  const inbox = join(repo, '.svc', 'inbox', 'trackera');
  const jobId = env.SVC_JOB_ID;
  const own = jobId && FILE_NAME.test(jobId) ? join(inbox, 'jobs', `${jobId}.json`) : null;
  const path = own && existsSync(own) ? own : join(inbox, `${id}.json`);
  if (!existsSync(path)) return null;
  const raw = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  if (path === own) rmSync(own, { force: true });
  const data = (typeof raw.data === 'object' && raw.data ? raw.data : raw) as Record<string, unknown>;
  return issueOf(data, id);
}

function issueOf(data: Record<string, unknown>, id: string): TrackerIssue {
  return {
    identifier: str(data.identifier) ?? id,
    title: str(data.title),
    description: str(data.description),
    url: str(data.url),
  };
}

const ISSUE_QUERY = 'query($id:String!){issue(id:$id){identifier title description url}}';

async function fromApi(id: string, env: NodeJS.ProcessEnv): Promise<TrackerIssue | null> {
  const key = env.TRACKERA_API_KEY;
  if (!key) return null;
  const url = env.TRACKERA_API_URL || 'https://api.linear.app/graphql';
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: key },
    body: JSON.stringify({ query: ISSUE_QUERY, variables: { id } }),
    signal: AbortSignal.timeout(30_000),
  });
  if (!res.ok) return null;
  const body = (await res.json()) as { data?: { issue?: Record<string, unknown> } };
  const issue = body.data?.issue;
  if (!issue) return null;
  return issueOf(issue, id);
}

export async function trackeraSpec(
  repo: string, id: string, env: NodeJS.ProcessEnv,
): Promise<{ spec: string; brief: string }> {
  let issue = fromSnapshot(repo, id, env);
  if (!issue) {
    try {
      issue = await fromApi(id, env);
    } catch {
      issue = null;
    }
  }
  if (!issue || (!issue.title && !issue.description)) {
    return {
      brief: `trackera:${id}`,
      spec: `# Tracker issue trackera:${id}\n\nNo details were available offline; work from the reference.\n\n` +
        '## Acceptance criteria\n\n- The issue is resolved.\n- Existing tests pass.\n',
    };
  }
  const title = oneLine(issue.title ?? `trackera:${id}`, 300);
  return {
    brief: oneLine(`trackera:${issue.identifier} ${title}`, 1500),
    spec: [
      `# ${issue.identifier}: ${title}`,
      '',
      ...(issue.url ? [`Link: ${issue.url}`, ''] : []),
      '## Description',
      '',
      fence(issue.description ?? '(none)', 'text'),
      '',
      '## Acceptance criteria',
      '',
      '- The issue is resolved as described.',
      '- Existing tests pass.',
      '',
    ].join('\n'),
  };
}
