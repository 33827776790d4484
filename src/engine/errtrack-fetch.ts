// Fetches an error-tracker issue and its latest event with curl; the token travels only in a config on curl's stdin.
import { startChild } from '../spawn/start.ts';
import { isLoopbackHost } from '../http/guards.ts';
import { BadInputError, BadSettingError, FailedError } from '../errors.ts';
import type { ErrtrackExport } from './errtrack-spec.ts';

type IssueApi = { host: string; issueUrl: string; eventUrl: string };

/**
 * Maps an issue page URL to its REST URLs; `ERRTRACK_URL` replaces the API base (`/api/0` added when it has no path).
 * The token goes to the API host only: the ERRTRACK_URL host, else the page's own, which must then be sentry.io or a
 * subdomain — an issue URL from a chat message or alert must not name the host that receives ERRTRACK_AUTH_TOKEN.
 */
export function issueApiUrls(pageUrl: string, env: NodeJS.ProcessEnv): IssueApi {
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
  const api = new URL(base);
  if (api.protocol !== 'https:' && !(api.protocol === 'http:' && isLoopbackHost(api.hostname))) {
    throw new BadSettingError(`Refusing to send ERRTRACK_AUTH_TOKEN over ${api.protocol} to ${api.host}: use https`);
  }
  const issuePath = org ? `/organizations/${encodeURIComponent(org)}/issues/${id}/` : `/issues/${id}/`;
  return { host: api.host, issueUrl: `${base}${issuePath}`, eventUrl: `${base}${issuePath}events/latest/` };
}

function quote(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** One GET through `curl --config -`: argv carries no URL and no secret, only the config switch. */
function curlJson(url: string, token: string): Promise<unknown> {
  const config = [`url = ${quote(url)}`, `header = ${quote(`Authorization: Bearer ${token}`)}`,
    'header = "Accept: application/json"', 'proto = "=https,http"', 'silent', 'show-error', 'fail', 'max-time = 30',
    'max-filesize = 20000000', ''].join('\n');
  return new Promise((resolve, reject) => {
    // Paths, proxies and CA settings only (the spawn policy's 'fetch' kind): the token travels on stdin.
    const child = startChild(['curl', '--config', '-'], { kind: 'fetch', base: process.env, stdio: 'pipe' });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (c: Buffer) => out.push(c));
    child.stderr?.on('data', (c: Buffer) => err.push(c));
    child.on('error', (e) => {
      reject(new FailedError(`Could not run curl to fetch the issue: ${e.message}`, { cause: e }));
    });
    child.on('close', (code) => {
      if (code !== 0) {
        const detail = Buffer.concat(err).toString('utf8').split(token).join('***').trim().split('\n')[0] ?? '';
        reject(new FailedError(`Fetching ${url} failed (curl exit ${code}${detail ? `: ${detail}` : ''})`));
        return;
      }
      try {
        resolve(JSON.parse(Buffer.concat(out).toString('utf8')));
      } catch {
        reject(new FailedError(`The error tracker answered ${url} with something that is not JSON`));
      }
    });
    child.stdin?.end(config);
  });
}

export async function fetchIssueExport(pageUrl: string, env: NodeJS.ProcessEnv): Promise<ErrtrackExport> {
  const token = env.ERRTRACK_AUTH_TOKEN;
  if (!token) {
    throw new BadSettingError('ERRTRACK_AUTH_TOKEN is not set, so nothing was fetched. ' +
      'Set it, or save the issue as JSON and run: svc start <file.json>');
  }
  if (!/^[\x21-\x7e]+$/.test(token) || token.includes('"') || token.includes('\\')) {
    throw new BadSettingError('ERRTRACK_AUTH_TOKEN contains characters a token cannot have');
  }
  const api = issueApiUrls(pageUrl, env);
  const issue = (await curlJson(api.issueUrl, token)) as Record<string, unknown>;
  let event: Record<string, unknown> | null = null;
  try {
    event = (await curlJson(api.eventUrl, token)) as Record<string, unknown>;
  } catch {
    // The issue alone still makes a spec; the stack trace section then says none was found.
  }
  return { issue, event };
}
