// The cost of the agent sandbox: time from spawning `svc start --detach` to the provider's first byte, with
// the bwrap sandbox and without it (SVC_SANDBOX=none), interleaved, median of several runs each. The provider writes
// one byte into a FIFO the bench is already reading, so no polling stands between the byte and the clock.
import { spawn, execFileSync } from 'node:child_process';
import { chmodSync, createReadStream, mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { CLI } from './processes.ts';
import { median } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

// Issue 19: the sandbox (its view, namespaces and the gate's forwarder) adds at most 30 ms.
const START_BAR_MS = 250;
const ADDED_BAR_MS = 30;

export function makeRepo(root: string, fifoDir: string, env: NodeJS.ProcessEnv): string {
  const repo = join(root, 'repo');
  mkdirSync(join(repo, '.svc'), { recursive: true });
  const git = (args: string[]) => execFileSync('git', args, { cwd: repo, env, stdio: 'ignore' });
  git(['init', '-q', '-b', 'main']);
  writeFileSync(join(repo, 'a.txt'), 'a\n');
  // Committed, as a project commits its .svc/: the trigger's jobs run the default provider, the bench's `first`.
  writeFileSync(join(repo, '.svc', 'config.json'), JSON.stringify({ provider: 'first' }));
  git(['add', '.']);
  git(['-c', 'user.name=bench', '-c', 'user.email=bench@localhost', 'commit', '-qm', 'init']);
  const provider = join(root, 'first-byte.sh');
  writeFileSync(provider, `#!/bin/sh\nprintf x > "${join(fifoDir, 'first')}"\ncat > /dev/null\n`);
  chmodSync(provider, 0o755);
  // A folder outside the run's tree is the operator's to grant (DESIGN §7a), so the provider is the operator's.
  const operator = { providers: { first: { command: [provider], writable: [fifoDir] } } };
  mkdirSync(join(env.HOME!, '.svc'), { recursive: true });
  writeFileSync(join(env.HOME!, '.svc', 'operator.json'), JSON.stringify(operator));
  return repo;
}

/** Resolves with the time of the first byte written into `fifo`. */
export function firstByte(fifo: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const stream = createReadStream(fifo);
    stream.once('data', () => {
      const at = performance.now();
      stream.destroy();
      resolve(at);
    });
    stream.once('error', reject);
  });
}

export async function waitEnded(repo: string, run: string, deadline: number): Promise<void> {
  const path = join(repo, '.svc', 'runs', run, 'state.json');
  while (performance.now() < deadline) {
    const status = existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as { status?: string }).status : null;
    if (status === 'succeeded' || status === 'failed' || status === 'stopped') return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`run ${run} did not end`);
}

async function timeOne(repo: string, fifo: string, env: NodeJS.ProcessEnv): Promise<number> {
  const byte = firstByte(fifo);
  const t0 = performance.now();
  const child = spawn(process.execPath, [CLI, 'start', '--brief', 'bench', '--provider', 'first', '--detach'], {
    cwd: repo, env, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number | null>((r) => child.once('close', r));
  if (code !== 0) throw new Error(`svc start exited ${code}: ${err.trim().split('\n').pop()}`);
  const at = await byte;
  await waitEnded(repo, (JSON.parse(out) as { run: string }).run, performance.now() + 30_000);
  return at - t0;
}

export async function measureSandbox(ctx: BenchContext): Promise<Row[]> {
  const root = join(ctx.tmp, 'sandbox');
  const fifoDir = join(root, 'fifo');
  mkdirSync(fifoDir, { recursive: true });
  const fifo = join(fifoDir, 'first');
  execFileSync('mkfifo', [fifo]);
  const env = { ...ctx.env, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9' };
  const repo = makeRepo(root, fifoDir, env);
  const times = ctx.options.quick ? 3 : 7;
  const bare: number[] = [];
  const boxed: number[] = [];
  // Interleaved, after one warm-up of each, so drift on a shared machine touches both alike.
  await timeOne(repo, fifo, { ...env, SVC_SANDBOX: 'none' });
  await timeOne(repo, fifo, env);
  for (let i = 0; i < times; i++) {
    bare.push(await timeOne(repo, fifo, { ...env, SVC_SANDBOX: 'none' }));
    boxed.push(await timeOne(repo, fifo, env));
  }
  const bareMs = median(bare);
  const boxedMs = median(boxed);
  const added = boxedMs - bareMs;
  const ms = (times: number[]) => times.map((t) => t.toFixed(0)).join(', ');
  ctx.log(`sandbox: first byte without ${ms(bare)} ms; with ${ms(boxed)} ms`);
  return [
    {
      figure: 'svc start → provider first byte, no sandbox', value: bareMs, unit: 'ms', bar: 'info', pass: null,
      note: `median of ${times}, --detach, SVC_SANDBOX=none`,
    },
    // DESIGN §7: `svc start --brief` → the agent's first instruction ≤ 250 ms (sandbox and gate on).
    {
      figure: 'svc start → provider first byte, bwrap sandbox', value: boxedMs, unit: 'ms', bar: `≤ ${START_BAR_MS} ms`,
      pass: Number.isFinite(boxedMs) && boxedMs <= START_BAR_MS, note: `median of ${times}, --detach`,
    },
    {
      figure: 'agent sandbox: added time to first byte', value: added, unit: 'ms', bar: `≤ ${ADDED_BAR_MS} ms`,
      pass: Number.isFinite(added) && added <= ADDED_BAR_MS, note: 'difference of the medians above',
    },
  ];
}
