// Runs a child in its own process group with argv (no shell), streams its lines and keeps a capped copy of the output.
import { spawn, type ChildProcess } from 'node:child_process';
import { identityOf, signalGroup, type ProcIdentity } from './proc-group.ts';

export interface GroupRun {
  child: ChildProcess;
  identity: ProcIdentity;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; output: Buffer; truncated: boolean }>;
}

export interface SpawnGroupOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdin?: string;
  onLine?: (stream: 'stdout' | 'stderr', line: string) => void;
  maxBytes: number;
  timeoutMs?: number;
}

export function spawnGroup(argv: string[], opts: SpawnGroupOptions): GroupRun {
  const [bin, ...args] = argv;
  const child = spawn(bin!, args, {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    shell: false,
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
