// A job's way to its agent: from `POST /jobs` on a real `svc trigger serve` to the first byte
// the agent writes, sandboxed with its egress gate, as a user's first instruction would travel. The provider writes
// one byte into a FIFO the bench is already reading (figure-sandbox.ts), so nothing polls between byte and clock.
// Two served repositories, jobs interleaved: a `checkout=` project, and a `clone=` repository of 5,000 files whose
// every job first fetches the mirror and makes its own checkout (src/trigger/managed-checkout.ts). Its machine floor:
// a bare `git clone` of the same origin into fresh folders beside it, 3 right before the first `clone=` job and 3
// right after the last, outside the rounds: inside, it would lengthen the gap in which the trigger writes the next
// job's spare checkout. On a filesystem whose inode allocator skips recently freed inodes (ext4 without a journal,
// docs/bench.md) a mass delete shortly before slows every 5,000-file checkout by seconds; the floor shows when that,
// not svc, was slow. Nothing the bench made is removed before the run's end.
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { startTrigger, type ServerProcess } from './processes.ts';
import { median } from './stats.ts';
import { firstByte, makeRepo, waitEnded } from './figure-sandbox.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

const JOBS_BAR_MS = 300;
const TOKEN = 'bench-dispatch-token';
const CLONE_FILES = 5_000;

async function postJob(url: string, n: number, repo: string): Promise<string> {
  const res = await fetch(`${url}/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ brief: `bench dispatch ${n}`, repo }),
  });
  if (res.status !== 202) throw new Error(`POST /jobs answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { job_id: string }).job_id;
}

/** The run the trigger started for the newest job: the only run folder not seen before. */
function newRun(repo: string, seen: Set<string>): string | null {
  const runs = join(repo, '.svc', 'runs');
  let names: string[] = [];
  try {
    names = readdirSync(runs);
  } catch {
    return null;
  }
  return names.find((n) => !seen.has(n)) ?? null;
}

// Not synchronous: a loop blocked for the seconds a slow clone takes would miss the trigger closing an idle
// keep-alive connection, and the next POST would go out on the closed one ("fetch failed").
async function git(cwd: string, env: NodeJS.ProcessEnv, args: string[]): Promise<void> {
  await promisify(execFile)('git', args, { cwd, env });
}

/** An origin of 5,000 files in 50 folders, committing the bench project's .svc/config.json. */
async function makeOrigin(root: string, project: string, env: NodeJS.ProcessEnv): Promise<string> {
  const origin = join(root, 'origin');
  mkdirSync(join(origin, '.svc'), { recursive: true });
  await git(origin, env, ['init', '-q', '-b', 'main']);
  for (let i = 0; i < CLONE_FILES - 1; i++) {
    const dir = join(origin, 'src', `m${i % 50}`);
    if (i < 50) mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `f${i}.ts`), `export const v${i} = ${i}; // ${'x'.repeat(200)}\n`);
  }
  execFileSync('cp', [join(project, '.svc', 'config.json'), join(origin, '.svc', 'config.json')]);
  await git(origin, env, ['add', '.']);
  await git(origin, env, ['-c', 'user.name=bench', '-c', 'user.email=bench@localhost', 'commit', '-qm', 'init']);
  return origin;
}

/** Times one job from POST to the agent's byte, then waits its run out; `dirOf` is where the job's runs live. */
async function timeJob(server: ServerProcess, fifo: string, repo: string, n: number,
  dirOf: (jobId: string) => string, seen: Set<string>): Promise<number> {
  const byte = firstByte(fifo);
  const t0 = performance.now();
  const jobId = await postJob(server.url, n, repo);
  const at = await byte;
  const dir = dirOf(jobId);
  const deadline = performance.now() + 30_000;
  let run: string | null = null;
  while (!run && performance.now() < deadline) {
    run = newRun(dir, seen);
    if (!run) await new Promise((r) => setTimeout(r, 20));
  }
  if (!run) throw new Error('the job made no run');
  seen.add(run);
  await waitEnded(dir, run, deadline);
  return at - t0;
}

