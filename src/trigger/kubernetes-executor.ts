// SVC_TRIGGER_EXECUTOR=kubernetes: each job becomes a batch/v1 Job running `svc start …` in its own pod
// (kubernetes-pod.ts; docs/deploy.md). The outcome is the signer container's termination message only, and only from
// a signer that exited 0: the run container's log is the agent's to write, and the signer's holds error texts (read
// only for a Job an older trigger made, whose signer wrote no termination message).
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { httpsRequest } from './https-post.ts';
import { readOrNull } from '../spawn/tree.ts';
import { urlAuthority } from '../http/http-server.ts';
import type { Obj } from '../json-value.ts';
import { list, num, obj, str, tryParseJson } from '../untrusted.ts';
import {
  buildPodSpec, kubernetesSettingsFromEnv, RUN_CONTAINER, SIGNER_CONTAINER, SIGNER_OUTCOME_MARK,
  type KubernetesSettings, type PodJob,
} from './kubernetes-pod.ts';
import {
  parseLaunchOutput, WITHDRAWN, type ExecJob, type JobExecutor, type LaunchResult,
} from './executor.ts';
import { outcomeFromState, questionOf, type FollowOptions, type RunOutcome } from './run-follow.ts';
import type { RunRef } from '../client/types.ts';
import type { Logger } from '../log.ts';
import { BadSettingError, errorMessage, FailedError } from '../errors.ts';
import { isValidSegment, newRunId } from '../engine/ids.ts';
import { ControlApiError, createControlClient } from '../client/client.ts';
import { loadPolicyFile, PolicyError } from '../engine/policy.ts';
import { settingOr } from '../settings-registry.ts';
import { oneLine } from '../one-line.ts';

const LABEL_MANAGED = 'app.kubernetes.io/managed-by';
const LABEL_JOB = 'svc.dev/job-id';
export const LABEL_RUN = 'svc.dev/run';

export function kubeJobName(jobId: string): string {
  return `svc-${jobId.toLowerCase().replace(/[^a-z0-9-]+/g, '-')}`.slice(0, 63).replace(/-+$/, '');
}

export function buildKubeJob(
  job: PodJob, s: KubernetesSettings, namespace: string, serverEnv: NodeJS.ProcessEnv, runId: string = newRunId(),
): Record<string, unknown> {
  const name = kubeJobName(job.id);
  const labels = { [LABEL_MANAGED]: 'svc-trigger', [LABEL_JOB]: name.slice(4) };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    // Found by its run from the start: a server that restarts before the pod announces the run still follows it.
    metadata: { name, namespace, labels: { ...labels, [LABEL_RUN]: runId } },
    spec: {
      // A run is not idempotent (it may open a PR): never let Kubernetes start it a second time.
      backoffLimit: 0,
      ttlSecondsAfterFinished: s.ttlSeconds,
      activeDeadlineSeconds: s.activeDeadlineSeconds,
      template: { metadata: { labels }, spec: buildPodSpec(job, s, serverEnv, runId) },
    },
  };
}

type JobState = { phase: 'running' | 'complete' | 'failed' | 'missing'; reason: string | null };

/** The signer container's `--run-id` in a Job as the API returned it. */
function runIdOf(job: unknown): string | null {
  const containers = obj(obj(obj(obj(job).spec).template).spec).containers;
  const args = list(containers).map(obj).find((c) => c.name === SIGNER_CONTAINER)?.args;
  if (!Array.isArray(args)) return null;
  const value: unknown = args[args.indexOf('--run-id') + 1];
  return isValidSegment(value) && args.includes('--run-id') ? value : null;
}

/** A pod's launch is never lost with the server (its Job is made once the launch is recorded): never UNLAUNCHED. */
type KubernetesExecutor = Omit<JobExecutor, 'follow'> & {
  follow: (...args: Parameters<JobExecutor['follow']>) => Promise<RunOutcome | null | 'aborted'>;
};

