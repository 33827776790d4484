// Error-tracker input (DESIGN §6): an export, or an issue fetched with curl, rendered as the task spec.
import type { Obj } from '../json-value.ts';
import { list, objOrNull as obj, textOf, tryParseJson } from '../untrusted.ts';
import { markdownSpec } from './text.ts';
import { oneLine } from '../one-line.ts';
import { BadInputError, BadSettingError, FailedError } from '../errors.ts';
import { runCollect } from '../spawn/start.ts';
import { isLoopbackHost } from '../http/guards.ts';

type ErrtrackExport = { issue: Obj | null; event: Obj | null };

/** Accepts an issue export, an event, `{issue, event}`, or an alert/issue webhook body holding either. */
function normalizeExport(input: unknown): ErrtrackExport {
  const o = obj(input);
  if (!o) throw new BadInputError('The error-tracker export must be a JSON object');
  if (obj(o.issue) || obj(o.event)) return { issue: obj(o.issue), event: obj(o.event) };
  const data = obj(o.data);
  if (data && (obj(data.event) || obj(data.issue))) return { issue: obj(data.issue), event: obj(data.event) };
  if ('entries' in o || 'exception' in o || 'eventID' in o || 'event_id' in o) return { issue: null, event: o };
  if ('title' in o || 'shortId' in o || 'culprit' in o) return { issue: o, event: null };
  throw new BadInputError(
    'Not an error-tracker export: expected an issue, an event, or an object with "issue" and "event"',
  );
}

/** The objects of the event's `type` section: its entry of that type (an issue export's form), else its own field. */
function sectionValues(event: Obj | null, type: 'exception' | 'breadcrumbs'): Obj[] {
  const entry = list(event?.entries).map(obj).find((e) => e?.type === type);
  const values = entry ? obj(entry.data)?.values : obj(event?.[type])?.values;
  return list(values).map(obj).filter((v): v is Obj => v !== null);
}

function toFrame(raw: Obj) {
  const file = textOf(raw.filename) ?? textOf(raw.absPath) ?? textOf(raw.abs_path) ?? textOf(raw.module) ?? '<unknown>';
  const lineValue = raw.lineNo ?? raw.lineno;
  const line = typeof lineValue === 'number' ? lineValue : null;
  const fn = textOf(raw.function) ?? textOf(raw.rawFunction) ?? '<anonymous>';
  return { file: oneLine(file, 300), line, fn: oneLine(fn, 200), inApp: raw.inApp === true || raw.in_app === true };
}

/** Frames newest call first, in-app frames before library frames (stable within each group). */
function framesOf(values: Obj[]) {
  const frames = [...values].reverse().flatMap((value) =>
    list(obj(value.stacktrace)?.frames).map(obj).filter((f): f is Obj => f !== null).reverse().map(toFrame));
  return [...frames.filter((f) => f.inApp), ...frames.filter((f) => !f.inApp)];
}

function crumbLine(c: Obj): string {
  const when = textOf(c.timestamp) ?? '';
  const tag = [textOf(c.category), textOf(c.level)].filter(Boolean).join('/');
  const message = textOf(c.message) ?? (obj(c.data) ? JSON.stringify(c.data) : '');
  return oneLine(`${when} [${tag || textOf(c.type) || 'event'}] ${message}`, 400);
}

function tagValue(event: Obj | null, key: string): string | null {
  for (const t of list(event?.tags)) {
    const tag = obj(t);
    if (tag && tag.key === key) return textOf(tag.value);
    if (Array.isArray(t) && t[0] === key) return textOf(t[1]);
  }
  return null;
}

