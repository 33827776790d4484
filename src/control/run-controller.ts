// How the Control Plane starts and steers runs on this machine: `svc start … --detach` children with an allowlisted env.
// It never runs a provider itself; stop goes through the engine's identity-checked process-group stop.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ControlDeps } from './deps.ts';
import type { RunRow } from '../db/runs-store.ts';
import { stopLocalRun } from '../engine/stop.ts';

export interface RunController {
  /** Runs `svc <args…>` (a start/resume/retry/verify launcher); if it fails, the run says why. */
  launch(source: string, run: string, args: string[], onFailure: 'fail-run' | 'event-only'): void;
  /** Stops a local run (status already set to stopping by the caller); resolves once it is stopped. */
  stop(row: RunRow): Promise<void>;
  close(): Promise<void>;
}

const CLI = fileURLToPath(new URL(`../cli${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url));
const STDERR_CAP = 16 * 1024;

// What a launched run may inherit: locale and paths, provider logins, and the credentials the engine itself uses
// (it strips them again before a provider runs). Webhook secrets and SVC_API_TOKEN are never passed.
const ALLOW = new Set([
  'PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'TZ', 'TERM', 'TMPDIR', 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY',
  'http_proxy', 'https_proxy', 'no_proxy', 'SSL_CERT_FILE', 'NODE_EXTRA_CA_CERTS', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL',
  'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'GEMINI_API_KEY', 'GOOGLE_API_KEY', 'OPENROUTER_API_KEY', 'ERRTRACK_AUTH_TOKEN',
  'ERRTRACK_URL', 'GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_API_URL', 'TRACKERA_API_KEY', 'TRACKERA_API_URL', 'SVC_CONTROL_TOKEN_FILE',
  'GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL', 'GIT_SSH_COMMAND',
]);

export function childEnv(deps: ControlDeps): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(deps.env)) {
    if (value !== undefined && (ALLOW.has(key) || key.startsWith('LC_') || key.startsWith('XDG_'))) env[key] = value;
  }
  env.SVC_CONTROL_URL = deps.url();
  env.SVC_SOURCE = deps.settings.source;
  env.SVC_CONTROL_ANSWER_DIR = deps.settings.answerDir;
  env.SVC_ORIGIN = 'control';
  if (deps.settings.token) env.SVC_CONTROL_TOKEN = deps.settings.token;
  return env;
}

export function createRunController(deps: ControlDeps): RunController {
  const pending = new Set<Promise<unknown>>();

  function track<T>(p: Promise<T>): Promise<T> {
    pending.add(p);
    void p.finally(() => pending.delete(p));
    return p;
  }

  function recordFailure(source: string, run: string, message: string, mode: 'fail-run' | 'event-only'): void {
    const now = deps.clock();
    const row = deps.stores.runs.get(source, run);
    if (mode === 'fail-run' && row && (row.status === 'queued' || row.status === 'running')) {
      deps.stores.runs.setStatus(source, run, 'failed', now, { error: message, ended_at: now });
    }
    if (row) deps.bus.publish([deps.stores.events.append(source, run, { kind: 'error', data: { message }, ts: now })]);
    deps.log.warn('run launch failed', { source, run, error: message });
  }

  return {
    launch(source, run, args, onFailure) {
      const child = spawn(process.execPath, [CLI, ...args], { env: childEnv(deps), stdio: ['ignore', 'ignore', 'pipe'], shell: false });
      let stderr = '';
      child.stderr?.on('data', (c: Buffer) => {
        if (stderr.length < STDERR_CAP) stderr += c.toString('utf8');
      });
      track(
        new Promise<void>((resolve) => {
          child.on('error', (err) => {
            recordFailure(source, run, `Could not start svc: ${err.message}`, onFailure);
            resolve();
          });
          child.on('close', (code) => {
            if (code !== 0) {
              const line = stderr.trim().split('\n').pop() ?? '';
              recordFailure(source, run, line.replace(/^svc start: /, '') || `svc start exited with code ${code}`, onFailure);
            }
            resolve();
          });
        }),
      );
    },
    stop(row) {
      return track(
        (async () => {
          let status = 'stopped';
          let endedAt = deps.clock();
          if (row.repo_path) {
            const state = await stopLocalRun(row.repo_path, row.run).catch(() => null);
            if (state) {
              status = state.status;
              endedAt = state.ended_at ? Date.parse(state.ended_at) : endedAt;
            }
          }
          // The worker ships its own "stopped"; this covers a worker that was killed before it could.
          const now = deps.clock();
          const current = deps.stores.runs.get(row.source, row.run);
          if (current && (current.status === 'stopping' || current.status === 'queued' || current.status === 'running' || current.status === 'blocked')) {
            deps.stores.runs.setStatus(row.source, row.run, status === 'succeeded' || status === 'failed' ? status : 'stopped', now, { ended_at: endedAt, question: null });
            deps.bus.publish([deps.stores.events.append(row.source, row.run, { kind: 'run.status', data: { from: current.status, to: 'stopped' }, ts: now })]);
          }
        })(),
      );
    },
    async close() {
      await Promise.race([Promise.allSettled([...pending]), new Promise((r) => setTimeout(r, 15_000).unref())]);
    },
  };
}
