// A loopback stand-in for the Kubernetes batch/v1 Jobs and core/v1 Pods APIs, with a tiny "kubelet" that runs each
// Job's pod as real child processes: the init containers one after another (a failed one fails the pod), then the
// container. Each volume is a folder of its own, seen by a container at its mountPath: every argument, variable and
// working folder that names a mount path is rewritten to that folder. Secret volumes hold the files `podSecretFiles`
// (or `podSecrets`' token) gives them. Containers with `args` run the fake pod svc, or the real svc with `svc` set;
// containers with a `command` (the clone) run that command only with the real svc.
import { createServer, type Server } from 'node:http';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync, existsSync, symlinkSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { constants as osConstants } from 'node:os';

export const FAKE_POD_SVC = fileURLToPath(new URL('./fake-pod-svc.mjs', import.meta.url));

export interface KubeJob {
  manifest: any;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  status: Record<string, unknown>;
  /** Log of each container, by name: its stdout and stderr together, as Kubernetes keeps it; stderr of all, for a
   * failing test's message. */
  logs: Record<string, string>;
  /** The exit status of each container that ended, by name (the pod status' `state.terminated.exitCode`). */
  exitCodes?: Record<string, number>;
  /** The termination message of each container that ended and has a terminationMessagePath (`state.terminated.message`:
   * the file's first 4096 bytes, as Kubernetes keeps at most). */
  messages?: Record<string, string>;
  stderr: string;
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
  /** Called before each container of a pod starts (a test can act between two containers). */
  beforeContainer: ((job: string, container: string) => void | Promise<void>) | null;
  /** Called before each request is answered (a test can change the cluster between two reads). */
  onRequest: ((method: string, path: string) => void) | null;
  finish(name: string, ok: boolean): void;
  close(): Promise<void>;
}

export interface StandInOptions {
  /** Run containers' args with the real svc (dist/cli.js) and their commands as is, instead of the fake pod svc. */
  svc?: string;
}

type EnvVar = { name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string; optional?: boolean } } };
type Container = {
  name: string; args?: string[]; command?: string[]; env?: EnvVar[]; terminationMessagePath?: string;
  workingDir?: string; volumeMounts?: Array<{ name: string; mountPath: string }>;
};

