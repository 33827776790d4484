// A minimal Kubernetes API client for the in-cluster service account: JSON requests with the mounted token.
// Global fetch cannot pin a per-request CA in Node ≥ 22.13 (that needs undici's Agent, a dependency), so an
// https API server with a CA file goes through node:https with `ca`; plain http (kubectl proxy, tests) uses fetch.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { httpsRequest } from './https-post.ts';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeResponse {
  status: number;
  body: unknown;
  text: string;
}

export interface KubeApi {
  request(method: string, path: string, body?: unknown, contentType?: string): Promise<KubeResponse>;
  readonly namespace: string;
}

export interface KubeApiOptions {
  /** https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT unless overridden (SVC_K8S_API_URL). */
  apiUrl: string;
  /** Holds `token`, `ca.crt`, `namespace` (SVC_K8S_SA_DIR overrides the mount path). */
  serviceAccountDir: string;
  namespace?: string;
  fetch?: typeof fetch;
  timeoutMs?: number;
}

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The API URL from the in-cluster environment, or undefined outside a cluster. */
export function inClusterApiUrl(env: NodeJS.ProcessEnv): string | undefined {
  if (env.SVC_K8S_API_URL) return env.SVC_K8S_API_URL.replace(/\/+$/, '');
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host) return undefined;
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  return `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export function createKubeApi(opts: KubeApiOptions): KubeApi {
  const base = opts.apiUrl.replace(/\/+$/, '');
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const ca = readOptional(join(opts.serviceAccountDir, 'ca.crt'));
  const namespace = opts.namespace || readOptional(join(opts.serviceAccountDir, 'namespace')) || 'default';

  function headers(contentType: string | undefined): Record<string, string> {
    // Bound service-account tokens rotate: the kubelet rewrites the file, so read it on every request.
    const token = readOptional(join(opts.serviceAccountDir, 'token'));
    const h: Record<string, string> = { accept: 'application/json' };
    if (token) h.authorization = `Bearer ${token}`;
    if (contentType) h['content-type'] = contentType;
    return h;
  }

  function parse(status: number, text: string): KubeResponse {
    try {
      return { status, body: text ? JSON.parse(text) : null, text };
    } catch {
      return { status, body: null, text };
    }
  }

  return {
    namespace,
    async request(method, path, body, contentType) {
      const url = `${base}${path}`;
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const type = payload === undefined ? undefined : (contentType ?? 'application/json');
      const init = { method, headers: headers(type) };
      if (ca && url.startsWith('https:') && !opts.fetch) {
        const { status, text } = await httpsRequest(url, { ...init, ca, timeoutMs }, payload);
        return parse(status, text);
      }
      const res = await (opts.fetch ?? fetch)(url, {
        ...init, signal: AbortSignal.timeout(timeoutMs), ...(payload !== undefined ? { body: payload } : {}),
      });
      return parse(res.status, await res.text());
    },
  };
}