/** The task spec and brief an export (in any form normalizeExport accepts) becomes. */
export function errtrackSpec(input: unknown): { spec: string; brief: string } {
  const { issue, event } = normalizeExport(input);
  const values = sectionValues(event, 'exception');
  const top = values[values.length - 1] ?? null;
  const meta = obj(issue?.metadata) ?? obj(event?.metadata);
  const errorType = textOf(top?.type) ?? textOf(meta?.type);
  const errorValue = textOf(top?.value) ?? textOf(meta?.value);
  const named = textOf(issue?.title) ?? textOf(event?.title) ?? [errorType, errorValue].filter(Boolean).join(': ');
  const title = oneLine(named || 'Unknown error', 300);
  const error = [errorType && oneLine(errorType, 200), errorValue && oneLine(errorValue, 1000)]
    .filter(Boolean).join(': ') || title;
  const frames = framesOf(values).slice(0, 40)
    .map((f) => `- ${f.file}:${f.line ?? '?'} in ${f.fn}${f.inApp ? '' : ' (library)'}`);
  const breadcrumbs = sectionValues(event, 'breadcrumbs').slice(-30).map((c) => `- ${crumbLine(c)}`);
  const release = textOf(obj(event?.release)?.version) ?? textOf(event?.release) ?? tagValue(event, 'release')
    ?? textOf(obj(issue?.lastRelease)?.version);
  const shortId = textOf(issue?.shortId);
  const link = textOf(issue?.permalink) ?? textOf(event?.web_url);
  const context = [
    `- Release: ${release ?? 'unknown'}`,
    `- Environment: ${textOf(event?.environment) ?? tagValue(event, 'environment') ?? 'unknown'}`,
    `- Culprit: ${textOf(event?.culprit) ?? textOf(issue?.culprit) ?? 'unknown'}`,
    ...(shortId ? [`- Issue: ${shortId}`] : []),
    ...(link ? [`- Link: ${link}`] : []),
  ];
  const spec = markdownSpec(`Fix: ${title}`, [], {
    Error: [error],
    'Stack trace': frames.length ? frames : ['(no stack trace in the export)'],
    Breadcrumbs: breadcrumbs.length ? breadcrumbs : ['(none recorded)'],
    Context: context,
    'Acceptance criteria': [
      `- The error "${oneLine(error, 300)}" no longer occurs.`,
      '- A regression test covers it.',
      '- Existing tests pass.',
    ],
  });
  return { spec, brief: oneLine(`Fix ${title}`, 1500) };
}

/**
 * An issue page's REST URLs, on ERRTRACK_URL's host when set, else on the page's own, which must then be sentry.io's:
 * an issue URL from a chat message or alert must not name the host that receives ERRTRACK_AUTH_TOKEN.
 */
export function issueApiUrls(pageUrl: string, env: NodeJS.ProcessEnv) {
  const page = new URL(pageUrl);
  const pageHost = page.hostname.toLowerCase().replace(/\.$/, '');
  if (!env.ERRTRACK_URL && pageHost !== 'sentry.io' && !pageHost.endsWith('.sentry.io')) {
    throw new BadSettingError(`Refusing to send ERRTRACK_AUTH_TOKEN to "${page.host}": without ERRTRACK_URL only ` +
      "sentry.io hosts get it. Set ERRTRACK_URL to your error tracker's address to use another host");
  }
  const id = /\/issues\/(\d+)/.exec(page.pathname)?.[1];
  if (!id) throw new BadInputError(`Not an issue URL: "${pageUrl}"`);
  const org = /\/organizations\/([^/]+)\//.exec(page.pathname)?.[1]
    ?? /^([a-z0-9-]+)\.sentry\.io$/i.exec(page.hostname)?.[1]
    ?? null;
  let base = `${page.protocol}//${page.host}/api/0`;
  if (env.ERRTRACK_URL) {
    const override = new URL(env.ERRTRACK_URL);
    const path = override.pathname.replace(/\/+$/, '');
    base = `${override.protocol}//${override.host}${path === '' ? '/api/0' : path}`;
  }
  const issuePath = org ? `/organizations/${encodeURIComponent(org)}/issues/${id}/` : `/issues/${id}/`;
  return { issueUrl: `${base}${issuePath}`, eventUrl: `${base}${issuePath}events/latest/` };
}