export async function measureDispatch(ctx: BenchContext): Promise<Row[]> {
  const root = join(ctx.tmp, 'dispatch');
  const fifoDir = join(root, 'fifo');
  mkdirSync(fifoDir, { recursive: true });
  const fifo = join(fifoDir, 'first');
  execFileSync('mkfifo', [fifo]);
  const checkouts = join(root, 'checkouts');
  // A closed port: the trigger passes the URL (not SVC_SHIP) to its runs, and an empty one means the default port.
  const env = {
    ...ctx.env, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_API_TOKEN: TOKEN,
    SVC_TRIGGER_CHECKOUTS: checkouts,
  };
  const repo = makeRepo(root, fifoDir, env);
  const origin = await makeOrigin(root, repo, env);
  const reposFile = join(root, 'repos.conf');
  writeFileSync(reposFile, `bench/dispatch checkout=${repo} default\nbench/clone clone=file://${origin}\n`);
  const server = await startTrigger(['--port', '0', '--repos', reposFile, '--db', join(root, 'trigger.db')], env);
  const served: number[] = [];
  const cloned: number[] = [];
  const floor = { before: [] as number[], after: [] as number[] };
  const timeFloor = async (when: keyof typeof floor) => {
    for (let k = 0; k < 3; k++) {
      const t0 = performance.now();
      await git(root, env, ['clone', '--quiet', origin, join(root, 'floor', `${when}-${k}`)]);
      floor[when].push(performance.now() - t0);
    }
  };
  const seen = new Set<string>();
  try {
    const n = ctx.options.quick ? 3 : 7;
    // Interleaved, so drift on a shared machine touches both alike; the first round warms the page cache, the
    // trigger's code paths and the clone's mirror (its first fetch copies every object).
    for (let i = 0; i <= n; i++) {
      const a = await timeJob(server, fifo, 'bench/dispatch', i, () => repo, seen);
      if (i === 0) await timeFloor('before');
      const b = await timeJob(server, fifo, 'bench/clone', i, (id) => join(checkouts, 'bench', 'clone', id), seen);
      if (i > 0) served.push(a), cloned.push(b);
    }
    await timeFloor('after');
  } finally {
    await server.stop();
  }
  const fmt = (times: number[]) => times.map((t) => t.toFixed(0)).join(', ');
  ctx.log(`dispatch: POST /jobs → agent's first byte: checkout= ${fmt(served)} ms; clone= ${fmt(cloned)} ms; ` +
    `bare git clone before the first clone= job ${fmt(floor.before)} ms, after the last ${fmt(floor.after)} ms`);
  const row = (figure: string, times: number[], note: string): Row => {
    const ms = median(times);
    return {
      figure, value: ms, unit: 'ms', bar: `≤ ${JOBS_BAR_MS} ms`, pass: Number.isFinite(ms) && ms <= JOBS_BAR_MS,
      note: `median of ${times.length}; a real trigger server and svc start; ${note}`,
    };
  };
  return [
    row('POST /jobs → the agent\'s first byte (sandbox and gate)', served, 'a served checkout='),
    row('POST /jobs → the agent\'s first byte, managed clone= of 5,000 files', cloned,
      `every job asks the origin (file://) and gets its own checkout; machine floor before / after: ` +
      `${median(floor.before).toFixed(0)} / ${median(floor.after).toFixed(0)} ms`),
    ...(['before', 'after'] as const).map((when): Row => ({
      figure: `bare \`git clone\` of the same origin, ${when === 'before' ? 'before the first' : 'after the last'} ` +
        'clone= job (its machine floor)',
      value: median(floor[when]), unit: 'ms', bar: '', pass: null,
      note: 'median of 3; no svc, fresh folders on the same filesystem; seconds here mean the filesystem, not svc, ' +
        'was slow (docs/bench-history.md, "A 5,000-file checkout after a mass delete")',
    })),
  ];
}
