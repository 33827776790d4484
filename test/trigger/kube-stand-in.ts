// A loopback stand-in for the Kubernetes batch/v1 Jobs and core/v1 Pods APIs, with a tiny "kubelet" that runs each
// Job's container args as a real child process (the fake pod svc) and turns its exit into Job conditions.
import { createServer, type Server } from 'node:http';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

export const FAKE_POD_SVC = fileURLToPath(new URL('./fake-pod-svc.mjs', import.meta.url));

export interface KubeJob {
  manifest: any;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  status: Record<string, unknown>;
  log: string;
  pod: string | null;
}

export interface KubeStandIn {
  url: string;
  jobs: Map<string, KubeJob>;
  requests: Array<{ method: string; url: string; authorization: string | undefined; contentType: string | undefined }>;
  /** When false, created Jobs stay pending (no pod) until the test acts. */
  runPods: boolean;
  /** Answer POST /jobs with this status instead of creating (e.g. 403). */
  refuseWith: number | null;
  finish(name: string, ok: boolean, log?: string): void;
  close(): Promise<void>;
}

export async function startKubeStandIn(workRoot: string): Promise<KubeStandIn> {
  const jobs = new Map<string, KubeJob>();
  const requests: KubeStandIn['requests'] = [];
  const children = new Set<ReturnType<typeof spawn>>();
  const state: KubeStandIn = { url: '', jobs, requests, runPods: true, refuseWith: null, finish, close };

  function finish(name: string, ok: boolean, log?: string): void {
    const job = jobs.get(name);
    if (!job) return;
    if (log !== undefined) job.log = log;
    job.status = ok
      ? { succeeded: 1, conditions: [{ type: 'Complete', status: 'True' }] }
      : { failed: 1, conditions: [{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit' }] };
  }

  function runPod(name: string, job: KubeJob): void {
    const container = job.manifest.spec.template.spec.containers[0];
    const env: Record<string, string> = { PATH: process.env.PATH ?? '' };
    for (const e of container.env as Array<{ name: string; value: string }>) env[e.name] = e.value;
    const cwd = join(workRoot, name);
    mkdirSync(cwd, { recursive: true });
    // A mounted Secret volume becomes a file where the manifest says it is; here, a temp copy.
    if (env.SVC_CONTROL_TOKEN_FILE) {
      const file = join(cwd, 'control-token');
      writeFileSync(file, podSecrets.get(job.manifest.spec.template.spec.volumes.find((v: any) => v.name === 'control-token').secret.secretName) ?? '');
      env.SVC_CONTROL_TOKEN_FILE = file;
    }
    job.pod = `${name}-x7k2q`;
    const child = spawn(process.execPath, [FAKE_POD_SVC, ...container.args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    child.stdout.setEncoding('utf8').on('data', (d: string) => (job.log += d));
    child.on('close', (code) => {
      children.delete(child);
      finish(name, code === 0);
    });
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      requests.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, contentType: req.headers['content-type'] });
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': status === 200 && url.pathname.endsWith('/log') ? 'text/plain' : 'application/json' });
        res.end(typeof body === 'string' ? body : JSON.stringify(body));
      };
      const m = /^\/apis\/batch\/v1\/namespaces\/([^/]+)\/jobs(?:\/([^/]+))?$/.exec(url.pathname);
      const p = /^\/api\/v1\/namespaces\/([^/]+)\/pods(?:\/([^/]+)\/log)?$/.exec(url.pathname);
      const selector = url.searchParams.get('labelSelector') ?? '';
      const [selKey, selValue] = selector.split('=');
      const asItem = (name: string, j: KubeJob) => ({ metadata: { name, labels: j.labels, annotations: j.annotations }, status: j.status });
      if (m && req.method === 'POST' && !m[2]) {
        if (state.refuseWith) return send(state.refuseWith, { kind: 'Status', message: 'jobs.batch is forbidden: User "system:serviceaccount:svc:svc-trigger" cannot create resource' });
        const manifest = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const name = manifest.metadata.name as string;
        if (jobs.has(name)) return send(409, { kind: 'Status', reason: 'AlreadyExists' });
        const job: KubeJob = { manifest, labels: { ...manifest.metadata.labels }, annotations: {}, status: {}, log: '', pod: null };
        jobs.set(name, job);
        if (state.runPods) runPod(name, job);
        return send(201, asItem(name, job));
      }
      if (m && req.method === 'GET' && !m[2]) {
        return send(200, { items: [...jobs].filter(([, j]) => j.labels[selKey!] === selValue).map(([n, j]) => asItem(n, j)) });
      }
      if (m && m[2]) {
        const job = jobs.get(m[2]);
        if (!job) return send(404, { kind: 'Status', reason: 'NotFound' });
        if (req.method === 'PATCH') {
          const patch = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          Object.assign(job.labels, patch.metadata?.labels);
          Object.assign(job.annotations, patch.metadata?.annotations);
        }
        return send(200, asItem(m[2], job));
      }
      if (p && !p[2]) {
        const job = selKey === 'job-name' ? jobs.get(selValue!) : undefined;
        return send(200, { items: job?.pod ? [{ metadata: { name: job.pod } }] : [] });
      }
      if (p && p[2]) {
        const job = [...jobs.values()].find((j) => j.pod === p[2]);
        return job ? send(200, job.log) : send(404, { kind: 'Status', reason: 'NotFound' });
      }
      send(404, { kind: 'Status', reason: 'NotFound' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  async function close(): Promise<void> {
    for (const child of children) child.kill('SIGKILL');
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  return state;
}

/** Secret name → the `token` key's value, for Secrets the stand-in kubelet mounts. */
export const podSecrets = new Map<string, string>();