export async function startKubeStandIn(workRoot: string, opts: StandInOptions = {}): Promise<KubeStandIn> {
  const jobs = new Map<string, KubeJob>();
  const requests: KubeStandIn['requests'] = [];
  const children = new Set<ReturnType<typeof spawn>>();
  let closed = false;
  const state: KubeStandIn = {
    url: '', jobs, requests, runPods: true, refuseWith: null, onRequest: null, beforeContainer: null, finish, close,
  };

  function finish(name: string, ok: boolean): void {
    const job = jobs.get(name);
    if (!job) return;
    job.status = ok
      ? { succeeded: 1, conditions: [{ type: 'Complete', status: 'True' }] }
      : { failed: 1, conditions: [{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit' }] };
  }

  /** One folder per volume; a Secret volume gets its files. */
  function makeVolumes(podDir: string, volumes: Array<Record<string, any>>): Map<string, string> {
    const dirs = new Map<string, string>();
    for (const v of volumes) {
      const dir = join(podDir, 'volumes', v.name);
      mkdirSync(dir, { recursive: true });
      if (v.secret) {
        const files = podSecretFiles.get(v.secret.secretName) ?? { token: podSecrets.get(v.secret.secretName) ?? '' };
        for (const [file, content] of Object.entries(files)) writeFileSync(join(dir, file), content, { mode: 0o400 });
      }
      dirs.set(v.name, dir);
    }
    return dirs;
  }

  function runContainer(job: KubeJob, c: Container, dirs: Map<string, string>, podDir: string): Promise<boolean> {
    // The termination message file is the container's own, as the kubelet makes it: on no volume.
    const termination = c.terminationMessagePath ? join(podDir, 'termination', c.name) : null;
    if (termination) {
      mkdirSync(dirname(termination), { recursive: true });
      writeFileSync(termination, '');
    }
    const mounts = (c.volumeMounts ?? [])
      .map((m) => ({ path: m.mountPath, dir: dirs.get(m.name)! }))
      .concat(termination ? [{ path: c.terminationMessagePath!, dir: termination }] : [])
      .sort((a, b) => b.path.length - a.path.length);
    const local = (value: string): string => {
      const m = mounts.find((x) => value === x.path || value.startsWith(`${x.path}/`));
      return m ? m.dir + value.slice(m.path.length) : value;
    };
    // A mount inside another (the key Secret in the signer's home) is a link at that place in the outer volume.
    for (const inner of mounts) {
      const outer = mounts.find((x) => x !== inner && inner.path.startsWith(`${x.path}/`));
      if (!outer) continue;
      const at = outer.dir + inner.path.slice(outer.path.length);
      mkdirSync(dirname(at), { recursive: true });
      if (!existsSync(at)) symlinkSync(inner.dir, at);
    }
    const env: Record<string, string> = { PATH: process.env.PATH ?? '' };
    for (const e of c.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      const value = ref ? podEnvSecrets.get(ref.name)?.[ref.key] : e.value;
      if (value === undefined && !ref?.optional) throw new Error(`container ${c.name}: no value for ${e.name}`);
      if (value !== undefined) env[e.name] = ref ? value : local(value);
    }
    const svc = [process.execPath, opts.svc ?? FAKE_POD_SVC];
    const argv = c.command ? c.command.map(local) : [...svc, ...(c.args ?? []).map(local)];
    if (c.command && !opts.svc) return Promise.resolve(true);
    const cwd = c.workingDir ? local(c.workingDir) : podDir;
    const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    job.logs[c.name] = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (job.logs[c.name] += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      job.logs[c.name] += d;
      job.stderr += `[${c.name}] ${d}`;
    });
    return new Promise((resolve) => {
      child.on('close', (code, signal) => {
        children.delete(child);
        job.exitCodes = { ...job.exitCodes, [c.name]: code ?? 128 + (signal ? osConstants.signals[signal] : 0) };
        if (termination) {
          job.messages = { ...job.messages, [c.name]: readFileSync(termination).subarray(0, 4096).toString('utf8') };
        }
        resolve(code === 0);
      });
    });
  }

  async function runPod(name: string, job: KubeJob): Promise<void> {
    const spec = job.manifest.spec.template.spec;
    const podDir = join(workRoot, name);
    mkdirSync(podDir, { recursive: true });
    const dirs = makeVolumes(podDir, spec.volumes ?? []);
    job.pod = `${name}-x7k2q`;
    for (const c of [...(spec.initContainers ?? []), ...spec.containers] as Container[]) {
      if (closed) return;
      await state.beforeContainer?.(name, c.name);
      if (!(await runContainer(job, c, dirs, podDir))) return finish(name, false);
    }
    finish(name, true);
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      requests.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, contentType: req.headers['content-type'] });
      state.onRequest?.(req.method ?? '', url.pathname);
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': status === 200 && url.pathname.endsWith('/log') ? 'text/plain' : 'application/json' });
        res.end(typeof body === 'string' ? body : JSON.stringify(body));
      };
      const m = /^\/apis\/batch\/v1\/namespaces\/([^/]+)\/jobs(?:\/([^/]+))?$/.exec(url.pathname);
      const p = /^\/api\/v1\/namespaces\/([^/]+)\/pods(?:\/([^/]+)\/log)?$/.exec(url.pathname);
      const selector = url.searchParams.get('labelSelector') ?? '';
      const [selKey, selValue] = selector.split('=');
      const asItem = (name: string, j: KubeJob) => ({
        metadata: { name, labels: j.labels, annotations: j.annotations }, spec: j.manifest.spec, status: j.status,
      });
      if (m && req.method === 'POST' && !m[2]) {
        if (state.refuseWith) return send(state.refuseWith, { kind: 'Status', message: 'jobs.batch is forbidden: User "system:serviceaccount:svc:svc-trigger" cannot create resource' });
        const manifest = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const name = manifest.metadata.name as string;
        if (jobs.has(name)) return send(409, { kind: 'Status', reason: 'AlreadyExists' });
        const labels = { ...manifest.metadata.labels };
        const job: KubeJob = { manifest, labels, annotations: {}, status: {}, logs: {}, stderr: '', pod: null };
        jobs.set(name, job);
        if (state.runPods) void runPod(name, job);
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
        const spec = job?.manifest.spec?.template?.spec;
        const statuses = (spec?.containers ?? []).flatMap((c: Container) => {
          const exitCode = job?.exitCodes?.[c.name];
          const message = job?.messages?.[c.name];
          return exitCode === undefined ? [] : [{ name: c.name, state: { terminated: { exitCode, ...(message ? { message } : {}) } } }];
        });
        const pod = { metadata: { name: job?.pod }, spec, status: { containerStatuses: statuses } };
        return send(200, { items: job?.pod ? [pod] : [] });
      }
      if (p && p[2]) {
        const job = [...jobs.values()].find((j) => j.pod === p[2]);
        if (!job) return send(404, { kind: 'Status', reason: 'NotFound' });
        return send(200, job.logs[url.searchParams.get('container') ?? ''] ?? '');
      }
      send(404, { kind: 'Status', reason: 'NotFound' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  async function close(): Promise<void> {
    closed = true;
    for (const child of children) child.kill('SIGKILL');
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  return state;
}

/** Secret name → the `token` key's value, for Secrets the stand-in kubelet mounts. */
export const podSecrets = new Map<string, string>();
/** Secret name → its files (name → content), for Secrets with other keys (the runner's signing key). */
export const podSecretFiles = new Map<string, Record<string, string>>();
/** Secret name → its keys, for a container's `env` `valueFrom.secretKeyRef`. */
export const podEnvSecrets = new Map<string, Record<string, string>>();
