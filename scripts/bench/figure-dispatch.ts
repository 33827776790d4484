// A job's way to its agent: from `POST /jobs` on a real `svc trigger serve` to the first byte
// the agent writes, sandboxed with its egress gate, as a user's first instruction would travel. The provider writes
// one byte into a FIFO the bench is already reading (figure-sandbox.ts), so nothing polls between byte and clock.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { startTrigger } from './processes.ts';
import { median } from './stats.ts';
import { firstByte, makeRepo, waitEnded } from './figure-sandbox.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

const JOBS_BAR_MS = 300;
const TOKEN = 'bench-dispatch-token';

async function postJob(url: string, n: number): Promise<string> {
  const res = await fetch(`${url}/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ brief: `bench dispatch ${n}` }),
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

export async function measureDispatch(ctx: BenchContext): Promise<Row[]> {
  const root = join(ctx.tmp, 'dispatch');
  const fifoDir = join(root, 'fifo');
  mkdirSync(fifoDir, { recursive: true });
  const fifo = join(fifoDir, 'first');
  execFileSync('mkfifo', [fifo]);
  // A closed port: the trigger passes the URL (not SVC_SHIP) to its runs, and an empty one means the default port.
  const env = { ...ctx.env, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_API_TOKEN: TOKEN };
  const repo = makeRepo(root, fifoDir, env);
  execFileSync('git', ['remote', 'add', 'origin', 'https://github.com/bench/dispatch.git'], { cwd: repo });
  const server = await startTrigger(['--port', '0', '--repo', repo, '--db', join(root, 'trigger.db')], env);
  const times: number[] = [];
  const seen = new Set<string>();
  try {
    const n = ctx.options.quick ? 3 : 7;
    for (let i = 0; i <= n; i++) {
      const byte = firstByte(fifo);
      const t0 = performance.now();
      await postJob(server.url, i);
      const at = await byte;
      // The first round warms the page cache and the trigger's code paths.
      if (i > 0) times.push(at - t0);
      const deadline = performance.now() + 30_000;
      let run: string | null = null;
      while (!run && performance.now() < deadline) {
        run = newRun(repo, seen);
        if (!run) await new Promise((r) => setTimeout(r, 20));
      }
      if (!run) throw new Error('the job made no run');
      seen.add(run);
      await waitEnded(repo, run, deadline);
    }
  } finally {
    await server.stop();
  }
  const ms = median(times);
  ctx.log(`dispatch: POST /jobs → agent's first byte ${times.map((t) => t.toFixed(0)).join(', ')} ms`);
  return [{
    figure: 'POST /jobs → the agent\'s first byte (sandbox and gate)', value: ms, unit: 'ms', bar: `≤ ${JOBS_BAR_MS} ms`,
    pass: Number.isFinite(ms) && ms <= JOBS_BAR_MS, note: `median of ${times.length}; a real trigger server and svc start`,
  }];
}
