// A redirect answered to svc's git. git follows none (http.followRedirects=false, src/engine/host-git.ts): a
// credential would follow it to the other host. git then only says "The requested URL returned error: 301"; to name
// where the server pointed, svc asks the same first question git asked (`info/refs`, no credential) and reads the
// Location header without following it.
// Must not: send a credential, or contact the host the redirect names.
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { FailedError, RefusedError } from '../errors.ts';

const REDIRECT = /unable to access '([^']+)': The requested URL returned error: (30[123578])/;

/** git's stderr named an HTTP redirect it did not follow; `url` is the URL git was asked to reach. */
export class GitRedirectedError extends FailedError {
  readonly url: string;
  constructor(url: string, message: string) {
    super(message);
    this.url = url;
  }
}

/** A git that could carry a credential was redirected; nothing was sent to the other host. */
export class CredentialRedirectError extends RefusedError {}

/** The URL git named when its stderr says the server answered a redirect, else null. */
export function redirectedUrl(stderr: string): string | null {
  return REDIRECT.exec(stderr)?.[1] ?? null;
}

/** `scheme://host[:port]/path` of a URL, for a message: no user name, password, query or fragment. */
function shown(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname.replace(/\/info\/refs$/, '')}`;
}

/**
 * Where `url`'s server sends git's first request (`info/refs?service=`), asked without a credential; null when it
 * does not redirect or cannot be asked. TLS trusts what git would: GIT_SSL_CAINFO when the operator set it.
 */
export function redirectTarget(url: string, service: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  let target: URL;
  try {
    target = new URL(`${url.replace(/\/+$/, '')}/info/refs?service=${service}`);
  } catch {
    return Promise.resolve(null);
  }
  const secure = target.protocol === 'https:';
  if (!secure && target.protocol !== 'http:') return Promise.resolve(null);
  return new Promise((resolve) => {
    const answered = (res: IncomingMessage): void => {
      res.resume();
      const location = res.headers.location;
      const status = res.statusCode ?? 0;
      try {
        resolve(status >= 300 && status < 400 && location ? shown(new URL(location, target)) : null);
      } catch {
        resolve(null);
      }
    };
    try {
      const ca = secure && env.GIT_SSL_CAINFO ? readFileSync(env.GIT_SSL_CAINFO) : undefined;
      const options = { method: 'GET', headers: { 'user-agent': 'git/svc' }, timeout: 30_000, ...(ca ? { ca } : {}) };
      const req = (secure ? httpsRequest : httpRequest)(target, options, answered);
      req.on('timeout', () => req.destroy());
      req.on('error', () => resolve(null));
      req.end();
    } catch {
      resolve(null);
    }
  });
}

/** The refusal for a git to `url` that met a redirect: it names both places when the server says where it points. */
export async function redirectRefusal(
  url: string, service: 'git-upload-pack' | 'git-receive-pack', env: NodeJS.ProcessEnv,
): Promise<CredentialRedirectError> {
  const to = await redirectTarget(url, service, env);
  let from = url;
  try {
    from = shown(new URL(url));
  } catch {
    // not a URL git could have been redirected from; named as given
  }
  const where = to ? `"${to}"` : 'another address (the server did not say where)';
  return new CredentialRedirectError(`The git server at "${from}" redirected to ${where}: svc follows no redirect, ` +
    'so a credential never reaches another host; set the remote to the address it now lives at');
}
