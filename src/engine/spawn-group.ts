// Runs an agent (a provider or a check) in its own process group with argv (no shell), streams its lines and keeps a
// capped copy of the output. Its environment is the spawn policy's 'agent' kind: `env` is the base it filters.
import { startChild, type ChildProcess } from '../spawn/start.ts';
import { identityOf, signalGroup, type ProcIdentity } from './proc-group.ts';

export interface GroupRun {
  child: ChildProcess;
  identity: ProcIdentity;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; output: Buffer; truncated: boolean }>;
}

export interface SpawnGroupOptions {
  cwd: string;
  /** The environment the agent's is derived from (svc's own); the spawn policy drops svc's secrets and SVC_*. */
  env: NodeJS.ProcessEnv;
  /** Added by name after filtering (SVC_TASK_FILE, SVC_RUN_ID…). */
  extra?: Record<string, string>;
  stdin?: string;
  onLine?: (stream: 'stdout' | 'stderr', line: string) => void;
  maxBytes: number;
  timeoutMs?: number;
}

export function spawnGroup(argv: string[], opts: SpawnGroupOptions): GroupRun {
  const child = startChild(argv, {
    kind: 'agent',
    base: opts.env,
    extra: opts.extra,
    cwd: opts.cwd,
    detached: true,
    stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  const identity = child.pid ? identityOf(child.pid) : { pid: 0, pgid: 0, proc_start: null };
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  function collect(stream: 'stdout' | 'stderr') {
    let partial = '';
    const flush = () => {
      if (partial && opts.onLine) opts.onLine(stream, partial);
      partial = '';
    };
    const onData = (chunk: Buffer) => {
      if (size < opts.maxBytes) {
        const take = chunk.subarray(0, opts.maxBytes - size);
        chunks.push(take);
        size += take.length;
        if (take.length < chunk.length) truncated = true;
      } else {
        truncated = true;
      }
      if (!opts.onLine) return;
      partial += chunk.toString('utf8');
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) opts.onLine(stream, line);
      if (partial.length > 64 * 1024) {
        opts.onLine(stream, partial);
        partial = '';
      }
    };
    return { onData, flush };
  }
  const out = collect('stdout');
  const err = collect('stderr');
  child.stdout?.on('data', out.onData);
  child.stdout?.on('end', out.flush);
  child.stderr?.on('data', err.onData);
  child.stderr?.on('end', err.flush);
  if (opts.stdin !== undefined && child.stdin) {
    child.stdin.on('error', () => {
      // The child may exit without reading its prompt; EPIPE is not our failure.
    });
    child.stdin.end(opts.stdin);
  }
  let timer: NodeJS.Timeout | undefined;
  if (opts.timeoutMs) {
    timer = setTimeout(() => {
      signalGroup(identity, 'SIGTERM');
      setTimeout(() => signalGroup(identity, 'SIGKILL'), 5_000).unref();
    }, opts.timeoutMs);
  }
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; output: Buffer; truncated: boolean }>((resolve) => {
    child.on('error', (err) => {
      if (timer) clearTimeout(timer);
      const msg = Buffer.from(`failed to start: ${err.message}\n`);
      resolve({ code: 127, signal: null, output: msg, truncated: false });
    });
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      resolve({ code, signal, output: Buffer.concat(chunks), truncated });
    });
  });
  return { child, identity, done };
}
