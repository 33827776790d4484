// A minimal Kubernetes API client for the in-cluster service account: JSON requests with the mounted token. Global
// fetch cannot pin a per-request CA (that needs undici's Agent, a dependency), so an https API server with a CA file
// goes through node:https; plain http (kubectl proxy, tests) uses fetch.
import { join } from 'node:path';
import { httpsRequest } from './https-post.ts';
import { readOrNull } from '../spawn/tree.ts';
import { tryParseJson } from '../untrusted.ts';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

type KubeResponse = { status: number; body: unknown; text: string };

const TIMEOUT_MS = 30_000;

function readOptional(path: string): string | undefined {
  return readOrNull(path)?.trim() || undefined;
}

/** The API URL from the in-cluster environment, or undefined outside a cluster. */
export function inClusterApiUrl(env: NodeJS.ProcessEnv): string | undefined {
  if (env.SVC_K8S_API_URL) return env.SVC_K8S_API_URL.replace(/\/+$/, '');
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host) return undefined;
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  return `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** `serviceAccountDir` holds `token`, `ca.crt` and `namespace`. */
export function createKubeApi(opts: { apiUrl: string; serviceAccountDir: string }) {
  const base = opts.apiUrl.replace(/\/+$/, '');
  const ca = readOptional(join(opts.serviceAccountDir, 'ca.crt'));
  const namespace = readOptional(join(opts.serviceAccountDir, 'namespace')) || 'default';

  function headers(contentType: string | undefined): Record<string, string> {
    // Bound service-account tokens rotate: the kubelet rewrites the file, so read it on every request.
    const token = readOptional(join(opts.serviceAccountDir, 'token'));
    const h: Record<string, string> = { accept: 'application/json' };
    if (token) h.authorization = `Bearer ${token}`;
    if (contentType) h['content-type'] = contentType;
    return h;
  }

  function parse(status: number, text: string): KubeResponse {
    return { status, body: text ? tryParseJson(text) ?? null : null, text };
  }

  return {
    namespace,
    async request(method: string, path: string, body?: unknown, contentType?: string): Promise<KubeResponse> {
      const url = `${base}${path}`;
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const type = payload === undefined ? undefined : (contentType ?? 'application/json');
      const init = { method, headers: headers(type) };
      if (ca && url.startsWith('https:')) {
        const { status, text } = await httpsRequest(url, { ...init, ca, timeoutMs: TIMEOUT_MS }, payload);
        return parse(status, text);
      }
      const res = await fetch(url, {
        ...init, signal: AbortSignal.timeout(TIMEOUT_MS), ...(payload !== undefined ? { body: payload } : {}),
      });
      return parse(res.status, await res.text());
    },
  };
}
