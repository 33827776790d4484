// Cold start: `svc control serve --port 0` from spawn to the first 200 from /ready, and `svc --version`
// from spawn to exit. Each is the median of several fresh processes of the pinned Node.
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { CLI, startControl } from './processes.ts';
import { runsDbPath } from './runs-db.ts';
import { median, meetsBar } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

async function waitReady(url: string, deadline: number): Promise<void> {
  for (;;) {
    try {
      const res = await fetch(`${url}/ready`);
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not accepting yet
    }
    if (performance.now() > deadline) throw new Error(`${url}/ready never answered 200`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

async function timeServeToReady(dbPath: string, ctx: BenchContext): Promise<number> {
  const t0 = performance.now();
  const control = await startControl(dbPath, ctx.env);
  try {
    await waitReady(control.url, t0 + 30_000);
    return performance.now() - t0;
  } finally {
    await control.stop();
  }
}

function timeVersion(env: NodeJS.ProcessEnv): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, '--version'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code === 0) resolve(performance.now() - t0);
      else reject(new Error(`svc --version exited ${code}`));
    });
  });
}

export async function measureStartup(ctx: BenchContext): Promise<Row[]> {
  const times = ctx.options.quick ? 3 : 7;
  // Start over the big DB when it exists (a restart of a server that holds history); else a fresh one.
  const big = runsDbPath(ctx.outDir, ctx.options.runs);
  const dbPath = join(ctx.tmp, 'startup.db');
  if (existsSync(big)) copyFileSync(big, dbPath);
  const serve: number[] = [];
  for (let i = 0; i < times; i++) serve.push(await timeServeToReady(dbPath, ctx));
  const version: number[] = [];
  for (let i = 0; i < times; i++) version.push(await timeVersion(ctx.env));
  const serveMs = median(serve);
  const versionMs = median(version);
  const ms = (times: number[]) => times.map((t) => t.toFixed(0)).join(', ');
  ctx.log(`startup: serve→/ready ${ms(serve)} ms; --version ${ms(version)} ms`);
  const dbNote = existsSync(big) ? `over the ${ctx.options.runs.toLocaleString('en-US')}-run DB` : 'over a new DB';
  return [
    {
      figure: 'svc control serve --port 0 → /ready 200', value: serveMs, unit: 'ms', bar: '< 300 ms',
      pass: meetsBar(serveMs, { kind: 'max', value: 300 }), note: `median of ${times}, ${dbNote}`,
    },
    {
      figure: 'svc --version', value: versionMs, unit: 'ms', bar: '< 100 ms',
      pass: meetsBar(versionMs, { kind: 'max', value: 100 }), note: `median of ${times}`,
    },
  ];
}