function quote(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

const MAX_ANSWER_BYTES = 20_000_000;

/** A secret for fetchJson: the setting it comes from (named in refusals) and its Authorization scheme. */
type Credential = { name: string; token: string; scheme: 'Bearer ' | '' };

/**
 * The one way svc fetches an issue (the error tracker's, trackera's): one request through `curl -q --config -`, a POST
 * of `body` when given. Argv carries no URL and no secret, only the config switch; no redirect is followed, so the
 * token goes to `url`'s origin alone (DESIGN §7a), and over https unless that is a loopback address.
 */
export async function fetchJson(url: string, credential: Credential, body?: string): Promise<unknown> {
  const { name, token, scheme } = credential;
  // A quote, backslash or line break would end the config's quoted value and start a line of its own.
  if (!/^[\x21-\x7e]+$/.test(token) || token.includes('"') || token.includes('\\')) {
    throw new BadSettingError(`${name} contains characters a token cannot have`);
  }
  const target = new URL(url);
  if (target.protocol !== 'https:' && !(target.protocol === 'http:' && isLoopbackHost(target.hostname))) {
    throw new BadSettingError(`Refusing to send ${name} over ${target.protocol} to ${target.host}: use https`);
  }
  // The parsed URL, not the text: the parser drops tabs and line breaks that would start a config line of their own.
  const config = [`url = ${quote(target.href)}`, `header = ${quote(`Authorization: ${scheme}${token}`)}`,
    'header = "Accept: application/json"', 'proto = "=https,http"', 'silent', 'show-error', 'fail', 'max-time = 30',
    `max-filesize = ${MAX_ANSWER_BYTES}`,
    ...(body === undefined ? [] : ['header = "Content-Type: application/json"', `data-raw = ${quote(body)}`]),
    ''].join('\n');
  // Paths, proxies and CA settings only (the spawn policy's 'fetch' kind): the token travels on stdin. -q first: no
  // ~/.curlrc may add options (a `location-trusted` there would send the token on to a redirect's host).
  const done = await runCollect(['curl', '-q', '--config', '-'], {
    kind: 'fetch', base: process.env, input: config, maxBuffer: 2 * MAX_ANSWER_BYTES,
  });
  const error = done.error as NodeJS.ErrnoException | null;
  // Only a start that failed names a syscall (an exit code, a kill or a full buffer does not).
  if (error?.syscall) {
    throw new FailedError(`Could not run curl to fetch the issue: ${error.message}`, { cause: error });
  }
  if (error?.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') {
    // An older curl keeps no max-filesize on a chunked answer: the buffer's cap ends it.
    throw new FailedError(`The error tracker answered ${url} with more than ${MAX_ANSWER_BYTES / 1e6} MB`);
  }
  if (done.status !== 0) {
    const detail = done.stderr.split(token).join('***').trim().split('\n')[0] ?? '';
    throw new FailedError(`Fetching ${url} failed (curl exit ${done.status}${detail ? `: ${detail}` : ''})`);
  }
  const answer = tryParseJson(done.stdout);
  if (answer === undefined) {
    throw new FailedError(`The error tracker answered ${url} with something that is not JSON`);
  }
  return answer;
}

export async function fetchIssueExport(pageUrl: string, env: NodeJS.ProcessEnv): Promise<ErrtrackExport> {
  const token = env.ERRTRACK_AUTH_TOKEN;
  if (!token) {
    throw new BadSettingError('ERRTRACK_AUTH_TOKEN is not set, so nothing was fetched. ' +
      'Set it, or save the issue as JSON and run: svc start <file.json>');
  }
  const api = issueApiUrls(pageUrl, env);
  const credential = { name: 'ERRTRACK_AUTH_TOKEN', token, scheme: 'Bearer ' } as const;
  const issue = obj(await fetchJson(api.issueUrl, credential));
  // The issue alone still makes a spec; the stack trace section then says none was found.
  const event = obj(await fetchJson(api.eventUrl, credential).catch(() => null));
  return { issue, event };
}