export function createKubernetesExecutor(opts: {
  env: NodeJS.ProcessEnv;
  log: Logger;
  controlUrl?: string | undefined;
  controlToken?: string | undefined;
  pollMs?: number;
  /** For a pod to print its run line (image pull, clone). */
  launchTimeoutMs?: number;
  /** With the Job gone, for the Control Plane to show the shipped run's final status. */
  shipGraceMs?: number;
}): KubernetesExecutor {
  const settings = kubernetesSettingsFromEnv(opts.env);
  const apiUrl = inClusterApiUrl(opts.env);
  if (!apiUrl) {
    throw new BadSettingError(
      'SVC_TRIGGER_EXECUTOR=kubernetes needs KUBERNETES_SERVICE_HOST (in a cluster) or SVC_K8S_API_URL',
    );
  }
  const api = createKubeApi({ apiUrl, serviceAccountDir: settingOr(opts.env, 'SVC_K8S_SA_DIR') });
  const namespace = settings.namespace || api.namespace;
  const ns = encodeURIComponent(namespace);
  const jobsPath = `/apis/batch/v1/namespaces/${ns}/jobs`;
  const pollMs = opts.pollMs ?? 2000;
  const launchTimeoutMs = opts.launchTimeoutMs ?? 15 * 60_000;
  const shipGraceMs = opts.shipGraceMs ?? 60_000;
  const log = opts.log;
  /** Run → Job name, for runs launched by this process (the run label covers restarts). */
  const known = new Map<string, string>();

  async function jobState(name: string): Promise<JobState> {
    const res = await api.request('GET', `${jobsPath}/${encodeURIComponent(name)}`);
    if (res.status === 404) return { phase: 'missing', reason: null };
    if (res.status !== 200) throw new FailedError(`Kubernetes API answered ${res.status} reading Job ${name}`);
    const status = obj(obj(res.body).status);
    const done = list(status.conditions).map(obj)
      .find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    if (done?.type === 'Complete' || num(status.succeeded) > 0) return { phase: 'complete', reason: null };
    if (done?.type === 'Failed' || num(status.failed) > 0) {
      return { phase: 'failed', reason: str(done?.message) ?? str(done?.reason) ?? 'pod failed' };
    }
    return { phase: 'running', reason: null };
  }

  async function jobPods(name: string): Promise<Obj[]> {
    const selector = encodeURIComponent(`job-name=${name}`);
    const pods = await api.request('GET', `/api/v1/namespaces/${ns}/pods?labelSelector=${selector}`);
    return list(obj(pods.body).items).map(obj);
  }

  /** One container's log: its stdout and stderr together. */
  async function containerLog(pod: Obj, container: string): Promise<string> {
    const podPath = `/api/v1/namespaces/${ns}/pods/${encodeURIComponent(str(obj(pod.metadata).name) ?? '')}`;
    const res = await api.request('GET', `${podPath}/log?container=${container}&limitBytes=65536`);
    return res.status === 200 ? `${res.text}\n` : '';
  }

  /**
   * The signer's outcome, its termination message (SIGNER_OUTCOME_PATH), from a signer that exited 0
   * (src/cli/pod.ts exits 0 right after writing it, whatever the run's status); one that exited otherwise fails the
   * job with the error it wrote there. No signer ended: the Job's status. Its log is for people, but for a Job an
   * older trigger made (its signer has no `--outcome`), whose signer printed its outcome last in its log instead.
   */
  async function signerOutcome(name: string, state: JobState): Promise<RunOutcome> {
    for (const pod of await jobPods(name)) {
      const signer = list(obj(pod.status).containerStatuses).map(obj).find((c) => c.name === SIGNER_CONTAINER);
      const ended = obj(obj(signer?.state).terminated);
      if (typeof ended.exitCode !== 'number') continue;
      // For one release (docs/deploy.md, "Upgrading"): a later one drops this with the line the signer prints.
      const args = list(obj(pod.spec).containers).map(obj).find((c) => c.name === SIGNER_CONTAINER)?.args;
      if (ended.exitCode === 0 && Array.isArray(args) && !args.includes('--outcome')) {
        return markedOutcome(await containerLog(pod, SIGNER_CONTAINER)) ?? jobFailed('its signer printed no outcome');
      }
      const text = str(ended.message) ?? '';
      const message = obj(tryParseJson(text));
      if (ended.exitCode === 0) {
        // A message the kubelet cut (more containers than SIGNER_OUTCOME_MAX_BYTES allows for) does not parse.
        return outcomeFromState(message) ??
          jobFailed(text ? 'its signer\'s outcome was cut or unreadable' : 'its signer left no outcome');
      }
      const error = str(message.error);
      const said = error ? oneLine(error).slice(0, 300) : 'no error recorded';
      return jobFailed(`its signer exited with ${ended.exitCode}: ${said}`);
    }
    return jobFailed(state.phase === 'complete' ? 'its signer\'s outcome is gone' : state.reason);
  }

  /** The run id the Job's pod spec fixed: the job's when we made it, else the existing Job's (a restart mid-launch). */
  async function createJob(job: ExecJob, name: string): Promise<{ runId: string } | { refused: string }> {
    const runId = job.run;
    // The run's budget the gate holds the pod to: the repository's, read from the server's checkout, not the pod's.
    let maxUsd: number | null;
    try {
      maxUsd = settings.gateUrl ? loadPolicyFile(job.workdir).policy.max_usd : null;
    } catch (err) {
      if (!(err instanceof PolicyError)) throw err;
      return { refused: `${job.workdir}/.svc/${err.message}` };
    }
    const spec = buildKubeJob({ ...job, maxUsd }, settings, namespace, opts.env, runId);
    const res = await api.request('POST', jobsPath, spec);
    if (res.status === 201 || res.status === 200 || res.status === 202) return { runId };
    if (res.status === 409) {
      const found = runIdOf((await api.request('GET', `${jobsPath}/${encodeURIComponent(name)}`)).body);
      if (found) return { runId: found };
      return { refused: `Kubernetes Job ${name} already exists without a run id in its pod spec` };
    }
    const message = str(obj(res.body).message);
    const detail = message ? `: ${message.slice(0, 200)}` : '';
    return { refused: `Kubernetes API refused Job ${name} (${res.status}${detail})` };
  }

  async function labelRun(name: string, run: RunRef): Promise<void> {
    const patch = { metadata: { labels: { [LABEL_RUN]: run.run }, annotations: { 'svc.dev/source': run.source } } };
    const path = `${jobsPath}/${encodeURIComponent(name)}`;
    const res = await api.request('PATCH', path, patch, 'application/merge-patch+json');
    if (res.status !== 200) {
      log.warn('could not label the Kubernetes Job with its run', { kube_job: name, status: res.status });
    }
  }

  async function findJob(run: RunRef): Promise<string | null> {
    const res = await api.request('GET', `${jobsPath}?labelSelector=${encodeURIComponent(`${LABEL_RUN}=${run.run}`)}`);
    return list(obj(res.body).items).map((item) => str(obj(obj(item).metadata).name)).find((name) => name) ?? null;
  }

  /** Whether the run container announced the run the pod spec fixed (a line naming any other run is ignored). */
  async function announced(name: string, runId: string): Promise<RunRef | null> {
    let log = '';
    for (const pod of await jobPods(name)) log += await containerLog(pod, RUN_CONTAINER);
    const lines = log.split('\n').filter((l) => l.includes(runId));
    const run = parseLaunchOutput(lines.join('\n'));
    return run && run.run === runId && run.source === settings.source ? run : null;
  }

  async function launch(job: ExecJob): Promise<LaunchResult> {
    if (job.word && !await job.word) return { exitCode: null, run: null, error: WITHDRAWN };
    const name = kubeJobName(job.id);
    try {
      const created = await createJob(job, name);
      if ('refused' in created) return { exitCode: null, run: null, error: created.refused };
      log.info('kubernetes job created', { job: job.id, kube_job: name });
      const deadline = Date.now() + launchTimeoutMs;
      for (;;) {
        let run = await announced(name, created.runId);
        const state = run ? null : await jobState(name);
        // The pod may print its line and end between the two reads: look at the log once more before giving up.
        if (state && state.phase !== 'running') run = await announced(name, created.runId);
        if (run) {
          known.set(`${run.source}/${run.run}`, name);
          await labelRun(name, run);
          return { exitCode: 0, run, error: null };
        }
        if (state!.phase !== 'running') {
          const { phase, reason } = state!;
          const error = `Kubernetes Job ${name} ended without a {"source","run"} line (${reason ?? phase})`;
          return { exitCode: phase === 'complete' ? 0 : 1, run: null, error };
        }
        if (Date.now() > deadline) {
          const error = `Kubernetes Job ${name} printed no run within ${launchTimeoutMs} ms`;
          return { exitCode: null, run: null, error };
        }
        await sleep(pollMs);
      }
    } catch (err) {
      return { exitCode: null, run: null, error: `Kubernetes API: ${errorMessage(err)}` };
    }
  }

  // While the pod runs only its question is read from the Control Plane, never its outcome (agent-written data).
  const control = opts.controlUrl
    ? createControlClient({ url: opts.controlUrl, token: opts.controlToken, timeoutMs: 10_000 }) : null;
  let refusalLogged = false;
  async function fromControl<T>(run: RunRef, read: (state: Record<string, unknown>) => T | null): Promise<T | null> {
    return control ? control.getRun(run).then((state) => read({ ...state })).catch((err: unknown) => {
      // A token that may not read the run is a setting to fix, not "no copy yet": said once (docs/trigger.md).
      if (err instanceof ControlApiError && (err.status === 401 || err.status === 403) && !refusalLogged) {
        refusalLogged = true;
        log.error('the Control Plane refuses this trigger the runs of its pods: their questions and a vanished ' +
          'Job\'s outcome go unread (SVC_CONTROL_TOKEN needs read=<source>)', { ...run, error: err.message });
      }
      return null;
    }) : null;
  }

  function jobFailed(reason: string | null): RunOutcome {
    return {
      status: 'failed', verdict: null, pr_url: null, cost_usd: null, started_at: null, ended_at: null,
      error: `Kubernetes Job failed: ${reason ?? 'unknown reason'}`,
    };
  }

  async function follow(run: RunRef, signal: AbortSignal, f?: FollowOptions): Promise<RunOutcome | null | 'aborted'> {
    if (!isValidSegment(run.source) || !isValidSegment(run.run)) return null;
    let name: string | null = known.get(`${run.source}/${run.run}`) ?? null;
    let missingSince: number | null = null;
    let asked: string | null | undefined;
    for (;;) {
      if (signal.aborted) return 'aborted';
      try {
        name ??= await findJob(run);
        const state = name ? await jobState(name) : null;
        if (!state || state.phase === 'missing') {
          // No Job (past its TTL, or never labelled): only what the pod's signer shipped can tell. Until its first
          // batch moved the run onto the sealed key (`key_moved`, which replaces the row), the row is what the run
          // container shipped with the handed key, which the agent could read: no outcome.
          const copy = await fromControl(run, (shipped) => shipped);
          const moved = copy?.key_moved === true;
          const signed = moved ? outcomeFromState(copy) : null;
          if (signed) return signed;
          missingSince ??= Date.now();
          if (!opts.controlUrl || Date.now() - missingSince >= shipGraceMs) {
            // A Job never found (after a restart, one its label lookup misses may still run) is not known gone:
            // interrupted, as for a run with no copy, rather than a failure nobody saw.
            if (!copy || name === null) return null;
            const lost = moved ? 'gone before its signer ended the run (the signer moved the run onto its key and ' +
              'shipped no end)' : 'gone before its signer shipped the run (the Control Plane holds only what the run ' +
              'container shipped)';
            return jobFailed(lost);
          }
        } else if (state.phase !== 'running') {
          // Not the Control Plane's copy: the run container holds its token and could ship any status there.
          return await signerOutcome(name!, state);
        } else if (f?.onQuestion) {
          const question = await fromControl(run, questionOf);
          if (question !== asked) f.onQuestion(question);
          asked = question;
        }
      } catch (err) {
        log.warn('kubernetes follow poll failed; retrying', { run: run.run, error: errorMessage(err) });
      }
      try {
        await sleep(pollMs, undefined, { signal });
      } catch {
        return 'aborted';
      }
    }
  }

  return { source: settings.source, launch, follow };
}

/** The last line that starts with the mark: an older signer's own is its last output, after any a message forged. */
function markedOutcome(log: string): RunOutcome | null {
  const last = log.split('\n').filter((line) => line.startsWith(SIGNER_OUTCOME_MARK)).pop();
  return last === undefined ? null : outcomeFromState(obj(tryParseJson(last.slice(SIGNER_OUTCOME_MARK.length))));
}

// The API client for the in-cluster service account: JSON requests with the mounted token. Global fetch cannot pin a
// per-request CA (that needs undici's Agent, a dependency), so https with a CA file goes through node:https; plain
// http (kubectl proxy, tests) uses fetch.
type KubeResponse = { status: number; body: unknown; text: string };

const API_TIMEOUT_MS = 30_000;

function readOptional(path: string): string | undefined {
  return readOrNull(path)?.trim() || undefined;
}

export function inClusterApiUrl(env: NodeJS.ProcessEnv): string | undefined {
  if (env.SVC_K8S_API_URL) return env.SVC_K8S_API_URL.replace(/\/+$/, '');
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host) return undefined;
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  return `https://${urlAuthority(host, port)}`;
}

/** `serviceAccountDir` holds `token`, `ca.crt` and `namespace`. */
export function createKubeApi(opts: { apiUrl: string; serviceAccountDir: string }) {
  const base = opts.apiUrl.replace(/\/+$/, '');
  const ca = readOptional(join(opts.serviceAccountDir, 'ca.crt'));
  const namespace = readOptional(join(opts.serviceAccountDir, 'namespace')) || 'default';

  function headers(contentType: string | undefined): Record<string, string> {
    // Bound service-account tokens rotate: the kubelet rewrites the file, so read it on every request.
    const token = readOptional(join(opts.serviceAccountDir, 'token'));
    return {
      accept: 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(contentType ? { 'content-type': contentType } : {}),
    };
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
        const { status, text } = await httpsRequest(url, { ...init, ca, timeoutMs: API_TIMEOUT_MS }, payload);
        return parse(status, text);
      }
      // A 3xx goes back to the caller as any other status, never followed with the token or the Job (DESIGN §7a),
      // as node:https above never follows one.
      const res = await fetch(url, {
        ...init, signal: AbortSignal.timeout(API_TIMEOUT_MS), ...(payload !== undefined ? { body: payload } : {}),
        redirect: 'manual',
      });
      return parse(res.status, await res.text());
    },
  };
}
